"""The event store's contract, on each backend."""

import re
from typing import Any

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Connection, delete, select

from commands.model import DeleteMemory
from events.audit import AuditQuery, list_audit
from events.erasure import erased_positions, erasures_since, newest_erasure
from events.store import ConcurrencyConflict
from events.types import EventMetadata, MemorySaved, memory_stream_id
from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.kernel.domain import Memory
from memoryd.storage.schema import events, metadata
from tests.helpers import GLOBAL, rebuild_equals_live, save_memory


def _event(name: str = "note") -> MemorySaved:
    moment = "2026-01-01T00:00:00"
    return MemorySaved(Memory("id-" + name, name, "d", "general", "global", "", "c", moment, moment))


def test_an_append_at_a_stale_version_is_a_conflict_and_writes_nothing(any_services: Services) -> None:
    store = any_services.store
    stream = memory_stream_id("note", "global", "")
    store.append(stream, 0, [_event()], EventMetadata())
    with pytest.raises(ConcurrencyConflict):
        store.append(stream, 0, [_event()], EventMetadata())
    assert [event.stream_version for event in store.iter_all()] == [1]


def test_positions_increase_and_are_never_reused(any_services: Services) -> None:
    store = any_services.store
    first = store.append(memory_stream_id("a", "global", ""), 0, [_event("a")], EventMetadata())
    second = store.append(memory_stream_id("b", "global", ""), 0, [_event("b")], EventMetadata())
    with any_services.database.write() as conn:  # even if the newest row vanished, its position stays used
        conn.execute(delete(events).where(events.c.position == second))
    third = store.append(memory_stream_id("c", "global", ""), 0, [_event("c")], EventMetadata())
    assert first < second < third


IDENTITY = st.tuples(st.text(max_size=12), st.sampled_from(["global", "user", "workstream"]), st.text(max_size=12))


@given(IDENTITY, IDENTITY)
def test_stream_ids_cannot_collide_whatever_the_characters(one: Any, other: Any) -> None:
    assert (memory_stream_id(*one) == memory_stream_id(*other)) == (one == other)
    assert memory_stream_id("a:b", "global", "") != memory_stream_id("b", "global", "a:")
    assert memory_stream_id('x","y', "user", "") != memory_stream_id("y", "user", 'x","')


def test_metadata_and_payload_round_trip(any_services: Services) -> None:
    store = any_services.store
    meta = EventMetadata(actor_user_id="u1", token_id="t1", surface="rest", client_ip="10.0.0.1", request_id="r1")
    store.append(memory_stream_id("note", "global", ""), 0, [_event()], meta)
    (recorded,) = store.iter_all()
    assert recorded.metadata == meta.to_dict()
    assert recorded.to_domain() == _event()
    assert recorded.recorded_at.endswith("Z")


POSTGRES_ONLY = {"ix_events_stream_code_points"}  # an expression index (COLLATE "C"), declared in schema.py's comment


def test_the_migrations_create_exactly_the_declared_schema(any_services: Services) -> None:
    def declared(item: Any, name: str | None, kind: str, reflected: bool, _compared: Any) -> bool:
        return not (kind == "index" and reflected and name in POSTGRES_ONLY)

    with any_services.database.read() as conn:
        differences = compare_metadata(MigrationContext.configure(conn, opts={"include_object": declared}), metadata)
    assert differences == []
    if conn.dialect.name == "postgresql":
        with any_services.database.read() as conn:
            definition = conn.exec_driver_sql("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                              "AND indexname = 'ix_events_stream_code_points'").scalar_one()
        assert 'COLLATE "C"' in definition


def test_an_event_the_code_cannot_read_stops_projection_instead_of_being_skipped(any_services: Services) -> None:
    services = any_services
    services.store.append_rows([dict(
        stream_id="memory:mystery", stream_version=1, event_type="memory.mystery", schema_version=1,
        payload={}, meta={}, recorded_at="2026-01-01T00:00:00.000000Z")])
    services.projector.catch_up()
    assert services.projector.checkpoint("structured_memories") == 0
    assert services.projector.checkpoint("projects") == 1  # not its family: it moves on
    assert [(fault.projection, fault.position) for fault in services.projector.faults()] == [
        ("structured_memories", 1)]
    assert all("no decoder for memory.mystery v1 at position 1" in fault.error for fault in services.projector.faults())


_PARAMETER = re.compile(r"%\((\w+)\)s")  # psycopg's named parameter


def _plan(conn: Connection, statement: str, parameters: Any) -> str:
    """The database's plan for a statement the code ran, as text; on PostgreSQL its generic plan (the one a
    prepared statement settles on, which cannot see the parameters' values)."""
    if conn.dialect.name == "sqlite":
        return "\n".join(row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters))
    values: list[str] = []

    def numbered(found: re.Match[str]) -> str:
        values.append(repr(parameters[found.group(1)]))
        return f"${len(values)}"

    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # a tiny table is cheaper to scan: ask if it can
    conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
    conn.exec_driver_sql(f"PREPARE planned AS {_PARAMETER.sub(numbered, statement)}")
    try:
        return "\n".join(conn.exec_driver_sql(f"EXPLAIN EXECUTE planned ({', '.join(values)})").scalars())
    finally:
        conn.exec_driver_sql("DEALLOCATE planned")


def test_rare_event_types_are_read_through_the_index_that_saves_never_write(any_services: Services) -> None:
    """The index by type holds no save or update (an append writes one index page less) and still serves
    every read of a rare type the code makes: the erasures a search and an idempotent replay check for,
    the supersedes a replay applies, and the audit trail's action filter, in position order."""
    for number in range(3):
        save_memory(any_services, f"note_{number}")
    any_services.bus.handle(DeleteMemory("note_0", GLOBAL), EventMetadata())
    ran: list[tuple[str, Any]] = []

    def remember(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        ran.append((statement, parameters))

    sqlalchemy.event.listen(any_services.database.engine, "before_cursor_execute", remember)
    try:
        with any_services.database.read() as conn:
            newest_erasure(conn)
            erasures_since(conn, 0, None)
            erased_positions(conn)
            any_services.store.superseded(conn)
            deleted = [record.action for record in list_audit(conn, AuditQuery(action="memory.delete"))]
        any_services.erasures._earlier({"memory_id": "none"})
    finally:
        sqlalchemy.event.remove(any_services.database.engine, "before_cursor_execute", remember)
    assert deleted == ["memory.delete"]
    reads = [(statement, parameters) for statement, parameters in ran if "event_type" in statement]
    assert len(reads) == 6
    with any_services.database.read() as conn:
        plans = [_plan(conn, statement, parameters) for statement, parameters in reads]
    assert all("ix_events_rare_event_type" in plan for plan in plans), plans
    with any_services.database.read() as conn:
        assert len(list_audit(conn, AuditQuery(action="memory.save"))) == 3  # a common type: in position order


def test_a_log_at_0012_comes_through_the_rebuild_event_for_event(any_services: Services) -> None:
    """Migration 0013 rebuilds SQLite's log without AUTOINCREMENT (positions come from the head): every
    row is kept as it was, the chain verifies, and appends go on from the head, writing no sequence row."""
    from alembic import command

    from memoryd.storage import migrate

    for number in range(5):
        save_memory(any_services, f"note_{number}", f"version {number}")
    save_memory(any_services, "note_1", "changed")
    any_services.bus.handle(DeleteMemory("note_2", GLOBAL), EventMetadata())
    settings_ = migrate._alembic_config()
    with any_services.database.write() as conn:
        settings_.attributes["connection"] = conn
        command.downgrade(settings_, "0012")
    with any_services.database.read() as conn:
        before = conn.execute(select(events).order_by(events.c.position)).all()
        assert "ix_events_event_type" in [index["name"] for index in sqlalchemy.inspect(conn).get_indexes("events")]
        if conn.dialect.name == "sqlite":  # 0012's table, its sequence at the head
            assert "AUTOINCREMENT" in conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'events'").scalar_one().upper()
            assert conn.exec_driver_sql("SELECT seq FROM sqlite_sequence WHERE name = 'events'").scalar_one() == (
                before[-1].position)
    migrate.upgrade(any_services.database)
    with any_services.database.read() as conn:
        assert conn.execute(select(events).order_by(events.c.position)).all() == before
    assert verify_chain(any_services.store).ok
    assert save_memory(any_services, "after_the_rebuild").position == before[-1].position + 1
    assert verify_chain(any_services.store).ok
    assert rebuild_equals_live(any_services)
    if any_services.database.dialect == "sqlite":
        with any_services.database.read() as conn:
            definition = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'events'").scalar_one()
            sequences = conn.exec_driver_sql("SELECT name FROM sqlite_sequence").scalars().all()
        assert "AUTOINCREMENT" not in definition.upper()
        assert "events" not in sequences
