"""The projector: brings each projection from its checkpoint to the head of the log.

A projection's changes and its checkpoint commit in one transaction, so an
event is applied exactly once however often catch-up runs, and concurrent
catch-ups queue on the checkpoint row instead of applying twice. A plain
component: the API runs it in-process, workers run it from jobs.
"""

from __future__ import annotations

import logging
from typing import Protocol

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.store import EventStore
from events.types import RecordedEvent
from memoryd.db import Database
from memoryd.schema import projection_checkpoints

BATCH_SIZE = 500
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
                position = self._apply(conn, projection, batch)
            self._save_checkpoint(conn, projection.name, position)
        log.info("rebuilt projection %s to position %d", projection.name, position)
        return position

    def _catch_up(self, projection: Projection) -> int:
        while True:
            with self.database.write() as conn:
                position = self._lock_checkpoint(conn, projection.name)
                batch = self.store.read_after(conn, position, BATCH_SIZE)
                if not batch:
                    return position
                self._save_checkpoint(conn, projection.name, self._apply(conn, projection, batch))

    def _apply(self, conn: Connection, projection: Projection, batch: list[RecordedEvent]) -> int:
        for recorded in batch:
            projection.apply(conn, recorded)
        return batch[-1].position

    def _lock_checkpoint(self, conn: Connection, name: str) -> int:
        """Create the checkpoint row if needed and lock it until the transaction ends."""
        insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
        conn.execute(insert(projection_checkpoints).values(name=name, position=0).on_conflict_do_nothing())
        query = select(projection_checkpoints.c.position).where(projection_checkpoints.c.name == name).with_for_update()
        return int(conn.execute(query).scalar_one())

    def _save_checkpoint(self, conn: Connection, name: str, position: int) -> None:
        conn.execute(update(projection_checkpoints).where(projection_checkpoints.c.name == name).values(position=position))
