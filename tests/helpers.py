"""The helpers test modules share: they import them from here, never from one another."""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any, TypeVar

import pytest
from flask import Flask
from flask.testing import FlaskClient
from memoryd_sdk import MemorydConsole
from rq import SimpleWorker
from sqlalchemy import Connection, select

from commands.handlers import Outcome
from commands.model import SaveMemory
from events.types import DomainEvent, EventMetadata, MemorySaved, RecordedEvent
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.embeddings.embedder import Embedder
from memoryd.kernel.config import Config, MemorySettings, SearchSettings, ServerSettings, StorageSettings, WorkerSettings
from memoryd.kernel.domain import Memory, Namespace
from memoryd.storage import migrate
from memoryd.storage.driver import Transaction
from memoryd.storage.schema import memory_counts, structured_memories
from projections.filters import MemoryFilter, ScopePattern
from projections.search import SearchIndex, Tuning

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, which the test expects to exist (a lookup that found nothing fails the test here)."""
    assert value is not None
    return value


def table_rows(services: Services) -> list[dict[str, Any]]:
    """The whole structured_memories table, in a stable order."""
    with services.database.read() as conn:
        rows = conn.execute(select(structured_memories).order_by(structured_memories.c.memory_id))
        return [dict(row._mapping) for row in rows]


def refuse_rows(services: Services, table: str, value: str, *, postgres: str, sqlite: str,
                sqlite_failure: str = "SELECT RAISE(ABORT, 'row refused')") -> Callable[[], None]:
    """Make the database itself refuse any ``table`` row whose ``postgres`` / ``sqlite`` expression (over ``NEW``)
    equals ``value`` (a trigger): a write that fails where the server runs it, which for a deferred write is
    at its transaction's next round trip, not at its call. On SQLite the trigger runs ``sqlite_failure``
    (``RAISE`` fails as a constraint would). Returns what drops the trigger again."""
    trigger = f"refuse_{table}"
    with services.database.write() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                                 f"IF {postgres} = '{value}' THEN RAISE EXCEPTION 'row refused'; END IF; "
                                 "RETURN NEW; END $$")
            conn.exec_driver_sql(f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table} FOR EACH ROW "
                                 f"EXECUTE FUNCTION {trigger}()")
        else:
            conn.exec_driver_sql(f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table} WHEN {sqlite} = '{value}' "
                                 f"BEGIN {sqlite_failure}; END")

    def drop() -> None:
        with services.database.write() as conn:
            on = f" ON {table}" if conn.dialect.name == "postgresql" else ""
            conn.exec_driver_sql(f"DROP TRIGGER {trigger}{on}")

    return drop


def refuse_memory_rows(services: Services, content: str) -> Callable[[], None]:
    """The read model's rows with this ``content`` refused by the database (``refuse_rows``)."""
    return refuse_rows(services, "structured_memories", content, postgres="NEW.content", sqlite="NEW.content")


def refuse_events(services: Services, content: str) -> Callable[[], None]:
    """The log's events carrying a memory with this ``content`` refused by the database (``refuse_rows``), not
    as a constraint would (the store takes a constraint's refusal of an event for a lost race): on SQLite
    with a malformed-JSON error."""
    return refuse_rows(services, "events", content, postgres="NEW.payload->'memory'->>'content'",
                       sqlite="json_extract(NEW.payload, '$.memory.content')", sqlite_failure="SELECT json('{')")


class SteppingClock:
    """The event store's clock in tests: each reading is one millisecond after the last, so events get distinct times."""

    def __init__(self, start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) -> None:
        self.now = start

    def __call__(self) -> dt.datetime:
        self.now += dt.timedelta(milliseconds=1)
        return self.now


def free_port() -> int:
    """A TCP port on the loopback nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_queued_jobs(services: Services) -> None:
    """What ``memoryd worker --burst`` runs, in this process (rq's signal handlers put back afterwards)."""
    assert services.queue is not None
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        SimpleWorker([services.queue], connection=services.redis, serializer=services.queue.serializer).work(burst=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def memory_counts_by_namespace(services: Services) -> dict[tuple[str, str, str], int]:
    """The projection's counts per (scope, scope_id, type), leaving out namespaces whose count went to 0."""
    with services.database.read() as conn:
        rows = conn.execute(select(memory_counts)).mappings()
        return {(row["scope"], row["scope_id"], row["type"]): int(row["count"]) for row in rows if row["count"]}


def rebuild_equals_live(services: Services) -> bool:
    """Throw the read model away, replay the log, and compare with what was live (rows and counts)."""
    live = table_rows(services), memory_counts_by_namespace(services)
    services.projector.rebuild(services.memory_table)
    return (table_rows(services), memory_counts_by_namespace(services)) == live


GLOBAL = Namespace("global", "")
UNDER_CI = os.environ.get("CI", "").lower() == "true"


def save_memory(services: Services, name: str, content: str = "content", namespace: Namespace = GLOBAL,
                memory_type: str | None = None, surface: str = "cli") -> Outcome:
    """Save through the command bus, as the CLI would (no HTTP in between)."""
    command = SaveMemory(name, content, "description", memory_type, namespace)
    return services.bus.handle(command, EventMetadata(surface=surface))


def names(response: Any) -> list[str]:
    """The names in a list or search answer, in its order (the answer must be a 200)."""
    assert response.status_code == 200, response.json
    return [row["name"] for row in response.json["memories"]]


class RecordingProjection:
    """Remembers every position it is given, in order."""

    name = "recording"

    def __init__(self) -> None:
        self.positions: list[int] = []

    def apply(self, tx: Transaction, recorded: RecordedEvent) -> None:
        self.positions.append(recorded.position)

    def reset(self, conn: Connection) -> None:
        self.positions.clear()


def spawn_worker(services: Services, log_path: str | None = None, module: str = "memoryd") -> subprocess.Popen[bytes]:
    """``memoryd worker`` on the services' database, Redis and queue; its log to ``log_path`` if given. ``module``:
    what runs it (``tests.vector_worker``: with the fake embedder)."""
    env = {**os.environ, "MEMORYD_DATABASE_URL": services.config.storage.database_url,
           "MEMORYD_REDIS_URL": services.config.workers.redis_url, "MEMORYD_QUEUE": services.config.workers.queue,
           "MEMORYD_CATCH_UP_INTERVAL_MS": "100"}
    with open(log_path or os.environ.get("MEMORYD_TEST_WORKER_LOG", os.devnull), "ab") as log:  # the child keeps its copy
        return subprocess.Popen([sys.executable, "-m", module, "worker"], env=env, stdout=log, stderr=log)


def stop(process: subprocess.Popen[Any], timeout: float = 30.0) -> None:
    """Ask ``process`` to stop (SIGTERM) and wait; on a loaded machine, stop it hard rather than leave it running
    into the next test."""
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds (an observed state, not a guess at timing); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def http_call(port: int, token: str, method: str, path: str, body: Any = None,
              headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """One request to a server on the loopback: status, JSON body, headers (errors answered, not raised)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def wait_until_serving(url: str, timeout: float = 30.0) -> bool:
    """Poll ``url`` until an HTTP server answers it; False if none did within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return True
        except OSError:
            time.sleep(0.1)
    return False


PROJECTS = "/v1/api/admin/projects"


class World:
    """Users, a project, workstreams and agent sessions, made through the admin API (fixture ``world``)."""

    def __init__(self, admin: Any, services: Services) -> None:
        self.admin, self.services = admin, services
        self.owner = services.directory.create_user("owner")
        self.member = services.directory.create_user("member")
        self.stranger = services.directory.create_user("stranger")
        self.project = admin.post(PROJECTS, json={"name": "apollo", "owner": self.owner}).json["project_id"]

    def workstream(self, owner: str | None, project: str | None = None, memory: bool = True) -> str:
        body = {"name": "ws", "owner": owner, "project_id": project, "persona": {"memory": memory}}
        response = self.admin.post("/v1/api/admin/workstreams", json=body)
        assert response.status_code == 201, response.json
        return str(response.json["workstream_id"])

    def session(self, workstream: str, user: str | None = None, kind: str = "interactive",
                parent: str | None = None) -> AgentSession:
        body = {"kind": kind, "workstream_id": workstream, "user_id": user, "parent_session_id": parent}
        response = self.admin.post("/v1/api/sessions", json=body)
        assert response.status_code == 201, response.json
        return AgentSession(self.admin.client, response.json["session_id"], response.json["token"])

    def grant(self, user: str, access: str) -> None:
        self.admin.request("PUT", f"{PROJECTS}/{self.project}/members/{user}", json={"access": access})


class AgentSession:
    """An agent session over HTTP: calling it runs the memory tool; ``turn`` and ``signal`` are the turn routes."""

    def __init__(self, client: Any, session_id: str, token: str) -> None:
        self.client, self.session_id, self.token = client, session_id, token
        self.headers = {"Authorization": f"Bearer {token}"}

    def __call__(self, action: str, **arguments: Any) -> Any:
        response = self.client.post(f"/v1/api/sessions/{self.session_id}/memory", json={"action": action, **arguments},
                                    headers=self.headers)
        assert response.status_code == 200, response.json
        return response.json

    def save(self, name: str, content: str = "content", **arguments: Any) -> Any:
        arguments.setdefault("description", "d")
        return self("save", name=name, content=content, **arguments)

    def post_turn(self, body: Any, **headers: str) -> Any:
        """The raw response of ``POST .../turns``."""
        return self.client.post(f"/v1/api/sessions/{self.session_id}/turns", json=body,
                                headers=self.headers | headers)

    def turn(self, *user_texts: str, **body: Any) -> Any:
        """A turn whose conversation is these user messages (with assistant replies between); its body."""
        messages: list[dict[str, Any]] = []
        for text in user_texts:
            messages += [{"role": "assistant", "content": "ok"}] if messages else []
            messages.append({"role": "user", "content": text})
        if messages:
            body.setdefault("messages", messages)
        response = self.post_turn(body)
        assert response.status_code == 200, response.json
        return response.json

    def signal(self, body: Any) -> Any:
        return self.client.post(f"/v1/api/sessions/{self.session_id}/signals", json=body, headers=self.headers)

    def receipt(self, turn_id: str) -> Any:
        return self.client.get(f"/v1/api/sessions/{self.session_id}/turns/{turn_id}", headers=self.headers)


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    admin_token: str
    database_url: str

    def caller(self, name: str) -> dict[str, str]:
        """A fresh user (and a colleague) with a read/write token: what one SDK run acts as."""
        services = build_services(Config(storage=StorageSettings(database_url=self.database_url)))
        try:
            user = services.directory.create_user(f"{name}-{uuid.uuid4().hex[:8]}")  # names are unique
            token = services.directory.create_token(user, ["read", "write"], [])[1]
            other = services.directory.create_user(f"{name}_colleague-{uuid.uuid4().hex[:8]}")
            return {"user_id": user, "token": token, "colleague_id": other}
        finally:
            services.database.dispose()

    def agent(self, name: str) -> dict[str, str]:
        """A fresh user's workstream and an open interactive session in it (what an MCP server or a hook acts as)."""
        caller = self.caller(name)
        with MemorydConsole(self.base_url, token=self.admin_token) as console:
            workstream = console.create_workstream(name, owner=caller["user_id"])
            session = console.open_session("interactive", workstream.workstream_id, user_id=caller["user_id"])
        assert session.info is not None
        return {**caller, "url": self.base_url, "workstream_id": workstream.workstream_id,
                "session_id": session.session_id, "session_token": session.info.token}


@contextmanager
def memoryd_serve(url: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``memoryd serve`` on ``url``: its process and port (stopped at the end unless a test stopped it)."""
    port = free_port()
    env = {**os.environ, "MEMORYD_DATABASE_URL": url, "MEMORYD_PORT": str(port)}
    server = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/healthz"), "memoryd serve did not come up"
        yield server, port
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(30)


@contextmanager
def serving(url: str) -> Iterator[LiveServer]:
    """A live ``memoryd serve`` on ``url``'s database (migrated here), with an admin token."""
    services = make_services(url)
    admin = services.directory.create_user("admin")
    admin_token = services.directory.create_token(admin, ["read", "write", "service"], ["admin.memories"])[1]
    services.database.dispose()
    with memoryd_serve(url) as (_, port):
        yield LiveServer(f"http://127.0.0.1:{port}", admin_token, url)


CHROMIUM = os.environ.get("MEMORYD_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium() -> Iterator[Any]:
    """Chromium driven by Playwright (Debian's ``chromium``; never a downloaded browser): skipped when either
    is missing, but under ``CI=true`` a missing browser fails loudly."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the console's browser tests need the playwright package (the test extra)"
    else:
        problem = "" if os.access(CHROMIUM, os.X_OK) else f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if problem:
        if UNDER_CI:
            pytest.fail(f"the browser tests must run under CI=true: {problem}", pytrace=False)
        pytest.skip(problem)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def make_services(url: str, redis_url: str = "", queue: str | None = None, memory: MemorySettings | None = None,
                  search: SearchSettings | None = None, embedder: Embedder | None = None, **server: Any) -> Services:
    """Services on ``url`` with a fresh schema; ``redis_url`` switches projection to workers; ``embedder`` turns the
    semantic channel on.

    Each gets a queue of its own: other test runs may share the test Redis database.
    """
    workers = WorkerSettings(redis_url=redis_url, queue=queue or f"memoryd-test-{uuid.uuid4().hex[:8]}")
    config = Config(memory=memory or MemorySettings(), storage=StorageSettings(database_url=url), workers=workers,
                    server=ServerSettings(**server), search=search or SearchSettings())
    services = build_services(config, embedder)
    migrate.upgrade(services.database)
    return services



@dataclass
class Caller:
    """A user with a token, and a client that sends it."""

    user_id: str
    token: str
    client: FlaskClient

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        return self.client.open(path, method=method, headers=headers, **kwargs)

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, **kwargs)

    def save(self, name: str, content: str = "some content", description: str = "a description", **fields: Any) -> Any:
        return self.post("/v1/api/memories", json={"name": name, "content": content, "description": description, **fields})



MakeCaller = Callable[..., Caller]



def caller_factory(app: Flask, svc: Services) -> MakeCaller:
    def make(scopes: str = "read,write", permissions: tuple[str, ...] = (), user_id: str | None = None) -> Caller:
        user = user_id or svc.directory.create_user(f"user-{uuid.uuid4().hex[:8]}")
        _, token = svc.directory.create_token(user, scopes.split(","), list(permissions))
        return Caller(user, token, app.test_client())

    return make



@dataclass
class Cast:
    """Alice and Bob with a workstream each, a service token, and a workstream nobody owns."""

    alice: Caller
    bob: Caller
    service: Caller
    alice_workstream: str
    bob_workstream: str
    unowned_workstream: str


def plant(services: Services, name: str, memory: dict[str, Any]) -> int:
    """A memory.save event written directly into the log; returns its position."""
    return services.store.append_rows([dict(
        stream_id=f'memory:["global","",{json.dumps(name)}]', stream_version=1, event_type="memory.save",
        schema_version=1, payload={"memory": memory}, meta={"actor_user_id": "intruder"},
        recorded_at="2026-12-01T00:00:00.000000Z")])[0]



def a_memory(name: str, **fields: str) -> dict[str, str]:
    return {"memory_id": f"id-{name}", "name": name, "description": "planted", "type": "general", "scope": "global",
            "scope_id": "", "content": "planted content", "created": "2026-12-01T00:00:00",
            "updated": "2026-12-01T00:00:00", **fields}


def saved_event(index: int) -> MemorySaved:
    """The save of memory ``m{index}`` (id ``id{index}``) in the global namespace."""
    name = f"m{index}"
    moment = "2026-01-01T00:00:00"
    return MemorySaved(Memory(f"id{index}", name, "d", "general", "global", "", "c", moment, moment))


WORDS = [f"w{index}" for index in range(40)]

GLOBAL_FILTER = MemoryFilter(scopes=(ScopePattern("global"),))

_positions = count(1)



def memory(name: str, content: str, scope: str = "global", scope_id: str = "", memory_type: str = "general",
           updated: str = "2026-01-01T00:00:00", description: str = "d") -> Memory:
    return Memory(f"id-{scope}-{scope_id}-{name}", name, description, memory_type, scope, scope_id, content,
                  "2026-01-01T00:00:00", updated)



def recorded(event: DomainEvent) -> RecordedEvent:
    return RecordedEvent(next(_positions), "s", 1, event.event_type, 1, event.payload(), {}, "")



def index_of(memories: list[Memory]) -> SearchIndex:
    index = SearchIndex()
    index.apply_all(recorded(MemorySaved(m)) for m in memories)
    return index



CALLERS = [GLOBAL_FILTER, MemoryFilter(scopes=None), MemoryFilter(scopes=(ScopePattern("user", "alice"),)),
           MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", "bob"))),
           MemoryFilter(scopes=(ScopePattern("user"),)), MemoryFilter(type="feedback", scopes=None),
           MemoryFilter(type="user", scopes=(ScopePattern("user", "carol"), ScopePattern("global")))]

SPACES = [("global", ""), ("user", "alice"), ("user", "bob"), ("user", "carol")]

TINY = Tuning(freeze_postings=60, tier_base=4, fanout=2)  # freeze every ~60 postings, merge pairs



def _slow_merge() -> None:
    threading.Event().wait(0.002)


def tiny_segments(pack_limit: int = TINY.pack_limit) -> SearchIndex:
    """An index of tiny parts whose merges are slow enough (2 ms) for writes to land mid-build."""
    return SearchIndex(tuning=dataclasses.replace(TINY, pack_limit=pack_limit),
                       merge_built=_slow_merge)



def answers(index: SearchIndex, query: str) -> list[list[tuple[str, float]]]:
    return [[(h.memory_id, round(h.score, 9)) for h in index.search(where, query, 15)] for where in CALLERS]


TYPESCRIPT = Path(__file__).resolve().parents[1] / "sdk" / "typescript"



def node_toolchain() -> str | None:
    """Why the TypeScript suite cannot run here, or None if node and npm are installed."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not installed" if missing else None



def build_typescript_sdk() -> Path:
    """``npm ci`` and the build, once per test run however many workers ask (they wait on a lock)."""
    problem = node_toolchain()
    if problem:
        if UNDER_CI:
            pytest.fail(f"the TypeScript SDK suite must run under CI=true: {problem}", pytrace=False)
        pytest.skip(problem)
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
    stamp = TYPESCRIPT / "dist" / ".built-by"
    with open(TYPESCRIPT / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == run_id:
            return TYPESCRIPT
        for command in (["npm", "ci", "--no-audit", "--no-fund"], ["npm", "run", "build"]):
            done = subprocess.run(command, cwd=TYPESCRIPT, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
        stamp.write_text(run_id)
    return TYPESCRIPT


def example_environment(live_server: LiveServer, name: str) -> dict[str, str]:
    """What an SDK example reads from its environment: the live server, a fresh user's token and the admin's."""
    caller = live_server.caller(name)
    return {"MEMORYD_URL": live_server.base_url, "MEMORYD_TOKEN": caller["token"],
            "MEMORYD_ADMIN_TOKEN": live_server.admin_token, "MEMORYD_USER_ID": caller["user_id"]}
