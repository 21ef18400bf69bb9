"""The whole log as one consistent read, and the walk that checks its hash chain (``memoryd audit verify``,
``memoryd events export``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, select

from events.chain import Break, Checkpoint, Verdict, end_of_the_log, verify, verify_segment
from events.erasure import erased_positions
from events.store import HEAD, EventStore
from events.types import RecordedEvent
from memoryd.storage.schema import event_gaps

PAGE = 5_000  # events per read of the walk


@dataclass(frozen=True)
class LogView:
    """The whole log as one read saw it (``whole_log``)."""

    head: Checkpoint
    gaps: list[tuple[int, int]]
    erased: dict[int, int]  # redacted position -> the erasure's position
    events: Iterator[RecordedEvent]


@contextmanager
def whole_log(store: EventStore) -> Iterator[LogView]:
    """The log as one consistent read: its head, gaps, erased positions and every event (read a page at a
    time, in position order). Appends go on meanwhile; none of them is in this view."""
    with store.database.consistent_read() as conn:
        head = conn.execute(HEAD).one()

        def every_event() -> Iterator[RecordedEvent]:
            position = 0
            while batch := store.read_after(conn, position, PAGE):
                yield from batch
                position = batch[-1].position

        yield LogView(Checkpoint(int(head.position), head.hash), gaps(conn), erased_positions(conn), every_event())


def verify_chain(store: EventStore, since: Checkpoint | None = None,
                 progress: Callable[[int], None] | None = None) -> Verdict:
    """Walk the whole log in one consistent read, a page at a time, and check its hash chain
    (``events/chain.py``), up to its head and past it (an event past the head is a moved-back head)."""
    with whole_log(store) as log:

        def walked() -> Iterator[RecordedEvent]:
            for event in log.events:
                yield event
                if progress is not None:
                    progress(1)

        return verify(walked(), log.head, log.gaps, since, log.erased)


@dataclass(frozen=True)
class ChainPage:
    """One page of a resumable walk of the chain: how far it got, the head it walks towards, and whether it
    read the last event and found the log ending at that head."""

    verdict: Verdict
    head: Checkpoint
    complete: bool


def verify_page(store: EventStore, start: Checkpoint, limit: int) -> ChainPage:
    """Check up to ``limit`` events after ``start`` (where an earlier page stopped, or position 0), in one
    consistent read: the event at ``start`` must still hold the hash the walk reached there, and the page
    that reads the last event must end at the head, as ``verify_chain`` does. Pages chain like the events
    do, so a walk in pages proves what one walk proves, up to the head its last page read."""
    with store.database.consistent_read() as conn:
        row = conn.execute(HEAD).one()
        head = Checkpoint(int(row.position), row.hash)
        if start.position > 0:
            there = store.read_after(conn, start.position - 1, 1)
            if not there or there[0].position != start.position or there[0].hash != start.hash:
                return ChainPage(Verdict(0, start, Break(start.position, (
                    "the hash here is not the one the walk reached: the log was rewritten meanwhile"))), head, False)
        allowed = gaps(conn)
        page = store.read_after(conn, start.position, limit)
        verdict = verify_segment(page, start, allowed, erased_positions(conn))
    if not verdict.ok or len(page) == limit:  # broken, or more to read
        return ChainPage(verdict, head, False)
    ended = end_of_the_log(verdict.head, head, dict(allowed))
    return ChainPage(Verdict(verdict.events, verdict.head, ended), head, ended is None)


def gaps(conn: Connection) -> list[tuple[int, int]]:
    """The positions that never held an event (recorded before the chain existed)."""
    return [(int(first), int(last)) for first, last in conn.execute(select(event_gaps))]
