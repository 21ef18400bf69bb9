"""A command is one transaction: its load, decision, append and in-process projection commit together.

On SQLite and on the real PostgreSQL: one commit per save, the read model and its checkpoint move with the
append, a projection that fails rolls back alone (the append stands), an idempotency claim that fails takes
nothing with it, and the ``Database.unit`` underneath keeps its promises.
"""

from __future__ import annotations

import pytest
from sqlalchemy import event, insert, select

from commands.model import SaveMemory
from events.idempotency import IdempotencyClaim, IdempotencyKeyTaken
from events.types import EventMetadata, memory_stream_id
from memoryd.domain import Namespace
from memoryd.schema import events, projection_checkpoints
from tests.helpers import table_rows

GLOBAL = Namespace("global", "")


def save(services, name: str, content: str = "c", claim: IdempotencyClaim | None = None):
    return services.bus.handle(SaveMemory(name, content, "d", None, GLOBAL), EventMetadata(surface="rest"), claim)


def transactions(services) -> list[str]:
    """Every commit and rollback of the services' engine from now on (savepoints are not transactions)."""
    seen: list[str] = []
    event.listen(services.database.engine, "commit", lambda conn: seen.append("commit"))
    event.listen(services.database.engine, "rollback", lambda conn: seen.append("rollback"))
    return seen


def test_a_save_is_one_transaction_that_moves_the_read_model_and_its_checkpoint(any_services):
    save(any_services, "first")
    seen = transactions(any_services)
    created = save(any_services, "second", "created")
    updated = save(any_services, "second", "updated")
    assert seen == ["commit", "commit"]  # one per save, and no read transaction around it
    assert {row["name"]: row["content"] for row in table_rows(any_services)} == {"first": "c", "second": "updated"}
    assert any_services.projector.checkpoint("structured_memories") == updated.position == created.position + 1
    assert any_services.projector.checkpoint("projects") == updated.position


def test_a_projection_that_fails_rolls_back_alone_and_the_append_stands(any_services, monkeypatch):
    save(any_services, "before")

    def broken(conn, recorded):
        conn.execute(insert(projection_checkpoints).values(name="half_written", position=1))
        raise RuntimeError("disk on fire")

    with monkeypatch.context() as patch:
        patch.setattr(any_services.memory_table, "apply", broken)
        outcome = save(any_services, "during")
    assert any_services.store.last_event(memory_stream_id("during", "global", "")).position == outcome.position
    with any_services.database.read() as conn:
        names = set(conn.execute(select(projection_checkpoints.c.name)).scalars())
    assert "half_written" not in names  # what the failing projection wrote went with it
    assert [row["name"] for row in table_rows(any_services)] == ["before"]
    assert any_services.projector.checkpoint("projects") == outcome.position  # the other projection went on

    any_services.projector.catch_up()  # the next catch-up projects what the broken one could not
    assert sorted(row["name"] for row in table_rows(any_services)) == ["before", "during"]


def test_a_claim_that_fails_takes_the_append_and_the_projection_with_it(any_services):
    first = save(any_services, "once")
    unclaimed = IdempotencyClaim("caller", "key-1", "fingerprint")  # an attempt that does not hold the key
    with pytest.raises(IdempotencyKeyTaken):
        save(any_services, "twice", claim=unclaimed)
    assert any_services.store.head_position() == first.position
    assert [row["name"] for row in table_rows(any_services)] == ["once"]
    assert any_services.projector.checkpoint("structured_memories") == first.position


def test_inside_a_unit_reads_see_its_writes_and_an_isolated_write_rolls_back_alone(any_services):
    database = any_services.database
    row = {"stream_id": "unit-test", "stream_version": 1, "event_type": "test.event", "schema_version": 1,
           "payload": {}, "meta": {}, "recorded_at": "2026-01-01T00:00:00Z"}
    with database.unit():
        with database.write() as conn:
            conn.execute(insert(events).values(row))
        with database.read() as conn:
            assert conn.execute(select(events.c.stream_version).where(events.c.stream_id == "unit-test")).all() == [(1,)]
        with pytest.raises(Exception), database.write(isolated=True) as conn:  # noqa: B017, PT011
            conn.execute(insert(events).values(row | {"stream_version": 2}))
            conn.execute(insert(events).values(row | {"stream_version": 2}))  # the stream check refuses it
        with database.write() as conn:  # the unit goes on (on PostgreSQL too: only the savepoint was aborted)
            conn.execute(insert(events).values(row | {"stream_version": 3}))
    with database.read() as conn:
        versions = conn.execute(select(events.c.stream_version).where(events.c.stream_id == "unit-test")).scalars()
        assert sorted(versions) == [1, 3]


def test_a_unit_that_fails_leaves_nothing(any_services):
    with pytest.raises(ZeroDivisionError), any_services.database.unit():
        save(any_services, "inside")
        _ = 1 / 0
    assert any_services.store.head_position() == 0 and table_rows(any_services) == []


def test_a_unit_inside_a_snapshot_is_refused(any_services):
    with any_services.database.snapshot(), pytest.raises(RuntimeError, match="inside a snapshot"):
        with any_services.database.unit():
            pass

