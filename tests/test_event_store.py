"""The event store's contract, on each backend."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import delete

from events.store import ConcurrencyConflict
from events.types import EventMetadata, MemorySaved, memory_stream_id
from memoryd.domain import Memory
from memoryd.schema import events, metadata


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
