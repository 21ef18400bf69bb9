"""Importing an exported log (``memoryd events import``): into an empty database only, the chain checked as
the events stream in, kept all or not at all."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import insert, select

from events.chain import Checkpoint, Verdict, check_storable, stored_row, verify
from events.erasure import erased_positions
from events.store import HEAD, INSERT_EVENTS, MOVE_HEAD, EventStore, take_append_lock
from events.types import RecordedEvent
from memoryd.kernel.errors import ValidationError
from memoryd.storage.schema import event_gaps, events

PAGE = 5_000  # events per insert


class ImportRefused(ValidationError):
    """An imported log whose chain does not verify: nothing of it was kept."""

    def __init__(self, verdict: Verdict) -> None:
        assert verdict.broken is not None
        super().__init__(f"the imported log does not verify at position {verdict.broken.position}: "
                         f"{verdict.broken.reason}; nothing was imported")
        self.verdict = verdict


def import_log(store: EventStore, head: Checkpoint, gaps: Sequence[tuple[int, int]], log: Iterable[RecordedEvent],
               erased: dict[int, int]) -> Verdict:
    """Into an empty log, every event as exported (positions, digests and hashes kept), its gaps and its
    head, in one transaction, the chain checked as the events stream in: nothing is kept unless all of it
    verifies (the verdict says where it broke)."""
    with store.database.write() as conn:
        take_append_lock(conn)
        if conn.execute(HEAD).one().position or conn.execute(select(events.c.position).limit(1)).first():
            raise ValidationError("the log is not empty: import into a new database (memoryd db upgrade creates one)")
        pending: list[dict[str, Any]] = []

        def inserted() -> Iterator[RecordedEvent]:
            for event in log:
                check_storable([event.payload, event.metadata], f"the event at position {event.position}")
                pending.append(stored_row(event) | {"position": event.position, "hash": event.hash})
                if len(pending) >= PAGE:
                    conn.execute(INSERT_EVENTS, pending)
                    pending.clear()
                yield event

        verdict = verify(inserted(), head, gaps, erased=erased)
        if verdict.broken is not None:
            raise ImportRefused(verdict)
        if pending:
            conn.execute(INSERT_EVENTS, pending)
        if erased_positions(conn) != erased:  # the header's list must be the imported erasures' own
            raise ValidationError("the export's header lists erased positions its memory.erase events do not")
        if gaps:
            conn.execute(insert(event_gaps), [{"first_position": first, "last_position": last}
                                              for first, last in gaps])
        conn.execute(MOVE_HEAD, {"head_position": head.position, "head_hash": head.hash})
    return verdict
