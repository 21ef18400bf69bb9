"""The write path's transaction: one object handed from whoever opens it (the command bus, the identity
service) to the handler, the event store and the projector, so a save's path reads from its signatures."""

from __future__ import annotations

from sqlalchemy import Connection

from events.types import RecordedEvent
from memoryd.storage.driver import Transaction


class AppendTransaction(Transaction):
    """A write transaction that appends to the log (``EventStore.transaction`` opens one). Beside its connection
    and deferred writes it carries what the store learns under the append lock, so nothing is read twice:

    * ``holds_lock``: (PostgreSQL) it took the append lock, held until it ends;
    * ``head``: the head (position, hash) as it stands under that lock, for its next append to seal after;
    * ``read_ahead``: a stream and its newest event, read by the statement that took the lock, for the
      transaction's first ``EventStore.last_event`` (dropped once anything is appended);
    * ``appended``: the events it appended, in position order, as stored: an in-process projection applies
      them from here.
    """

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn)
        self.holds_lock = False
        self.head: tuple[int, str] | None = None
        self.read_ahead: tuple[str, RecordedEvent | None] | None = None
        self.appended: list[RecordedEvent] = []
