"""Point-in-time reads: ``as_of`` on the admin get, list and search answers as the service would have
answered then, built from the log over the searched namespaces only; on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from commands.model import DeleteMemory, SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from projections.as_of import range_query
from tests.helpers import Caller, MakeCaller, SteppingClock

ADMIN = "/v1/api/admin/memories"
NAMESPACES = [Namespace("global", ""), Namespace("user", "u1"), Namespace("project", "p1")]


@pytest.fixture(autouse=True)
def _distinct_times(any_services: Services) -> None:
    """Each event a millisecond after the one before, for as_of by time."""
    any_services.store.clock = SteppingClock()


@pytest.fixture
def admin(any_make_caller: MakeCaller) -> Caller:
    return any_make_caller("read,write", ("admin.memories",))


def _save(services: Services, name: str, content: str, namespace: Namespace = NAMESPACES[0], kind: str | None = None) -> int:
    return services.bus.handle(SaveMemory(name, content, "d", kind, namespace), EventMetadata()).position


def test_a_memory_as_it_was_at_each_position_and_time(admin: Caller, any_services: Services) -> None:
    first = _save(any_services, "deploy_steps", "alpha one")
    second = _save(any_services, "deploy_steps", "beta two")
    memory_id = admin.get(f"{ADMIN}?limit=1").get_json()["memories"][0]["memory_id"]
    gone = any_services.bus.handle(DeleteMemory("deploy_steps", NAMESPACES[0]), EventMetadata()).position
    then = admin.get(f"{ADMIN}/{memory_id}?as_of={first}")
    assert then.status_code == 200 and then.get_json()["content"] == "alpha one"
    assert then.headers["ETag"] == '"1"' and then.headers["X-As-Of-Position"] == str(first)
    assert admin.get(f"{ADMIN}/{memory_id}?as_of={second}").get_json()["content"] == "beta two"
    assert admin.get(f"{ADMIN}/{memory_id}?as_of={gone}").status_code == 404
    assert admin.get(f"{ADMIN}/{memory_id}").status_code == 404  # now
    event = any_services.store.event_at(first)
    assert event is not None
    moment = event.recorded_at
    by_time = admin.get(f"{ADMIN}/{memory_id}?as_of={moment}")
    assert by_time.get_json()["content"] == "alpha one" and by_time.headers["X-As-Of-Position"] == str(first)
    assert admin.get(f"{ADMIN}/{memory_id}?as_of=2000-01-01T00:00:00Z").status_code == 404  # before the log
    assert admin.get(f"{ADMIN}/{memory_id}?as_of=0005-01-01T00:00:00Z").status_code == 404  # years below 1000 too


def test_search_ranks_with_the_statistics_of_that_moment(admin: Caller, any_services: Services) -> None:
    _save(any_services, "first_note", "alpha alpha shared")
    before = _save(any_services, "second_note", "beta shared", NAMESPACES[1])
    _save(any_services, "first_note", "gamma now")  # alpha gone from it afterwards
    then = admin.get(f"{ADMIN}/search?q=alpha&as_of={before}").get_json()["memories"]
    assert [memory["name"] for memory in then] == ["first_note"] and then[0]["content"] == "alpha alpha shared"
    assert admin.get(f"{ADMIN}/search?q=alpha").get_json()["memories"] == []
    scoped = admin.get(f"{ADMIN}/search?q=shared&scope=user&scope_id=u1&as_of={before}").get_json()["memories"]
    assert [memory["name"] for memory in scoped] == ["second_note"]
    head = any_services.store.head_position()
    live = admin.get(f"{ADMIN}/search?q=shared+gamma").get_json()["memories"]
    at_head = admin.get(f"{ADMIN}/search?q=shared+gamma&as_of={head}").get_json()["memories"]
    assert [(m["name"], m["content"]) for m in at_head] == [(m["name"], m["content"]) for m in live] != []


OPERATIONS = st.lists(st.tuples(st.sampled_from(["save", "delete"]), st.sampled_from(["a", "b", "c"]),
                                st.integers(0, 2), st.sampled_from(["general", "feedback"])), min_size=1, max_size=12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_as_of_every_position_lists_what_the_live_list_said_then(admin: Caller, any_services: Services, operations: Any) -> None:
    for memory in admin.get(f"{ADMIN}?limit=200").get_json()["memories"]:  # a fresh store for each example
        admin.delete(f"{ADMIN}/{memory['memory_id']}")
    seen = []
    for number, (action, name, space, kind) in enumerate(operations):
        namespace = NAMESPACES[space]
        if action == "save":
            any_services.bus.handle(SaveMemory(name, f"v{number}", "d", kind, namespace), EventMetadata())
        else:
            admin.delete(f"/v1/api/memories/{name}")  # may be a 404: changes nothing
            any_services.bus.handle(SaveMemory(name, f"v{number}", "d", kind, namespace), EventMetadata())
            any_services.bus.handle(DeleteMemory(name, namespace), EventMetadata())
        for query in ("", "&scope=user&scope_id=u1", "&type=feedback", "&scope=project"):
            seen.append((any_services.store.head_position(), query, _listed(admin.get(f"{ADMIN}?limit=200{query}"))))
    for position, query, listed in seen:
        assert _listed(admin.get(f"{ADMIN}?limit=200{query}&as_of={position}")) == listed


def _listed(answer: Any) -> tuple[int, list[tuple[str, str, str, int]]]:
    body = answer.get_json()
    return body["total"], [(m["name"], m["scope"], m["content"], m["version"]) for m in body["memories"]]


@pytest.mark.parametrize(("as_of", "message"), [
    ("soon", "as_of must be a log position or an ISO 8601 time"),
    ("2026-13-01", "as_of must be a log position or an ISO 8601 time"),
    ("999999", "beyond the head of the log"),
    ("\u00b2", "as_of must be a log position or an ISO 8601 time"),
    ("9999-12-31T23:59:59-01:00", "as_of must be a log position or an ISO 8601 time"),
    ("9" * 5000, "as_of must be a log position or an ISO 8601 time"),
])
def test_a_bad_as_of_is_a_400(admin: Caller, any_services: Services, as_of: str, message: str) -> None:
    _save(any_services, "note", "c")
    for path in (f"{ADMIN}?as_of={as_of}", f"{ADMIN}/search?q=c&as_of={as_of}", f"{ADMIN}/anything?as_of={as_of}"):
        answer = admin.get(path)
        assert answer.status_code == 400 and message in answer.get_json()["error"], (path, answer.get_json())


def test_an_erased_memory_is_not_there_at_any_position(admin: Caller, any_services: Services) -> None:
    first = _save(any_services, "secret_plan", "zanzibarquux")
    memory_id = admin.get(f"{ADMIN}?limit=1").get_json()["memories"][0]["memory_id"]
    assert admin.post("/v1/api/admin/erasures", json={"memory_id": memory_id, "reason": "r"}).status_code == 201
    assert admin.get(f"{ADMIN}/{memory_id}?as_of={first}").status_code == 404
    assert admin.get(f"{ADMIN}?as_of={first}").get_json()["memories"] == []
    assert admin.get(f"{ADMIN}/search?q=zanzibarquux&as_of={first}").get_json()["memories"] == []


def test_a_namespace_s_history_is_one_index_range_of_the_log(any_services: Services) -> None:
    low, high = 'memory:["user","u1",', 'memory:["user","u1"-'
    query = range_query(any_services.database.dialect, low, high, 10**9)
    with any_services.database.read() as conn:
        compiled = query.compile(conn, compile_kwargs={"literal_binds": True})
        if conn.dialect.name == "sqlite":
            plan = " ".join(row[-1] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}"))
            assert "USING INDEX sqlite_autoindex_events_1" in plan and "SCAN events" not in plan, plan
        else:
            conn.execute(text("SET LOCAL enable_seqscan = off"))  # an empty table: show the plan it can use
            plan = " ".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {compiled}"))
            assert "ix_events_stream_code_points" in plan, plan
