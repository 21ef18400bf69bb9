"""The event store: append with an expected version, read in position order.

Contract:

* ``position`` strictly increases by one and is never reused: appends take
  the positions after the ``event_head`` row and move it in their own
  transaction (so a rolled-back append burns no position).
* ``(stream_id, stream_version)`` is unique: an append names the version it
  expects the stream to be at, and a writer that lost the race gets
  ``ConcurrencyConflict`` instead of interleaving.
* Events become visible in position order. SQLite has one writer at a time;
  on PostgreSQL appends take a transaction-scoped advisory lock, so a later
  position can never commit before an earlier one and a reader that tails
  ``position > checkpoint`` never skips an event. The statement that takes it
  reads the head too (``take_append_lock``), so the lock costs no statement of
  its own.
* Every event is sealed into the hash chain (``events/chain.py``) with the
  head's hash, under that lock: the chain has no gaps but those recorded
  before it existed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, Row, bindparam, func, insert, or_, select, true, update
from sqlalchemy.exc import IntegrityError

from events.chain import (
    GENESIS,
    Checkpoint,
    chained,
)
from events.transaction import AppendTransaction
from events.types import (
    MEMORY_SAVED,
    MEMORY_UPDATED,
    DomainEvent,
    ErasedEvent,
    EventMetadata,
    EventSuperseded,
    RecordedEvent,
    UnknownEvent,
    superseded_stream_id,
)
from memoryd.kernel.text import check_document
from memoryd.storage.db import Database
from memoryd.storage.driver import DriverStatement
from memoryd.storage.schema import COMMON_EVENT_TYPES, event_head, event_type_is, events

# With the schema's hash, names the lock that orders appends on PostgreSQL: one lock
# per schema, so deployments sharing a database do not queue on each other.
APPEND_LOCK_CLASS = 0x6D656D6F


AT_ONCE = 1_000  # positions per read of ``events_at``
class ConcurrencyConflict(Exception):
    """The stream moved past the expected version; reload and decide again."""


# Built once: the statements every save, search and turn runs (building a statement costs more than running it).
_AFTER = select(events).where(events.c.position > bindparam("position")).order_by(events.c.position) \
    .limit(bindparam("limit"))
_LAST_QUERY = select(events).where(events.c.stream_id == bindparam("stream_id")) \
    .order_by(events.c.stream_version.desc()).limit(1)
_LAST = DriverStatement(_LAST_QUERY)
_STREAM_OF_MEMORY = select(events.c.stream_id).where(
    events.c.payload[("memory", "memory_id")].as_string() == bindparam("memory_id")).limit(1)
_STREAM = select(events).where(events.c.stream_id == bindparam("stream_id")).order_by(events.c.stream_version)
INSERT_EVENTS = insert(events)
_INSERT_ONE = DriverStatement(INSERT_EVENTS)
HEAD = select(event_head.c.position, event_head.c.hash).where(event_head.c.log == "events")
_READ_HEAD = DriverStatement(HEAD)
_NEWEST = select(events.c.position, events.c.hash).order_by(events.c.position.desc()).limit(1)
MOVE_HEAD = update(event_head).where(event_head.c.log == "events").values(
    position=bindparam("head_position"), hash=bindparam("head_hash"))
_MOVE_HEAD_NOW = DriverStatement(MOVE_HEAD)
_INSERT_MOVING_HEAD = DriverStatement(insert(events).add_cte(MOVE_HEAD.cte("moved_head")))  # PostgreSQL: one round trip
# PostgreSQL: take the append lock, then lock and read the head (``take_append_lock`` says why both)
_TAKE_LOCK = func.pg_advisory_xact_lock(APPEND_LOCK_CLASS, func.hashtext(func.current_schema())).is_not(None)
_LOCK_HEAD = DriverStatement(HEAD.where(_TAKE_LOCK).with_for_update())
# The head, the head as the statement's snapshot saw it, and one stream's newest event (``hold_appends``)
_SEEN = event_head.alias("seen")
_NEWEST_OF_STREAM = _LAST_QUERY.subquery("newest")
_HEAD_AND_NEWEST = select(event_head.c.position, event_head.c.hash,
                          select(_SEEN.c.position).where(_SEEN.c.log == "events").scalar_subquery(),
                          *_NEWEST_OF_STREAM.c) \
    .select_from(event_head.outerjoin(_NEWEST_OF_STREAM, true())).where(event_head.c.log == "events")
_READ_HEAD_AND_NEWEST = DriverStatement(_HEAD_AND_NEWEST)  # SQLite: its write transaction holds the writer's lock
_LOCK_HEAD_AND_NEWEST = DriverStatement(_HEAD_AND_NEWEST.where(_TAKE_LOCK).with_for_update(of=event_head))
_AT = select(events).where(or_(events.c.position.in_(bindparam("positions", expanding=True)),
                               events.c.stream_id.in_(bindparam("streams", expanding=True)))).order_by(events.c.position)


Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class EventStore:
    def __init__(self, database: Database, clock: Clock = utc_now) -> None:
        """``clock`` (aware times) stamps ``recorded_at``: tests pass one they move instead of sleeping."""
        self.database = database
        self.clock = clock

    def transaction(self) -> AbstractContextManager[AppendTransaction]:
        """A write transaction to append in (a command's, say): handed to every step that reads or writes in it."""
        return self.database.transaction(AppendTransaction)

    def append(
        self,
        stream_id: str,
        expected_version: int,
        new_events: Sequence[DomainEvent],
        metadata: EventMetadata,
        claim: Callable[[Connection, int], None] | None = None,
        *,
        tx: AppendTransaction | None = None,
    ) -> int:
        """Append after ``expected_version`` in ``tx`` (or a transaction of its own) and return the last new
        position.

        ``claim`` runs inside the same transaction with the new position (to take
        an idempotency key); if it raises, nothing is appended.
        """
        appends = [(stream_id, expected_version + offset, event) for offset, event in enumerate(new_events, start=1)]
        return self.append_many(appends, metadata, claim, tx=tx)[-1]

    def append_many(
        self,
        appends: Sequence[tuple[str, int, DomainEvent]],
        metadata: EventMetadata,
        claim: Callable[[Connection, int], None] | None = None,
        *,
        tx: AppendTransaction | None = None,
    ) -> list[int]:
        """Append ``(stream_id, version, event)`` rows in one transaction (``tx``, or one of its own): all or none."""
        recorded_at = _stamp(self.clock())
        return self.append_rows([_row(stream_id, version, event, metadata, recorded_at)
                                 for stream_id, version, event in appends], claim, tx=tx)

    def append_rows(self, rows: Sequence[dict[str, Any]], claim: Callable[[Connection, int], None] | None = None,
                    *, tx: AppendTransaction | None = None) -> list[int]:
        """Append rows as stored (``stream_id``, ``stream_version``, ``event_type``, ``schema_version``,
        ``payload``, ``meta``, ``recorded_at``) in one transaction (``tx``, or one of its own), sealed into the
        chain: the positions.

        ``append_many`` builds them from domain events; an event of a type this code does not
        define (another version wrote it) goes through here too, and so through the chain.
        """
        try:
            if tx is not None:
                return self._append_sealed(tx, rows, claim)
            with self.transaction() as own:
                return self._append_sealed(own, rows, claim)
        except IntegrityError as error:
            raise _lost_race(rows) from error

    def _append_sealed(self, tx: AppendTransaction, rows: Sequence[dict[str, Any]],
                       claim: Callable[[Connection, int], None] | None) -> list[int]:
        """The positions after the head, the rows sealed at them, the head moved; then ``claim``."""
        _hold(tx)
        tx.read_ahead = None  # what it read of a stream is older than this append
        [(head_position, head_hash)] = [tx.head] if tx.head is not None else _READ_HEAD.rows(tx)
        tx.head = None
        sealed = list(chained(head_hash, head_position + 1, rows))
        moved = {"head_position": sealed[-1]["position"], "head_hash": sealed[-1]["hash"]}
        if len(sealed) > 1:
            tx.conn.execute(INSERT_EVENTS, sealed)
            tx.conn.execute(MOVE_HEAD, moved)
        elif tx.conn.dialect.name == "postgresql":  # sent with the transaction's next statement or its commit
            with tx.failing_as(lambda error: _lost_race(rows) if isinstance(error, IntegrityError) else error):
                _INSERT_MOVING_HEAD.defer(tx, sealed[0] | moved)
        else:
            _INSERT_ONE.run(tx, sealed[0])
            _MOVE_HEAD_NOW.run(tx, moved)
        if tx.holds_lock:  # the head stays this transaction's until it commits: its next append reads it here
            tx.head = (moved["head_position"], moved["head_hash"])
        tx.appended.extend(_sealed_event(row) for row in sealed)
        positions = [row["position"] for row in sealed]
        if claim is not None:
            claim(tx.conn, positions[-1])
        return positions

    def last_events(self, stream_ids: set[str], tx: AppendTransaction | None = None
                    ) -> dict[str, RecordedEvent | None]:
        """The newest event of each stream (None for a new stream), in one read (in ``tx``, if given)."""
        newest = (select(events.c.stream_id, func.max(events.c.stream_version).label("version"))
                  .where(events.c.stream_id.in_(stream_ids)).group_by(events.c.stream_id).subquery())
        query = select(events).join(newest, (events.c.stream_id == newest.c.stream_id)
                                    & (events.c.stream_version == newest.c.version))
        found: dict[str, RecordedEvent | None] = dict.fromkeys(stream_ids)
        with self.database.read(_within(tx)) as conn:
            for row in conn.execute(query):
                found[row.stream_id] = _recorded(row)
        return found

    def last_event(self, stream_id: str, tx: AppendTransaction | None = None) -> RecordedEvent | None:
        """The newest event of a stream (in ``tx``, if given): it alone holds the stream's state."""
        if tx is None:
            with self.database.read() as conn:
                found = _LAST.rows(conn, {"stream_id": stream_id})
            return _recorded(found[0]) if found else None
        read_ahead, tx.read_ahead = tx.read_ahead, None
        if read_ahead is not None and read_ahead[0] == stream_id:
            return read_ahead[1]  # read with the lock's statement; no append has moved the head since
        found = _LAST.rows(tx, {"stream_id": stream_id})
        return _recorded(found[0]) if found else None

    def event_at(self, position: int, tx: AppendTransaction | None = None) -> RecordedEvent | None:
        with self.database.read(_within(tx)) as conn:
            row = conn.execute(select(events).where(events.c.position == position)).first()
        return _recorded(row) if row else None

    def events_at(self, positions: Sequence[int], tx: AppendTransaction | None = None) -> dict[int, RecordedEvent]:
        """The events at these positions as projections see them: a superseded one by its stand-in.

        Read ``AT_ONCE`` positions per statement (each binds two parameters: databases cap them)."""
        found: dict[int, RecordedEvent] = {}
        for first in range(0, len(positions), AT_ONCE):
            found |= self._events_at(positions[first:first + AT_ONCE], tx)
        return found

    def _events_at(self, positions: Sequence[int], tx: AppendTransaction | None) -> dict[int, RecordedEvent]:
        wanted = {superseded_stream_id(position): position for position in positions}
        with self.database.read(_within(tx)) as conn:
            rows = conn.execute(_AT, {"positions": list(positions), "streams": list(wanted)}).all()
        found = {row.position: _recorded(row) for row in rows if row.stream_id not in wanted}
        for row in rows:  # in log order, so the newest supersede of a position wins, as in ``stand_in``
            if row.stream_id in wanted and (position := wanted[row.stream_id]) in found:
                event = _recorded(row).to_domain()
                if isinstance(event, EventSuperseded):
                    found[position] = event.stand_in(found[position])
        return found

    def stand_in(self, conn: Connection, recorded: RecordedEvent) -> RecordedEvent | None:
        """What projections apply instead of ``recorded`` if an operator superseded it, else None."""
        query = select(events).where(events.c.stream_id == superseded_stream_id(recorded.position))
        row = conn.execute(query.order_by(events.c.stream_version.desc()).limit(1)).first()
        if row is None:
            return None
        superseding = _recorded(row).to_domain()
        if isinstance(superseding, ErasedEvent):  # erased with the event it superseded: nothing stands in
            return None
        if not isinstance(superseding, EventSuperseded):
            raise UnknownEvent(f"stream {superseded_stream_id(recorded.position)} holds a {superseding.event_type}")
        return superseding.stand_in(recorded)

    def superseded(self, conn: Connection) -> dict[int, EventSuperseded]:
        """Every superseded position and what supersedes it (one scan; for replays of the whole log)."""
        rows = conn.execute(select(events).where(event_type_is(EventSuperseded.event_type)))
        found = [_recorded(row).to_domain() for row in rows]
        return {event.position: event for event in found if isinstance(event, EventSuperseded)}

    def stream(self, stream_id: str, tx: AppendTransaction | None = None) -> list[RecordedEvent]:
        """Every event of one stream, in version order (as recorded: supersedes are not applied)."""
        with self.database.read(_within(tx)) as conn:
            return [_recorded(row) for row in conn.execute(_STREAM, {"stream_id": stream_id})]

    def stream_of_memory(self, memory_id: str, tx: AppendTransaction | None = None) -> str | None:
        """The stream that holds the memory ``memory_id`` (a scan of the log's payloads: no index yet)."""
        with self.database.read(_within(tx)) as conn:
            return conn.execute(_STREAM_OF_MEMORY, {"memory_id": memory_id}).scalar()

    def read_after(self, conn: Connection, position: int, limit: int) -> list[RecordedEvent]:
        return [_recorded(row) for row in conn.execute(_AFTER, {"position": position, "limit": limit})]

    def iter_all(self, batch_size: int = 1_000) -> Iterator[RecordedEvent]:
        """Every event in position order, read in pages (for replays and exports)."""
        position = 0
        while True:
            with self.database.read() as conn:
                batch = self.read_after(conn, position, batch_size)
            if not batch:
                return
            yield from batch
            position = batch[-1].position

    def chain_head(self) -> Checkpoint:
        """The highest position taken and the chain's hash there."""
        with self.database.read() as conn:
            head = conn.execute(HEAD).one()
        return Checkpoint(int(head.position), head.hash)

    def checkpoint(self) -> Checkpoint:
        """The newest event's position and hash: what ``memoryd audit checkpoint`` prints to publish."""
        with self.database.read() as conn:
            newest = conn.execute(_NEWEST).first()
        return Checkpoint(int(newest.position), newest.hash) if newest else Checkpoint(0, GENESIS)

    def position_at(self, moment: dt.datetime) -> int:
        """The last position recorded at or before ``moment`` (aware); 0 before the first event."""
        recorded_at = _stamp(moment)
        with self.database.read() as conn:
            return int(conn.execute(select(func.coalesce(func.max(events.c.position), 0))
                                    .where(events.c.recorded_at <= recorded_at)).scalar_one())

    def head_position(self) -> int:
        with self.database.read() as conn:
            return int(conn.execute(select(func.coalesce(func.max(events.c.position), 0))).scalar_one())

    def hold_appends(self, tx: AppendTransaction, reading: str | None = None) -> None:
        """(In a write transaction) Queue every other append until this transaction ends, so what it reads of
        the log stays the whole log until it commits: a command decides on a stream nobody can change under
        it (not even an erasure, which moves a stream's events out of it), and an erasure misses no racing
        write. SQLite's write transactions hold its one writer's lock already.

        With ``reading``, the statement that takes the lock and reads the head also reads that stream's
        newest event, and the transaction's first ``last_event`` is answered from it if it asks for that
        stream and nothing was appended before it: a command's lock, head and state cost one statement.
        On PostgreSQL the stream is read as the statement's snapshot saw it, before the lock was granted
        (the lock's condition sits on the join); ``FOR UPDATE`` re-reads only the head row, and the scalar
        subquery keeps the snapshot's head. Every change to a stream (append, erasure, import) moves the
        head under the lock, so when the two heads differ the stream may have changed since the snapshot,
        and ``last_event`` reads it again."""
        if reading is None or tx.holds_lock:
            _hold(tx)
            return
        postgres = tx.conn.dialect.name == "postgresql"
        statement = _LOCK_HEAD_AND_NEWEST if postgres else _READ_HEAD_AND_NEWEST
        [(head_position, head_hash, seen_position, *newest)] = statement.rows(tx, {"stream_id": reading})
        tx.head = (head_position, head_hash)
        tx.holds_lock = postgres
        if seen_position == head_position:
            tx.read_ahead = (reading, None if newest[0] is None else _recorded(tuple(newest)))


def take_append_lock(conn: Connection) -> None:
    """(PostgreSQL) Take the append lock for ``conn``'s transaction, which appends nothing (it writes beside the
    log, and no append may commit meanwhile): it is held until the transaction ends."""
    if conn.dialect.name == "postgresql":
        _LOCK_HEAD.rows(conn)


def _hold(tx: AppendTransaction) -> None:
    """(PostgreSQL) Take the append lock for ``tx``, once: it is held until the transaction ends.

    One statement takes it and reads the head, which the transaction's first append then uses. The advisory
    lock queues appenders in order of arrival (a row lock alone let newcomers overtake waiters: at 8 writers
    its p95 was 2.5 times the advisory lock's, ``bench/bench_appends.py``). Waiting in it, the statement has
    already read the head as its snapshot saw it; ``FOR UPDATE`` then finds the row changed by the append
    it waited for and reads the newest version (READ COMMITTED's re-check), so the head is never stale."""
    if tx.conn.dialect.name == "postgresql" and not tx.holds_lock:
        [tx.head] = _LOCK_HEAD.rows(tx)
        tx.holds_lock = True


def _within(tx: AppendTransaction | None) -> Connection | None:
    return tx.conn if tx is not None else None


def _lost_race(rows: Sequence[dict[str, Any]]) -> ConcurrencyConflict:
    """What a unique key's refusal of appended rows means: another writer took the stream's next version."""
    streams = sorted({row["stream_id"] for row in rows})
    return ConcurrencyConflict(f"another writer moved {', '.join(streams[:3])} first")


def _stamp(moment: dt.datetime) -> str:
    """``recorded_at``'s form, which orders as text (isoformat pads years below 1000, strftime would not)."""
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _row(stream_id: str, version: int, event: DomainEvent, metadata: EventMetadata, recorded_at: str) -> dict[str, Any]:
    """The stored row; text no projection could store never gets this far (a ValidationError)."""
    row = {
        "stream_id": stream_id,
        "stream_version": version,
        "event_type": event.event_type,
        "schema_version": event.schema_version,
        "payload": event.payload(),
        "meta": metadata.to_dict(),
        "recorded_at": recorded_at,
    }
    check_document(row, "event")
    return row


def _sealed_event(row: dict[str, Any]) -> RecordedEvent:
    """A sealed row as ``read_after`` would read it back."""
    return RecordedEvent(row["position"], row["stream_id"], row["stream_version"], row["event_type"],
                         row["schema_version"], row["payload"], row["meta"], row["recorded_at"], row["payload_sha256"],
                         row["hash"])


def _recorded(row: Row[Any] | tuple[Any, ...]) -> RecordedEvent:
    return RecordedEvent(*row)  # every read selects the whole table: the fields' order


if COMMON_EVENT_TYPES != (MEMORY_SAVED, MEMORY_UPDATED):
    raise RuntimeError("the schema's common event types (left out of the index by type) must be the ones saves write")

_FIELDS = [field.name for field in dataclasses.fields(RecordedEvent)]
if [column.name for column in events.columns] != _FIELDS:
    raise RuntimeError("the events table's columns must follow RecordedEvent's fields, in order")
