"""The whole log as one consistent read, and the walk that checks its hash chain (``memoryd audit verify``,
``memoryd events export``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, select

from events.chain import GENESIS, Break, Checkpoint, Verdict, verify, verify_segment
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
    """One page of a resumable walk of the chain: how far it got and the head it walks towards."""

    verdict: Verdict
    head: Checkpoint

    @property
    def complete(self) -> bool:
        return self.verdict.ok and self.verdict.head.position >= self.head.position


def verify_page(store: EventStore, start: Checkpoint, limit: int) -> ChainPage:
    """Check up to ``limit`` events after ``start`` (where an earlier page stopped, or position 0), in one
    consistent read: the event at ``start`` must still hold the hash the walk reached there, and a page that
    reaches the head must end at its hash. Pages chain like the events do, so a walk in pages proves what
    one walk proves (``verify_chain``) up to the head it ends at."""
    with store.database.consistent_read() as conn:
        row = conn.execute(HEAD).one()
        head = Checkpoint(int(row.position), row.hash)
        if start.position > head.position:
            return ChainPage(Verdict(0, start, Break(start.position, f"the log's head is at {head.position}")), head)
        if start.position == 0 and start.hash != GENESIS:
            return ChainPage(Verdict(0, start, Break(0, "the walk starts at position 0 with no hash")), head)
        if start.position > 0:
            there = store.read_after(conn, start.position - 1, 1)
            if not there or there[0].position != start.position or there[0].hash != start.hash:
                return ChainPage(Verdict(0, start, Break(start.position, (
                    "the hash here is not the one the walk reached: the log was rewritten meanwhile"))), head)
        allowed = gaps(conn)
        page = store.read_after(conn, start.position, limit)
        verdict = verify_segment(page, start, allowed, erased_positions(conn))
    return ChainPage(_at_the_end(verdict, head, dict(allowed), full=len(page) == limit), head)


def _at_the_end(verdict: Verdict, head: Checkpoint, gaps: dict[int, int], full: bool) -> Verdict:
    """A page's verdict, once it is held to the head: a walk that got there must end at its hash, one
    that stopped short on a page not full is missing the rest, and one that went past it found events the
    head does not know."""
    reached = verdict.head
    at_head = reached.position == head.position or gaps.get(reached.position + 1) == head.position
    if not verdict.ok:
        return verdict
    if reached.position > head.position:
        return Verdict(verdict.events, reached, Break(head.position + 1, (
            f"events past the head at {head.position}: a head moved back, or events added behind its back")))
    if at_head and reached.hash != head.hash:
        return Verdict(verdict.events, reached, Break(head.position, (
            f"the head records hash {head.hash[:12]}…, the log ends at {reached.position} with "
            f"{reached.hash[:12]}… (a head moved back, or events past it)")))
    if not at_head and not full:
        return Verdict(verdict.events, reached, Break(reached.position + 1, (
            f"missing: the log ends at position {reached.position}, its head at {head.position}")))
    return Verdict(verdict.events, head if at_head else reached, None)


def gaps(conn: Connection) -> list[tuple[int, int]]:
    """The positions that never held an event (recorded before the chain existed)."""
    return [(int(first), int(last)) for first, last in conn.execute(select(event_gaps))]
