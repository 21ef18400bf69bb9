"""A projector tailing the log never skips an event on the real PostgreSQL.

With concurrent writers, positions can commit out of order, and a reader that
tails ``position > checkpoint`` passes a position whose transaction is still
open and never comes back for it. memoryd serializes appends, so that cannot
happen; these tests hold transactions open on purpose to prove it, and show
that the same reader does skip events once appends are not serialized.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from sqlalchemy import insert, select, text

from events.store import EventStore
from events.transaction import AppendTransaction
from events.types import EventMetadata, memory_stream_id
from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.storage.db import Database
from memoryd.storage.driver import Transaction
from memoryd.storage.schema import events, projection_gaps
from projections.projector import Projector
from tests.helpers import RecordingProjection, make_services, saved_event, until

pytestmark = pytest.mark.postgres

WRITERS = 8
EVENTS_PER_RUN = 2_400
# The full proof is 20 runs (MEMORYD_NEVER_SKIP_RUNS=20, ~3.5 min; result in docs/benchmarks.md).
# The default suite runs 3: 7,200 events with slow concurrent commits and not one skipped (the control
# test below shows the same reader does skip when appends are not serialized).
RUNS = int(os.environ.get("MEMORYD_NEVER_SKIP_RUNS", "3"))
T = TypeVar("T", bound=Transaction)


class SlowCommitDatabase(Database):
    """Holds every write transaction (appends and catch-ups) open 0-4 ms (seeded) before it commits."""

    def __init__(self, url: str, seed: int) -> None:
        super().__init__(url)
        self.random = random.Random(seed)

    @contextmanager
    def transaction(self, kind: type[T]) -> Iterator[T]:
        with super().transaction(kind) as tx:
            yield tx
            threading.Event().wait(self.random.uniform(0, 0.004))


class UnorderedEventStore(EventStore):
    """A naive store (the hazard, for contrast): positions from the table's sequence, appends not serialized."""

    def _append_sealed(self, tx: AppendTransaction, rows: Any, claim: Any) -> list[int]:
        unsealed = insert(events).returning(events.c.position)
        return [tx.conn.execute(unsealed, row | {"payload_sha256": "", "hash": ""}).scalar_one() for row in rows]


def _tail_while_writing(url: str, store_class: type[EventStore], seed: int) -> tuple[list[int], list[int]]:
    """Write EVENTS_PER_RUN events from 8 threads while a projector tails the log."""
    database = SlowCommitDatabase(url, seed)
    store = store_class(database)
    recording = RecordingProjection()
    projector = Projector(database, store, [recording])
    done = threading.Event()
    counter = iter(range(EVENTS_PER_RUN))
    lock = threading.Lock()

    def writer() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            store.append(memory_stream_id(f"m{index}", "global", ""), 0, [saved_event(index)], EventMetadata())

    def reader() -> None:
        while not done.is_set():
            projector.catch_up()

    tail = threading.Thread(target=reader)
    tail.start()
    writers = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    tail.join()
    projector.catch_up()  # a reader that skipped never comes back for what it passed
    with database.read() as conn:
        committed = [row.position for row in conn.execute(select(events.c.position).order_by(events.c.position))]
    database.dispose()
    return recording.positions, committed


@pytest.mark.parametrize("run", range(RUNS))
def test_a_tailing_projector_never_skips_an_event_with_eight_slow_writers(postgres_url: str, run: Any) -> None:
    make_services(postgres_url).database.dispose()
    seen, committed = _tail_while_writing(postgres_url, EventStore, seed=run)
    assert len(committed) == EVENTS_PER_RUN
    assert seen == committed  # every event once, in position order


def test_without_serialized_appends_the_same_reader_does_skip_events(postgres_url: str) -> None:
    """The control: proves the test above would notice a skip."""
    make_services(postgres_url).database.dispose()
    seen, committed = _tail_while_writing(postgres_url, UnorderedEventStore, seed=7)
    skipped = set(committed) - set(seen)
    assert len(committed) == EVENTS_PER_RUN
    assert skipped, "the naive reader skipped nothing: the hazard was not reproduced"


def _until_waiting_for_the_append_lock(services: Any, count: int) -> None:
    """Until ``count`` sessions wait for this schema's append lock (other tests' schemas have their own: the
    lock's second key is the schema's hash, shown in ``objid`` as an unsigned number)."""
    query = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                 "AND objid::bigint = (hashtext(current_schema())::bigint + 4294967296) % 4294967296")

    def queued() -> bool:
        with services.database.engine.connect() as conn:  # a fresh snapshot of pg_locks each time
            return bool(conn.execute(query).scalar_one() >= count)

    until(queued, "the later appends to queue behind the open transaction", timeout=10)


def _behind_an_open_append(services: Any, stream_id: str, waiting: Callable[[], None]) -> None:
    """Run ``waiting`` in a thread while another transaction, which appended ``m1`` to ``stream_id``, holds
    the append lock; that transaction commits once ``waiting`` queues for the lock."""
    holding, release = threading.Event(), threading.Event()

    def hold_then_commit() -> None:
        with services.store.transaction() as tx:  # the append is in this transaction, which holds the lock until it ends
            services.store.append(stream_id, 0, [saved_event(1)], EventMetadata(), tx=tx)
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold_then_commit)
    holder.start()
    assert holding.wait(10)
    later = threading.Thread(target=waiting)
    later.start()
    try:
        _until_waiting_for_the_append_lock(services, 1)
    finally:
        release.set()
        holder.join()
        later.join()


def test_a_stream_read_while_waiting_for_the_lock_is_read_again_after_the_append_it_waited_for(built_postgres: Callable[...,
                                                                                               Services]) -> None:
    """``hold_appends`` reads the stream in the statement that waits for the lock, as its snapshot saw it
    before the wait; when the holder appended to that stream, the command must decide on the holder's event,
    not on the stream as it was (it would append at a version already taken)."""
    services = built_postgres()
    store, stream = services.store, memory_stream_id("m1", "global", "")
    seen: list[Any] = []

    def read_after_waiting() -> None:
        try:
            with store.transaction() as tx:
                store.hold_appends(tx, reading=stream)
                seen.append(store.last_event(stream, tx))
        except BaseException as error:  # the assertion below reports it
            seen.append(error)

    _behind_an_open_append(services, stream, read_after_waiting)
    [last] = seen
    assert last is not None and not isinstance(last, BaseException), last
    assert (last.position, last.stream_version) == (1, 1)


def test_a_position_held_by_an_open_transaction_is_passed_only_after_it_rolls_back_and_then_taken_again(
        built_postgres: Callable[..., Services],
) -> None:
    services = built_postgres()
    store, projector = services.store, services.projector
    store.append(memory_stream_id("m0", "global", ""), 0, [saved_event(0)], EventMetadata())
    projector.catch_up()
    holding, release = threading.Event(), threading.Event()
    held_position: list[int] = []

    class RolledBack(Exception):
        pass

    def open_then_roll_back() -> None:
        try:
            with store.transaction() as tx:
                row = {"stream_id": "memory:held", "stream_version": 1, "event_type": "memory.save", "schema_version": 1,
                       "payload": {"memory": saved_event(999).memory.to_dict()}, "meta": {},
                       "recorded_at": "2026-01-01T00:00:00Z"}
                held_position.extend(store.append_rows([row], tx=tx))
                holding.set()
                release.wait(10)
                raise RolledBack
        except RolledBack:
            pass

    holder = threading.Thread(target=open_then_roll_back)
    holder.start()
    assert holding.wait(10)
    later = [threading.Thread(target=store.append, args=(memory_stream_id(f"m{i}", "global", ""), 0, [saved_event(i)],
                                                          EventMetadata())) for i in (1, 2, 3)]
    for thread in later:
        thread.start()
    _until_waiting_for_the_append_lock(services, 3)  # observed: the later appends queue behind the open one
    assert projector.catch_up() == 1, "the projector must not pass a position whose transaction is open"
    release.set()
    holder.join()
    for thread in later:
        thread.join()

    reached = projector.catch_up()
    held = held_position[0]
    assert reached == store.head_position() == held + 2  # the rolled-back append burned no position
    assert [event.position for event in store.iter_all()] == [1, held, held + 1, held + 2]
    with services.database.read() as conn:
        assert conn.execute(select(projection_gaps)).all() == []


def test_an_append_that_waited_for_the_lock_seals_after_the_append_it_waited_for(built_postgres: Callable[..., Services]) -> None:
    """The statement that takes the lock read the head before it waited; it must append after the head the
    holder committed, not at the position the holder took (a stale head would collide there and fail)."""
    services = built_postgres()
    store = services.store
    failures: list[BaseException] = []

    def append_after_waiting() -> None:
        try:
            store.append(memory_stream_id("second", "global", ""), 0, [saved_event(2)], EventMetadata())
        except BaseException as error:  # the assertion below reports it
            failures.append(error)

    _behind_an_open_append(services, memory_stream_id("first", "global", ""), append_after_waiting)
    assert failures == []
    assert [(event.position, event.stream_id) for event in store.iter_all()] == [
        (1, memory_stream_id("first", "global", "")), (2, memory_stream_id("second", "global", ""))]
    assert verify_chain(store).ok
