"""The projector: brings each projection from its checkpoint to the head of the log.

A projection's changes and its checkpoint commit in one transaction, so an
event is applied exactly once however often catch-up runs, and concurrent
catch-ups queue on the checkpoint row instead of applying twice. A plain
component: the API runs it in-process, workers run it from jobs.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.store import EventStore
from events.types import RecordedEvent
from memoryd.db import Database
from memoryd.domain import utc_timestamp
from memoryd.schema import projection_checkpoints, projection_gaps

BATCH_SIZE = 500
POLL_CAP = 0.008  # seconds between checks while waiting for a position
log = logging.getLogger(__name__)


class Projection(Protocol):
    """A read model fed by events; ``name`` keys its checkpoint."""

    name: str

    def apply(self, conn: Connection, recorded: RecordedEvent) -> None: ...

    def reset(self, conn: Connection) -> None: ...


class Projector:
    def __init__(self, database: Database, store: EventStore, projections: list[Projection]) -> None:
        self.database = database
        self.store = store
        self.projections = projections

    def catch_up(self) -> int:
        """Apply every event not yet projected; return the lowest checkpoint reached."""
        return min(self._catch_up(projection) for projection in self.projections)

    def checkpoint(self, projection_name: str) -> int:
        column = projection_checkpoints.c.position
        with self.database.read() as conn:
            found = conn.execute(select(column).where(projection_checkpoints.c.name == projection_name)).scalar()
        return int(found or 0)

    def _lowest_checkpoint(self) -> int:
        """The position every projection has reached, in one read."""
        names = [projection.name for projection in self.projections]
        with self.database.read() as conn:
            found = dict(conn.execute(select(projection_checkpoints.c.name, projection_checkpoints.c.position)
                                      .where(projection_checkpoints.c.name.in_(names))).all())
        return min(int(found.get(name, 0)) for name in names)

    def wait_for(self, position: int, timeout: float) -> tuple[bool, int]:
        """Wait (bounded) until every projection has reached ``position``: read-your-writes."""
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            reached = self._lowest_checkpoint()
            if reached >= position or time.monotonic() >= deadline:
                return reached >= position, reached
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, POLL_CAP)  # a short cap: workers usually finish within milliseconds

    def rebuild(self, projection: Projection) -> int:
        """Replay the whole log into a fresh copy in one transaction.

        Readers keep seeing the old copy until the new one commits, so there is
        no moment where the read model is empty or half-built.
        """
        with self.database.write() as conn:
            self._lock_checkpoint(conn, projection.name)
            projection.reset(conn)
            position = 0
            while batch := self.store.read_after(conn, position, BATCH_SIZE):
                position = self._apply(conn, projection, position, batch)
            self._save_checkpoint(conn, projection.name, position)
        log.info("rebuilt projection %s to position %d", projection.name, position)
        return position

    def _catch_up(self, projection: Projection) -> int:
        while True:
            with self.database.write() as conn:
                position = self._lock_checkpoint(conn, projection.name)
                batch = self.store.read_after(conn, position, BATCH_SIZE)
                if batch:
                    position = self._apply(conn, projection, position, batch)
                    self._save_checkpoint(conn, projection.name, position)
            # A short batch reached the head. Whatever commits after this read is caught up
            # by the catch-up its own append triggers, so no extra (empty) transaction is spent.
            if len(batch) < BATCH_SIZE:
                return position

    def _apply(self, conn: Connection, projection: Projection, position: int, batch: list[RecordedEvent]) -> int:
        for recorded in batch:
            if recorded.position > position + 1:
                self._record_gap(conn, projection.name, position + 1, recorded.position)
            projection.apply(conn, recorded)
            position = recorded.position
        return position

    def _record_gap(self, conn: Connection, name: str, first: int, committed: int) -> None:
        """Note positions passed without an event, once per projection and gap.

        Appends are serialized (one writer at a time on SQLite, an advisory lock on
        PostgreSQL), so a committed event at ``committed`` proves that whatever took
        the earlier positions has ended without committing: they can never fill in.
        """
        reason = (f"no event at positions {first}..{committed - 1}: the appends that took them rolled back "
                  f"(appends are serialized, so the committed event at {committed} proves they cannot commit later)")
        log.warning("projection %s passes %s", name, reason)
        insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
        conn.execute(insert(projection_gaps).values(
            projection=name, first_position=first, last_position=committed - 1, reason=reason, recorded_at=utc_timestamp(),
        ).on_conflict_do_nothing())

    def _lock_checkpoint(self, conn: Connection, name: str) -> int:
        """Create the checkpoint row if needed and lock it until the transaction ends."""
        query = select(projection_checkpoints.c.position).where(projection_checkpoints.c.name == name).with_for_update()
        found = conn.execute(query).scalar()
        if found is None:  # the projection's first run
            insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
            conn.execute(insert(projection_checkpoints).values(name=name, position=0).on_conflict_do_nothing())
            found = conn.execute(query).scalar_one()
        return int(found)

    def _save_checkpoint(self, conn: Connection, name: str, position: int) -> None:
        conn.execute(update(projection_checkpoints).where(projection_checkpoints.c.name == name).values(position=position))
