"""The projector: brings each projection from its checkpoint to the head of the log.

A projection's changes and its checkpoint commit in one transaction, so an
event is applied exactly once however often catch-up runs, and concurrent
catch-ups queue on the checkpoint row instead of applying twice. A plain
component: the API runs it in-process, workers run it from jobs.

A projection that cannot apply an event stops just before it, visibly: the
fault (projection, position, error) is stored for ``/readyz`` and
``memoryd status``, and the other projections go on. It moves again once an
operator supersedes the event (``memoryd events supersede``): the stand-in is
applied in its place, and the original stays in the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection, bindparam, delete, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.store import EventStore
from events.transaction import AppendTransaction
from events.types import RecordedEvent
from memoryd.kernel.domain import utc_timestamp
from memoryd.kernel.errors import MemorydError
from memoryd.storage.db import Database
from memoryd.storage.driver import DriverStatement, Transaction
from memoryd.storage.schema import projection_checkpoints, projection_faults, projection_gaps

BATCH_SIZE = 500
POLL_CAP = 0.008  # seconds between checks while waiting for a position
log = logging.getLogger(__name__)


class Projection(Protocol):
    """A read model fed by events, in the transaction ``tx`` that moves its checkpoint; ``name`` keys it."""

    name: str

    def apply(self, tx: Transaction, recorded: RecordedEvent) -> None: ...

    def reset(self, conn: Connection) -> None: ...


@dataclass(frozen=True)
class Fault:
    """Where a projection stopped: it could not apply the event at ``position``."""

    projection: str
    position: int
    event_type: str
    error: str

    def describe(self) -> str:
        return f"projection {self.projection} stopped before position {self.position} ({self.event_type}): {self.error}"


class ProjectionStopped(MemorydError):
    """A projection met an event it cannot apply: a rebuild raises it; a catch-up records it and stops."""

    status = 503

    def __init__(self, fault: Fault) -> None:
        super().__init__(f"{fault.describe()}; supersede it: memoryd events supersede {fault.position} --reason ...")
        self.fault = fault


class Projector:
    def __init__(self, database: Database, store: EventStore, projections: list[Projection]) -> None:
        self.database = database
        self.store = store
        self.projections = projections
        self._in_lock_order = sorted(projections, key=lambda projection: projection.name)
        # the together path's statements, built once with the names bound as plain values (an ``IN`` list
        # would be re-rendered on every run): lock every checkpoint, and see any fault, in one read
        named = or_(*(projection_checkpoints.c.name == projection.name for projection in projections))
        checkpoints = select(projection_checkpoints.c.name, projection_checkpoints.c.position,
                             projection_faults.c.position.label("fault")).select_from(
            projection_checkpoints.outerjoin(projection_faults, projection_faults.c.projection == projection_checkpoints.c.name)
        ).where(named).order_by(projection_checkpoints.c.name)
        self._lock_all = checkpoints.with_for_update(of=projection_checkpoints)
        self._save_all = update(projection_checkpoints).where(named).values(position=bindparam("position"))
        # a command's step: every checkpoint from ``start`` to ``reached`` in one statement, or none of them
        # (one stands elsewhere, is locked by another catch-up, or a projection has a fault to clear)
        free = select(projection_checkpoints.c.name).where(named, projection_checkpoints.c.position == bindparam("start"))
        free_now = select(func.count()).select_from(free.with_for_update(skip_locked=True).subquery()).scalar_subquery()
        faulted = exists().where(or_(*(projection_faults.c.projection == projection.name for projection in projections)))
        self._advance_all = DriverStatement(update(projection_checkpoints)
                                            .where(named, free_now == len(projections), ~faulted)
                                            .values(position=bindparam("reached")))

    def catch_up(self) -> int:
        """Apply every event not yet projected; return the lowest checkpoint reached.

        While every projection stands at the same checkpoint (the usual case) they move together: one
        read of the log and one checkpoint write for all of them. A projection that fails, or stands
        elsewhere, is caught up on its own, so the others go on.
        """
        reached = self._catch_up_together()
        if reached is not None:
            return reached
        return min(self._catch_up(projection) for projection in self._in_lock_order)

    def step(self, tx: AppendTransaction, position: int) -> bool:
        """Inside a command's transaction ``tx``: every projection applies the events it appended, up to
        ``position``, if they all stood right before them (no backlog), without waiting (no checkpoint
        locked by another catch-up or a rebuild) and with no fault recorded. False: nothing was written (on
        PostgreSQL the checkpoint rows it could lock stay locked until the commit); catch up after it. A
        projection that fails raises ``ProjectionStopped`` with its writes in the command's transaction,
        which must roll back (no savepoint: it would cost every save two statements). A write a projection
        deferred may fail only when the command commits: the caller's ``failing_as`` names that failure."""
        appended = tx.appended
        if not appended or appended[-1].position != position or len(appended) > BATCH_SIZE:
            return False
        start = appended[0].position - 1
        if self._advance_all.run(tx, {"start": start, "reached": position}) != len(self.projections):
            return False
        for projection in self.projections:
            self._apply(tx, projection, start, appended, name_deferred=False)
        return True

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

    def faults(self, everywhere: bool = False) -> list[Fault]:
        """Every one of these projections that is stopped on an event, and why; ``everywhere``: of any projection
        (the vectors', which run apart from the writes, too)."""
        query = select(projection_faults).order_by(projection_faults.c.projection)
        if not everywhere:
            query = query.where(projection_faults.c.projection.in_([projection.name for projection in self.projections]))
        with self.database.read() as conn:
            rows = conn.execute(query).all()
        return [Fault(row.projection, row.position, row.event_type, row.error) for row in rows]

    def rebuild(self, projection: Projection) -> int:
        """Replay the whole log into a fresh copy in one transaction.

        Readers keep seeing the old copy until the new one commits, so there is
        no moment where the read model is empty or half-built. An event it
        cannot apply (with no stand-in) stops it with ``ProjectionStopped`` and
        leaves the old copy as it was.
        """
        with self.database.transaction(Transaction) as tx:
            conn = tx.conn
            lock_checkpoint(conn, projection.name)
            projection.reset(conn)
            superseded = self.store.superseded(conn)
            position = 0
            while batch := self.store.read_after(conn, position, BATCH_SIZE):
                batch = [superseded[e.position].stand_in(e) if e.position in superseded else e for e in batch]
                position = self._apply(tx, projection, position, batch)
            save_checkpoint(conn, projection.name, position)
        log.info("rebuilt projection %s to position %d", projection.name, position)
        return position

    def replay(self, projection: Projection, into: Transaction, after: int, until: int) -> int:
        """Apply the log's events in ``(after, until]`` to ``projection`` on ``into`` (another database: a
        scratch copy), as a rebuild applies them; the position reached. Read a page at a time, each in
        a read transaction of this database's own, so the live one is never held."""
        position = after
        for event in self.replayed(after, until):
            projection.apply(into, event)
            position = event.position
        return position

    def replayed(self, after: int, until: int) -> Iterator[RecordedEvent]:
        """The log's events in ``(after, until]`` as a rebuild applies them (a superseded one's stand-in in its
        place), read a page at a time, each page in a read transaction of its own."""
        with self.database.read() as conn:
            superseded = self.store.superseded(conn)
        position = after
        while position < until:
            with self.database.read() as conn:
                batch = [event for event in self.store.read_after(conn, position, BATCH_SIZE)
                         if event.position <= until]
            if not batch:
                return
            for event in batch:
                yield superseded[event.position].stand_in(event) if event.position in superseded else event
            position = batch[-1].position

    def _catch_up_together(self) -> int | None:
        """Every projection from their common checkpoint to the head in one transaction: the position
        reached, or None to go projection by projection (they stand apart, a checkpoint is locked elsewhere,
        the log holds more than a batch, or one of them cannot apply an event, in which case nothing is
        kept)."""
        try:
            with self.database.transaction(Transaction) as tx:
                conn = tx.conn
                rows = conn.execute(self._lock_all).all()
                found = {row.name: row.position for row in rows}
                if len(found) < len(self.projections) or len(set(found.values())) != 1:
                    return None
                position = reached = int(next(iter(found.values())))
                batch = self.store.read_after(conn, position, BATCH_SIZE + 1)
                if not batch or len(batch) > BATCH_SIZE:  # more than a batch waits: one by one, batch by batch
                    return position if not batch else None
                for projection in self.projections:
                    reached = self._apply(tx, projection, position, batch)
                conn.execute(self._save_all, {"position": reached})
                if any(row.fault is not None for row in rows):
                    conn.execute(_CLEAR_FAULTS, {"names": list(found), "position": reached})
                return reached
        except ProjectionStopped:
            return None

    def _catch_up(self, projection: Projection) -> int:
        while True:
            try:
                with self.database.transaction(Transaction) as tx:
                    position = lock_checkpoint(tx.conn, projection.name)
                    batch = self.store.read_after(tx.conn, position, BATCH_SIZE)
                    if batch:
                        position = self._apply(tx, projection, position, batch)
                        save_checkpoint(tx.conn, projection.name, position)
            except ProjectionStopped as failed:  # the batch rolled back: keep what precedes the event, stop before it
                position, moved_on = self._stop_before(projection, failed.fault)
                if moved_on:  # the event was superseded and its stand-in applied
                    continue
                return position
            # A short batch reached the head. Whatever commits after this read is caught up
            # by the catch-up its own append triggers, so no extra (empty) transaction is spent.
            if len(batch) < BATCH_SIZE:
                return position

    def _apply(self, tx: Transaction, projection: Projection, position: int, batch: list[RecordedEvent],
               name_deferred: bool = True) -> int:
        """Apply ``batch`` after ``position``; the position reached. An event that fails stops it with
        ``ProjectionStopped`` at that event, also when the failure is a write the projection deferred (it can
        surface at a later event's statement, or at the commit), unless ``name_deferred`` is False: the
        caller's ``failing_as`` names those."""
        for recorded in batch:
            if recorded.position > position + 1:
                self._record_gap(tx.conn, projection.name, position + 1, recorded.position)
            stopped = stopped_at(projection.name, recorded)
            try:
                with tx.failing_as(stopped) if name_deferred else nullcontext():
                    projection.apply(tx, recorded)
            except ProjectionStopped:  # an earlier event's deferred write, sent by this event's statement
                raise
            except Exception as error:
                raise stopped(error) from error
            position = recorded.position
        return position

    def _stop_before(self, projection: Projection, fault: Fault) -> tuple[int, bool]:
        """Apply what precedes the failed event, then its stand-in if it has one (True); else record the fault."""
        stand_in = None
        try:
            with self.database.transaction(Transaction) as tx:
                conn = tx.conn
                position = lock_checkpoint(conn, projection.name)
                before = [e for e in self.store.read_after(conn, position, BATCH_SIZE) if e.position < fault.position]
                position = self._apply(tx, projection, position, before)
                failed = self.store.read_after(conn, position, 1)
                if failed and failed[0].position == fault.position:
                    stand_in = self.store.stand_in(conn, failed[0])
                if stand_in is not None:
                    log.warning("projection %s applies the stand-in for the superseded event at %d",
                                projection.name, fault.position)
                    position = self._apply(tx, projection, position, [stand_in])
                save_checkpoint(conn, projection.name, position)
        except ProjectionStopped as again:  # the stand-in fails too (or the log changed under us): stop where we were
            fault, stand_in, position = again.fault, None, self.checkpoint(projection.name)
        if stand_in is not None or position >= fault.position:  # moved on (or another catch-up passed it)
            return position, True
        record_fault(self.database, fault)
        return position, False

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


def lock_checkpoint(conn: Connection, name: str) -> int:
    """Create the checkpoint row if needed and lock it until the transaction ends; its position."""
    found = conn.execute(_LOCK_ONE, {"name": name}).scalar()
    if found is None:  # the projection's first run
        insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
        conn.execute(insert(projection_checkpoints).values(name=name, position=0).on_conflict_do_nothing())
        found = conn.execute(_LOCK_ONE, {"name": name}).scalar_one()
    return int(found)


def save_checkpoint(conn: Connection, name: str, position: int) -> None:
    """Move the checkpoint (locked by ``lock_checkpoint``) and clear a fault it has passed."""
    conn.execute(_SAVE_ALL, {"names": [name], "position": position})
    conn.execute(_CLEAR_FAULTS, {"names": [name], "position": position})


def record_fault(database: Database, fault: Fault) -> None:
    """Store where a projection stopped, for ``/readyz`` and ``memoryd status`` (one row per projection)."""
    log.error("%s", fault.describe())
    with database.write() as conn:
        insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
        values = {"position": fault.position, "event_type": fault.event_type, "error": fault.error,
                  "recorded_at": utc_timestamp()}
        conn.execute(insert(projection_faults).values(projection=fault.projection, **values)
                     .on_conflict_do_update(index_elements=[projection_faults.c.projection], set_=values))


# Built once: every save runs them (building a statement costs more than running it). Checkpoints are locked
# in the order of their names, one by one or all together, so two catch-ups never wait on each other in a ring.
_LOCK_ONE = select(projection_checkpoints.c.position).where(
    projection_checkpoints.c.name == bindparam("name")).with_for_update()
_SAVE_ALL = update(projection_checkpoints).where(projection_checkpoints.c.name.in_(bindparam("names", expanding=True))) \
    .values(position=bindparam("position"))
_CLEAR_FAULTS = delete(projection_faults).where(projection_faults.c.projection.in_(bindparam("names", expanding=True)),
                                                projection_faults.c.position <= bindparam("position"))


def stopped_at(projection: str, recorded: RecordedEvent) -> Callable[[Exception], ProjectionStopped]:
    """How the projection named ``projection`` failing on ``recorded`` is raised, wherever the failure surfaces."""
    return lambda error: ProjectionStopped(Fault(projection, recorded.position, recorded.event_type,
                                                 _storable(f"{type(error).__name__}: {error}")[:2000]))


def _storable(text: str) -> str:
    """An error message as any database can store it (the event's own bad text may be quoted in it)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
