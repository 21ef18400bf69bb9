"""Outages a client sees as latency, not errors: a database restarting, a server process killed mid-write.

An unreachable database answers 503 with ``Retry-After`` on reads and writes; the SDKs retry it, and a 409
``request_in_progress``, within their deadline. The PostgreSQL that restarts is a cluster the test starts
itself (``own_postgres``), never the shared server. A claim whose server process was killed mid-append is
taken over within seconds, and the write it guarded is applied once, on PostgreSQL and SQLite.
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from collections.abc import Callable
from typing import Any

import httpx
from memoryd_sdk import MemorydServer
from memoryd_sdk import _calls as calls
from sqlalchemy import create_engine, select

from api.app import create_app
from memoryd.app.services import Services
from memoryd.storage.schema import idempotency_keys
from tests.helpers import caller_factory, http_call, make_services, until
from tests.helpers import memoryd_serve as serving
from tests.own_postgres import OwnPostgres

MEMORIES = "/v1/api/memories"
BODY = {"name": "during", "content": "written while the database was away", "description": "d"}


def saved_names(services: Services) -> list[str]:
    return [event.payload["memory"]["name"] for event in services.store.iter_all() if event.event_type == "memory.save"]


def token_for(services: Services) -> tuple[str, str]:
    user = services.directory.create_user("agent")
    return user, services.directory.create_token(user, ["read", "write"], [])[1]


def test_an_unreachable_database_is_a_503_with_retry_after_on_reads_and_writes(own_postgres: OwnPostgres) -> None:
    services = make_services(own_postgres.new_database())
    try:
        alice = caller_factory(create_app(services), services)()
        own_postgres.stop()
        try:
            read = alice.get(MEMORIES)
            write = alice.post(MEMORIES, json=BODY, headers={"Idempotency-Key": "k-1"})
        finally:
            own_postgres.start()
        retried = alice.post(MEMORIES, json=BODY, headers={"Idempotency-Key": "k-1"})

        for answer in (read, write):
            assert answer.status_code == 503, answer.json
            assert answer.json["code"] == "database_unavailable" and answer.headers["Retry-After"] == "1"
        assert retried.status_code == 201 and alice.get(MEMORIES).json["total"] == 1
        assert saved_names(services) == ["during"]
    finally:
        services.database.dispose()


def test_an_sdk_caller_sees_latency_not_errors_while_the_database_restarts(own_postgres: OwnPostgres) -> None:
    url = own_postgres.new_database()
    services = make_services(url)
    _, token = token_for(services)
    statuses: list[int] = []
    saved: list[str] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def write_and_read(port: int) -> None:
        seen = {"response": [lambda response: statuses.append(response.status_code)]}
        with httpx.Client(timeout=30, event_hooks=seen) as client, \
                MemorydServer(f"http://127.0.0.1:{port}", token=token, httpx_client=client) as sdk:
            index = 0
            while not stop.is_set():
                try:
                    sdk.save_memory(f"note_{index}", f"fact {index}", description="d")
                    saved.append(f"note_{index}")
                    assert sdk.get_memory(f"note_{index}").content == f"fact {index}"
                except BaseException as error:
                    failures.append(error)
                    return
                index += 1

    try:
        with serving(url) as (_, port):
            caller = threading.Thread(target=write_and_read, args=(port,))
            caller.start()
            try:
                until(lambda: len(saved) >= 3 or bool(failures), "saves before the restart")
                own_postgres.stop()
                try:
                    until(lambda: 503 in statuses or bool(failures), "a call during the outage")
                finally:
                    own_postgres.start()
                before = len(saved)
                until(lambda: len(saved) >= before + 3 or bool(failures), "saves after the restart")
            finally:
                stop.set()
                caller.join(60)
        assert failures == []
        assert 503 in statuses and 500 not in statuses
        assert saved_names(services) == saved  # each acknowledged once, none lost, none twice
    finally:
        services.database.dispose()


def stall_appends(services: Services, url: str) -> Callable[[], None]:
    """Make every append wait (PostgreSQL: the events table locked against inserts; SQLite: a trigger that
    computes for minutes) after its request claimed its key; returns what lets appends through again."""
    if services.database.dialect == "postgresql":
        engine = create_engine(url)
        conn = engine.connect()
        conn.begin()
        conn.exec_driver_sql("LOCK TABLE events IN SHARE MODE")

        def unlock() -> None:
            conn.rollback()
            conn.close()
            engine.dispose()

        return unlock
    with services.database.write() as conn:
        conn.exec_driver_sql("CREATE TABLE ballast (x INTEGER)")
        conn.exec_driver_sql("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 2000) "
                             "INSERT INTO ballast SELECT x FROM n")
        conn.exec_driver_sql("CREATE TRIGGER stall_appends BEFORE INSERT ON events "
                             "BEGIN SELECT max(a.x + b.x + c.x) FROM ballast a, ballast b, ballast c; END")

    def drop() -> None:
        with services.database.write() as conn:
            conn.exec_driver_sql("DROP TRIGGER stall_appends")
            conn.exec_driver_sql("DROP TABLE ballast")

    return drop


def test_a_write_whose_server_was_killed_mid_append_is_retried_with_its_key_and_applied_once(database_url: str) -> None:
    services = make_services(database_url)
    user, token = token_for(services)
    body = {"name": "orphan", "content": "written once", "description": "d", "scope": "global"}  # as the SDK sends it
    key = {"Idempotency-Key": "orphan-key"}

    def claimed() -> bool:
        with services.database.read() as conn:
            return conn.execute(select(idempotency_keys.c.position).where(
                idempotency_keys.c.user_id == user, idempotency_keys.c.key == key["Idempotency-Key"])).first() is not None

    def send(port: int) -> None:
        with httpx.Client(timeout=60) as client:
            try:
                client.post(f"http://127.0.0.1:{port}{MEMORIES}", json=body,
                            headers={"Authorization": f"Bearer {token}", **key})
            except httpx.TransportError:  # the server died under it: no answer
                pass

    try:
        let_through = stall_appends(services, database_url)
        try:
            with serving(database_url) as (server, port):
                first = threading.Thread(target=send, args=(port,))
                first.start()
                until(claimed, "the first attempt's claim")
                server.send_signal(signal.SIGKILL)
                server.wait(30)
                first.join(30)
        finally:
            let_through()
        assert saved_names(services) == []

        with serving(database_url) as (_, port), \
                MemorydServer(f"http://127.0.0.1:{port}", token=token, retry_deadline=20) as sdk:
            retry: Any = dataclasses.replace(calls.save_memory("orphan", "written once", "d", None, "global", ""),
                                             key=key["Idempotency-Key"])
            saved = sdk._transport.send(retry)
            replayed = http_call(port, token, "POST", MEMORIES, body, key)

        assert saved.name == "orphan" and saved.content == "written once"
        assert replayed[0] == 201 and replayed[2]["Idempotent-Replayed"] == "true"
        assert replayed[1]["memory_id"] == saved.memory_id
        assert saved_names(services) == ["orphan"]
    finally:
        services.database.dispose()
