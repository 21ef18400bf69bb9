"""The storage roles' contracts, written once and run on SQLite and on the real PostgreSQL.

Each of these differs by backend in the SQL it sends: upserts (``ON CONFLICT``),
JSON paths into event payloads, binary blobs, timestamp comparisons, nullable
columns. The same assertions hold on both.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from sqlalchemy import select, text, update

from events.idempotency import IdempotencyClaim
from events.types import EventMetadata, MemorySaved, memory_stream_id
from memoryd.app.services import Services
from memoryd.kernel.domain import Memory, Namespace, utc_timestamp
from memoryd.storage.schema import idempotency_keys, memory_access
from projections.filters import MemoryFilter
from projections.project_tables import get_project
from projections.search import SearchService
from tests.helpers import rebuild_equals_live, save_memory


def saved(services: Services, name: str, content: str = "alpha beta", scope: str = "global", scope_id: str = "") -> Any:
    return save_memory(services, name, content, Namespace(scope, scope_id))


def test_tool_reads_are_counted_beside_the_log(any_services: Services) -> None:
    user = any_services.directory.create_user("u")
    session, _ = any_services.sessions.create("interactive", any_services.directory.create_workstream(user, "w"), user)
    tool = any_services.tool
    tool.run(session, {"action": "save", "name": "note", "content": "alpha", "description": "d"})

    first = tool.run(session, {"action": "get", "name": "note"})
    second = tool.run(session, {"action": "search", "query": "alpha"})

    assert first.memory is not None and first.memory["access_count"] == 1
    assert second.memories is not None and second.memories[0]["access_count"] == 2
    with any_services.database.read() as conn:
        assert conn.execute(select(memory_access.c.access_count)).scalars().all() == [2]


def test_a_search_snapshot_round_trips_through_the_database(any_services: Services) -> None:
    for index in range(30):
        saved(any_services, f"note{index}", f"alpha {'beta ' * index}")
    everything = MemoryFilter()
    expected = any_services.search.search(everything, "beta", 10)

    position = any_services.search.save_snapshot()
    restarted = SearchService(any_services.store, any_services.config.search.k1, any_services.config.search.b,
                              any_services.search.files.directory)

    assert position == any_services.store.head_position()
    assert restarted.snapshot_position() == position
    assert restarted.search(everything, "beta", 10) == expected


def test_the_project_tables_follow_the_log_and_rebuild_equal(any_services: Services) -> None:
    from commands.projects import CreateProject, GrantProjectAccess

    owner, member = (any_services.directory.create_user(name) for name in ("owner", "member"))
    created = any_services.bus.handle(CreateProject("p", owner), EventMetadata(surface="cli"))
    any_services.bus.handle(GrantProjectAccess(created.project.project_id, member, "read"), EventMetadata())

    with any_services.database.read() as conn:
        live = get_project(conn, created.project.project_id)
    any_services.projector.rebuild(any_services.projector.projections[1])
    with any_services.database.read() as conn:
        rebuilt = get_project(conn, created.project.project_id)

    assert live is not None and dict(live.members) == {member: "read"}
    assert rebuilt == live


def test_the_locator_finds_memories_in_the_read_model_and_in_the_unprojected_tail(any_services: Services) -> None:
    projected = saved(any_services, "projected", scope="project", scope_id="p1")
    tail = Memory("tail-id", "tail", "d", "general", "project", "p1", "c", utc_timestamp(), utc_timestamp())
    any_services.store.append(memory_stream_id("tail", "project", "p1"), 0, [MemorySaved(tail)], EventMetadata())
    locator = any_services.bus.deps.locator

    assert locator.identity_of(projected.memory.memory_id) == ("projected", Namespace("project", "p1"))
    assert locator.identity_of("tail-id") == ("tail", Namespace("project", "p1"))
    assert locator.identity_of("nobody") is None
    assert locator.names_in(Namespace("project", "p1")) == ["projected", "tail"]
    any_services.projector.catch_up()  # now the read model holds the tail too
    assert locator.identity_of("tail-id") == ("tail", Namespace("project", "p1"))
    assert locator.names_in(Namespace("project", "p1")) == ["projected", "tail"]
    assert rebuild_equals_live(any_services)


def test_idempotency_keys_expire_after_the_window(any_services: Services) -> None:
    keys = any_services.idempotency
    claim = IdempotencyClaim("user-1", "key-1", "fingerprint")
    assert keys.take(claim) is None
    keys.remember(claim, 201, {"ok": True}, keys.erasure_mark())
    held = keys.take(IdempotencyClaim("user-1", "key-1", "fingerprint"))
    assert held is not None and (held.status, held.response) == (201, {"ok": True})

    expired = utc_timestamp(dt.datetime.now(dt.UTC) - keys.window - dt.timedelta(minutes=1))
    with any_services.database.write() as conn:
        conn.execute(update(idempotency_keys).values(created=expired))

    assert keys.find("user-1", "key-1") is None
    assert keys.purge_expired() == 1
    assert keys.take(IdempotencyClaim("user-1", "key-1", "another request")) is None  # the key is free again


def test_sessions_are_found_by_id_and_by_their_own_token_only(any_services: Services) -> None:
    user = any_services.directory.create_user("u")
    workstream = any_services.directory.create_workstream(user, "w")
    session, token = any_services.sessions.create("coordinator", workstream, user)
    child, _ = any_services.sessions.create("interactive", workstream, parent_session_id=session.session_id)

    assert any_services.sessions.get(session.session_id) == session
    assert any_services.sessions.by_token(token) == session
    assert any_services.sessions.by_token(token + "x") is None
    assert (child.user_id, child.parent_session_id) == (user, session.session_id)


def test_the_directory_issues_tokens_and_keeps_workstreams(any_services: Services) -> None:
    directory = any_services.directory
    user = directory.create_user("alice")
    token_id, token = directory.create_token(user, ["read", "write"], ["admin.memories"])
    workstream = directory.create_workstream(user, "backend")

    principal = directory.authenticate(token)
    changed = directory.change_workstream(workstream, {"project_id": "p-1", "persona_memory": False})

    assert principal is not None and (principal.user_id, principal.token_id) == (user, token_id)
    assert principal.has_scope("write") and principal.has_permission("admin.memories")
    assert directory.authenticate(token + "x") is None
    assert directory.user_exists(user) and not directory.user_exists("nobody")
    assert (changed.owner_user_id, changed.project_id, changed.persona_memory) == (user, "p-1", False)
    assert directory.workstream(workstream) == changed
    assert directory.has_tokens()


def test_reads_inside_a_snapshot_share_one_transaction_and_writes_are_refused(any_services: Services) -> None:
    database, store = any_services.database, any_services.store
    saved(any_services, "first")
    with database.snapshot():
        with database.read() as first, database.read() as second:
            assert first is second
        before = store.head_position()
        with pytest.raises(RuntimeError, match="inside a snapshot"):
            saved(any_services, "second")
        assert store.head_position() == before  # nothing was appended
    saved(any_services, "second")
    assert store.head_position() > before


def test_a_snapshot_sees_one_state_on_sqlite_and_each_statement_its_own_on_postgresql(any_services: Services) -> None:
    database, store = any_services.database, any_services.store
    saved(any_services, "first")
    with database.snapshot():
        before = store.head_position()
        writer = threading.Thread(target=saved, args=(any_services, "second"))  # another thread: its own transaction
        writer.start()
        writer.join()
        inside = store.head_position()
    assert store.head_position() > before
    assert inside == (before if database.dialect == "sqlite" else store.head_position())


def test_a_turn_whose_catch_up_fails_in_the_database_degrades_and_still_resolves_its_session(
        any_services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryd.app.turn import TurnRequest

    user = any_services.directory.create_user("u")
    session, _ = any_services.sessions.create("interactive", any_services.directory.create_workstream(user, "w"), user)
    saved(any_services, "deploy_steps", "run the migrations first")

    def failing(conn: Any, position: int, limit: int) -> list[Any]:
        conn.execute(text("SELECT * FROM no_such_table"))  # on PostgreSQL this also aborts the transaction
        return []

    monkeypatch.setattr(any_services.store, "read_after", failing)
    turn = any_services.turns.compose(session, TurnRequest.parse({"query": "migrations", "preview": True}))
    assert turn.memory_enabled and turn.items == [] and "memory retrieval failed" in (turn.degraded or "")
