"""The event store's contract, on each backend."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import delete, func, select

from commands.model import DeleteMemory
from events.audit import AuditQuery, list_audit
from events.store import ConcurrencyConflict
from events.types import EventMetadata, MemoriesErased, MemorySaved, memory_stream_id
from memoryd.domain import Memory
from memoryd.schema import COMMON_EVENT_TYPES, event_type_is, events, metadata
from tests.helpers import GLOBAL, rebuild_equals_live, save_memory


def _event(name: str = "note") -> MemorySaved:
    moment = "2026-01-01T00:00:00"
    return MemorySaved(Memory("id-" + name, name, "d", "general", "global", "", "c", moment, moment))


def test_an_append_at_a_stale_version_is_a_conflict_and_writes_nothing(any_services):
    store = any_services.store
    stream = memory_stream_id("note", "global", "")
    store.append(stream, 0, [_event()], EventMetadata())
    with pytest.raises(ConcurrencyConflict):
        store.append(stream, 0, [_event()], EventMetadata())
    assert [event.stream_version for event in store.iter_all()] == [1]


def test_positions_increase_and_are_never_reused(any_services):
    store = any_services.store
    first = store.append(memory_stream_id("a", "global", ""), 0, [_event("a")], EventMetadata())
    second = store.append(memory_stream_id("b", "global", ""), 0, [_event("b")], EventMetadata())
    with any_services.database.write() as conn:  # even if the newest row vanished, its position stays used
        conn.execute(delete(events).where(events.c.position == second))
    third = store.append(memory_stream_id("c", "global", ""), 0, [_event("c")], EventMetadata())
    assert first < second < third


IDENTITY = st.tuples(st.text(max_size=12), st.sampled_from(["global", "user", "workstream"]), st.text(max_size=12))


@given(IDENTITY, IDENTITY)
def test_stream_ids_cannot_collide_whatever_the_characters(one, other):
    assert (memory_stream_id(*one) == memory_stream_id(*other)) == (one == other)
    assert memory_stream_id("a:b", "global", "") != memory_stream_id("b", "global", "a:")
    assert memory_stream_id('x","y', "user", "") != memory_stream_id("y", "user", 'x","')


def test_metadata_and_payload_round_trip(any_services):
    store = any_services.store
    meta = EventMetadata(actor_user_id="u1", token_id="t1", surface="rest", client_ip="10.0.0.1", request_id="r1")
    store.append(memory_stream_id("note", "global", ""), 0, [_event()], meta)
    (recorded,) = store.iter_all()
    assert recorded.metadata == meta.to_dict()
    assert recorded.to_domain() == _event()
    assert recorded.recorded_at.endswith("Z")


POSTGRES_ONLY = {"ix_events_stream_code_points"}  # an expression index (COLLATE "C"), declared in schema.py's comment


def test_the_migrations_create_exactly_the_declared_schema(any_services):
    def declared(item, name, kind, reflected, _compared):
        return not (kind == "index" and reflected and name in POSTGRES_ONLY)

    with any_services.database.read() as conn:
        differences = compare_metadata(MigrationContext.configure(conn, opts={"include_object": declared}), metadata)
    assert differences == []
    if conn.dialect.name == "postgresql":
        with any_services.database.read() as conn:
            definition = conn.exec_driver_sql("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                              "AND indexname = 'ix_events_stream_code_points'").scalar_one()
        assert 'COLLATE "C"' in definition


def test_an_event_the_code_cannot_read_stops_projection_instead_of_being_skipped(any_services):
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


def _rare_type_plan(conn) -> str:
    """How the database reads the log's erasures (a rare type): its plan, as text."""
    query = select(events.c.position).where(event_type_is(MemoriesErased.event_type), events.c.position > 0)
    compiled = query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
    if conn.dialect.name == "postgresql":  # the type as a parameter, planned without its value, as psycopg sends it
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # a tiny table is cheaper to scan: ask if it can
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql(f"PREPARE rare_type (text) AS {str(compiled).replace(repr(MemoriesErased.event_type), '$1')}")
        plan = conn.exec_driver_sql(f"EXPLAIN EXECUTE rare_type ({MemoriesErased.event_type!r})").scalars().all()
        conn.exec_driver_sql("DEALLOCATE rare_type")
        return "\n".join(plan)
    return "\n".join(row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}"))


def test_rare_event_types_are_read_through_the_index_that_saves_never_write(any_services):
    """The index by type holds no save or update (an append writes one index page less) and still serves
    a read of a rare type, such as the erasures a search checks for."""
    for number in range(3):
        save_memory(any_services, f"note_{number}")
    any_services.bus.handle(DeleteMemory("note_0", GLOBAL), EventMetadata())
    with any_services.database.read() as conn:
        indexed = conn.execute(select(func.count()).select_from(events).where(
            events.c.event_type.not_in(COMMON_EVENT_TYPES))).scalar_one()
        assert "ix_events_rare_event_type" in _rare_type_plan(conn)
    with any_services.database.read() as conn:
        assert [record.action for record in list_audit(conn, AuditQuery(action="memory.delete"))] == ["memory.delete"]
        assert len(list_audit(conn, AuditQuery(action="memory.save"))) == 3
    assert indexed == 1  # the delete alone


def test_a_log_at_0012_comes_through_the_rebuild_event_for_event(any_services):
    """Migration 0013 rebuilds SQLite's log without AUTOINCREMENT (positions come from the head): every
    row is kept as it was, the chain verifies, and appends go on from the head, writing no sequence row."""
    from alembic import command

    from memoryd import migrate

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
    migrate.upgrade(any_services.database)
    with any_services.database.read() as conn:
        assert conn.execute(select(events).order_by(events.c.position)).all() == before
    assert any_services.store.verify_chain().ok
    assert save_memory(any_services, "after_the_rebuild").position == before[-1].position + 1
    assert any_services.store.verify_chain().ok
    assert rebuild_equals_live(any_services)
    if any_services.database.dialect == "sqlite":
        with any_services.database.read() as conn:
            definition = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'events'").scalar_one()
            sequences = conn.exec_driver_sql("SELECT name FROM sqlite_sequence").scalars().all()
        assert "AUTOINCREMENT" not in definition.upper()
        assert "events" not in sequences
