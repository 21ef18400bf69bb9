"""A command is one transaction: its load, decision, append and in-process projection commit together.

On SQLite and on the real PostgreSQL: one commit per save, the read model and its checkpoint move with the
append, a projection that fails is rolled back with the command, which runs again without it (the append
stands), an idempotency claim that fails takes nothing with it, and the ``Database.unit`` underneath keeps
its promises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, event, insert, select
from sqlalchemy.exc import DBAPIError, IntegrityError

from commands.handlers import Outcome
from commands.model import SaveMemory
from events.idempotency import IdempotencyClaim, IdempotencyKeyTaken
from events.types import EventMetadata, MemorySaved, memory_stream_id
from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.kernel.domain import Memory, Namespace
from memoryd.storage.schema import events, projection_checkpoints, projection_faults
from tests.helpers import make_services, present, rebuild_equals_live, refuse_events, refuse_memory_rows, table_rows

GLOBAL = Namespace("global", "")


def save(services: Services, name: str, content: str = "c", claim: IdempotencyClaim | None = None) -> Outcome:
    return services.bus.handle(SaveMemory(name, content, "d", None, GLOBAL), EventMetadata(surface="rest"), claim)


def transactions(services: Services) -> list[str]:
    """Every commit and rollback of the services' engine from now on (savepoints are not transactions)."""
    seen: list[str] = []
    event.listen(services.database.engine, "commit", lambda conn: seen.append("commit"))
    event.listen(services.database.engine, "rollback", lambda conn: seen.append("rollback"))
    return seen


def test_a_save_is_one_transaction_that_moves_the_read_model_and_its_checkpoint(any_services: Services) -> None:
    save(any_services, "first")
    seen = transactions(any_services)
    created = save(any_services, "second", "created")
    updated = save(any_services, "second", "updated")
    assert seen == ["commit", "commit"]  # one per save, and no read transaction around it
    assert {row["name"]: row["content"] for row in table_rows(any_services)} == {"first": "c", "second": "updated"}
    assert any_services.projector.checkpoint("structured_memories") == updated.position == created.position + 1
    assert any_services.projector.checkpoint("projects") == updated.position


def test_a_projection_that_fails_is_rolled_back_and_the_append_stands(any_services: Services,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    save(any_services, "before")

    def broken(conn: Connection, recorded: Any) -> None:
        conn.execute(insert(projection_checkpoints).values(name="half_written", position=1))
        raise RuntimeError("disk on fire")

    with monkeypatch.context() as patch:
        patch.setattr(any_services.memory_table, "apply", broken)
        outcome = save(any_services, "during")
    assert present(any_services.store.last_event(memory_stream_id("during", "global", ""))).position == outcome.position
    with any_services.database.read() as conn:
        names = set(conn.execute(select(projection_checkpoints.c.name)).scalars())
    assert "half_written" not in names  # what the failing projection wrote went with it
    assert [row["name"] for row in table_rows(any_services)] == ["before"]
    assert any_services.projector.checkpoint("projects") == outcome.position  # the other projection went on

    any_services.projector.catch_up()  # the next catch-up projects what the broken one could not
    assert sorted(row["name"] for row in table_rows(any_services)) == ["before", "during"]


def test_a_read_model_row_the_database_refuses_at_the_commit_still_lets_the_append_stand(any_services: Services) -> None:
    """On PostgreSQL the row goes with the commit (a deferred write), so the database refuses it only there:
    the save is run again without its projection, and the catch-up after it stops at that event."""
    save(any_services, "before")
    allow = refuse_memory_rows(any_services, "refused")
    refused = save(any_services, "refused", "refused")
    assert refused.created and refused.version == 1  # appended once: the run again found no event of its own
    assert present(any_services.store.last_event(memory_stream_id("refused", "global", ""))).position == refused.position
    assert [row["name"] for row in table_rows(any_services)] == ["before"]
    [fault] = any_services.projector.faults()
    assert (fault.projection, fault.position) == ("structured_memories", refused.position)
    assert "row refused" in fault.error
    assert any_services.projector.checkpoint("projects") == refused.position  # the other projection went on

    allow()
    any_services.projector.catch_up()
    assert sorted(row["name"] for row in table_rows(any_services)) == ["before", "refused"]
    assert any_services.projector.faults() == []
    assert rebuild_equals_live(any_services)


def test_an_event_the_database_refuses_fails_the_save_once_and_is_not_taken_for_the_projections(
        any_services: Services, caplog: pytest.LogCaptureFixture,
) -> None:
    """On PostgreSQL the event's insert goes with the step's first statement: its failure is still the save's,
    raised as the database gave it, not a projection's failure to run again without the step."""
    save(any_services, "before")
    refuse_events(any_services, "refused")
    with caplog.at_level(logging.ERROR, logger="commands.bus"), pytest.raises(DBAPIError) as raised:
        save(any_services, "refused", "refused")
    assert not isinstance(raised.value, IntegrityError)  # the database's own error, as it gave it
    assert not [record for record in caplog.records if "projection failed" in record.getMessage()]
    assert any_services.store.last_event(memory_stream_id("refused", "global", "")) is None
    assert [row["name"] for row in table_rows(any_services)] == ["before"]


def test_a_save_behind_a_recorded_fault_leaves_projecting_to_a_catch_up_that_clears_the_fault(any_services: Services) -> None:
    """The step inside a command moves the checkpoints only if no fault is recorded: a fault left behind
    by a catch-up that lost a race is cleared by the catch-up after the commit, not kept forever."""
    first = save(any_services, "first")
    with any_services.database.write() as conn:
        conn.execute(insert(projection_faults).values(projection="structured_memories", position=first.position,
                                                      event_type="memory.save", error="stale", recorded_at="t"))
    seen = transactions(any_services)
    second = save(any_services, "second")
    assert seen == ["commit", "commit"]  # the command's, then the catch-up's
    assert any_services.projector.faults() == []
    assert any_services.projector.checkpoint("structured_memories") == second.position
    assert sorted(row["name"] for row in table_rows(any_services)) == ["first", "second"]


def test_an_erasure_takes_the_rows_in_its_own_transaction(any_services: Services) -> None:
    from commands.erasure import EraseMemories

    kept, erased = save(any_services, "kept"), save(any_services, "erased_note")
    seen = transactions(any_services)
    outcome = any_services.bus.handle(EraseMemories({"memory_id": erased.memory.memory_id}, "asked"), EventMetadata())
    assert seen == ["commit"]  # the rows went with the erasure's commit, not in a catch-up after it
    assert [row["name"] for row in table_rows(any_services)] == [kept.memory.name]
    assert any_services.projector.checkpoint("structured_memories") == outcome.position


def test_the_step_applies_the_events_its_transaction_appended(any_services: Services) -> None:
    """The transaction carries what it appended; the projector's step applies it from there."""
    save(any_services, "first")
    store = any_services.store
    row = {"stream_id": "unit-test", "stream_version": 1, "event_type": "test.event", "schema_version": 1,
           "payload": {}, "meta": {}, "recorded_at": "2026-01-01T00:00:00Z"}
    with store.transaction() as tx:
        store.hold_appends(tx)
        assert tx.appended == []
        position = store.append_rows([row], tx=tx)[-1]
        assert [event.position for event in tx.appended] == [position]
        assert any_services.projector.step(tx, position)
    assert verify_chain(store).ok


def test_the_stream_read_with_the_append_lock_answers_for_that_stream_until_an_append(any_services: Services,
                                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``hold_appends`` reads the stream a command decides on, and ``last_event`` answers from it; not for
    another stream, and not once the transaction appends (that read is stale then)."""
    store, stream = any_services.store, memory_stream_id("read_ahead", "global", "")
    before = save(any_services, "read_ahead", "first")
    with store.transaction() as tx, monkeypatch.context() as patch:
        store.hold_appends(tx, reading=stream)
        patch.setattr("events.store._LAST", _Unread())
        assert present(store.last_event(stream, tx)).position == before.position  # answered from what the lock's statement read
    other = memory_stream_id("not_read_ahead", "global", "")
    elsewhere = save(any_services, "not_read_ahead")
    with store.transaction() as tx:
        store.hold_appends(tx, reading=stream)
        assert present(store.last_event(other, tx)).position == elsewhere.position  # another stream: read from the log
    with store.transaction() as tx:
        store.hold_appends(tx, reading=stream)
        position = store.append(stream, 1, [_saved("read_ahead")], EventMetadata(), tx=tx)
        assert present(store.last_event(stream, tx)).position == position


class _Unread:
    """Stands in for the stream's own read: a test fails if ``last_event`` reads the log again."""

    def rows(self, *_args: object) -> list[tuple[object, ...]]:
        raise AssertionError("the stream was read again, not answered from the lock's statement")


def _saved(name: str) -> MemorySaved:
    moment = "2026-01-01T00:00:00"
    return MemorySaved(Memory(f"id-{name}", name, "d", "general", "global", "", "c", moment, moment))


def test_a_claim_that_fails_takes_the_append_and_the_projection_with_it(any_services: Services) -> None:
    first = save(any_services, "once")
    unclaimed = IdempotencyClaim("caller", "key-1", "fingerprint")  # an attempt that does not hold the key
    with pytest.raises(IdempotencyKeyTaken):
        save(any_services, "twice", claim=unclaimed)
    assert any_services.store.head_position() == first.position
    assert [row["name"] for row in table_rows(any_services)] == ["once"]
    assert any_services.projector.checkpoint("structured_memories") == first.position


def test_reads_in_a_transaction_see_its_writes(any_services: Services) -> None:
    database, store = any_services.database, any_services.store
    row = {"stream_id": "unit-test", "stream_version": 1, "event_type": "test.event", "schema_version": 1,
           "payload": {}, "meta": {}, "recorded_at": "2026-01-01T00:00:00Z"}
    with store.transaction() as tx:
        store.append_rows([row], tx=tx)
        with database.read(tx.conn) as conn:
            assert conn.execute(select(events.c.stream_version).where(events.c.stream_id == "unit-test")).all() == [(1,)]
        assert [event.stream_version for event in store.stream("unit-test", tx)] == [1]
    assert [event.stream_version for event in store.stream("unit-test")] == [1]


def test_a_transaction_that_fails_leaves_nothing(any_services: Services) -> None:
    store = any_services.store
    with pytest.raises(ZeroDivisionError), store.transaction() as tx:
        memory = Memory("m-1", "inside", "d", "general", "global", "", "c", "2026-01-01T00:00:00", "2026-01-01T00:00:00")
        store.append(memory_stream_id("inside", "global", ""), 0, [MemorySaved(memory)], EventMetadata(), tx=tx)
        _ = 1 / 0
    assert store.head_position() == 0 and table_rows(any_services) == []


def test_a_transaction_inside_a_snapshot_is_refused(any_services: Services) -> None:
    with any_services.database.snapshot(), pytest.raises(RuntimeError, match="inside a snapshot"):
        with any_services.store.transaction():
            pass


def test_appends_go_on_while_another_catch_up_holds_a_checkpoint(postgres_url: str) -> None:
    """A rebuild (or any catch-up) holds a projection's checkpoint row for as long as it runs. A command
    then leaves its projection to after its commit instead of waiting for the row while it holds the log's
    append lock: other commands still append, and everything is projected once the row is free."""
    services = make_services(postgres_url)
    try:
        save(services, "first")
        holder = services.database.engine.connect()
        holder.begin()
        holder.execute(select(projection_checkpoints.c.position).where(
            projection_checkpoints.c.name == "structured_memories").with_for_update())
        writers = [threading.Thread(target=save, args=(services, f"during_{number}")) for number in range(2)]
        for writer in writers:
            writer.start()
        appended = _eventually(lambda: services.store.head_position() == 3)  # both appended while the row is held
        holder.rollback()
        holder.close()
        for writer in writers:
            writer.join()
        assert appended
        assert sorted(row["name"] for row in table_rows(services)) == ["during_0", "during_1", "first"]
    finally:
        services.database.dispose()


def _eventually(condition: Callable[[], bool], seconds: float = 20.0) -> bool:
    """Whether ``condition`` holds within ``seconds`` (a liveness bound, not a timing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False
