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
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Row, bindparam, func, insert, or_, select, true, update
from sqlalchemy.exc import IntegrityError

from events.chain import (
    GENESIS,
    Checkpoint,
    Verdict,
    chained,
    check_storable,
    erased_stream_id,
    stored_row,
    verify,
)
from events.erasure import erased_positions
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
from memoryd.db import Database, transaction_state
from memoryd.driver import DriverStatement, failing_as
from memoryd.errors import ValidationError
from memoryd.schema import COMMON_EVENT_TYPES, event_gaps, event_head, event_type_is, events
from memoryd.text import check_document

# With the schema's hash, names the lock that orders appends on PostgreSQL: one lock
# per schema, so deployments sharing a database do not queue on each other.
APPEND_LOCK_CLASS = 0x6D656D6F


AT_ONCE = 1_000  # positions per read of ``events_at``
VERIFY_PAGE = 5_000  # events per read of the chain's walk


class ConcurrencyConflict(Exception):
    """The stream moved past the expected version; reload and decide again."""


@dataclass(frozen=True)
class LogView:
    """The whole log as one read saw it (``EventStore.whole_log``)."""

    head: Checkpoint
    gaps: list[tuple[int, int]]
    erased: dict[int, int]  # redacted position -> the erasure's position
    events: Iterator[RecordedEvent]


class ImportRefused(ValidationError):
    """An imported log whose chain does not verify: nothing of it was kept."""

    def __init__(self, verdict: Verdict) -> None:
        assert verdict.broken is not None
        super().__init__(f"the imported log does not verify at position {verdict.broken.position}: "
                         f"{verdict.broken.reason}; nothing was imported")
        self.verdict = verdict


# Built once: the statements every save, search and turn runs (building a statement costs more than running it).
_AFTER = select(events).where(events.c.position > bindparam("position")).order_by(events.c.position) \
    .limit(bindparam("limit"))
_LAST_QUERY = select(events).where(events.c.stream_id == bindparam("stream_id")) \
    .order_by(events.c.stream_version.desc()).limit(1)
_LAST = DriverStatement(_LAST_QUERY)
_STREAM_OF_MEMORY = select(events.c.stream_id).where(
    events.c.payload[("memory", "memory_id")].as_string() == bindparam("memory_id")).limit(1)
_STREAM = select(events).where(events.c.stream_id == bindparam("stream_id")).order_by(events.c.stream_version)
_INSERT = insert(events)
_INSERT_ONE = DriverStatement(_INSERT)
_HEAD = select(event_head.c.position, event_head.c.hash).where(event_head.c.log == "events")
_READ_HEAD = DriverStatement(_HEAD)
_NEWEST = select(events.c.position, events.c.hash).order_by(events.c.position.desc()).limit(1)
_MOVE_HEAD = update(event_head).where(event_head.c.log == "events").values(
    position=bindparam("head_position"), hash=bindparam("head_hash"))
_MOVE_HEAD_NOW = DriverStatement(_MOVE_HEAD)
_INSERT_MOVING_HEAD = DriverStatement(insert(events).add_cte(_MOVE_HEAD.cte("moved_head")))  # PostgreSQL: one round trip
_REDACT = update(events).where(events.c.position == bindparam("at")).values(
    payload=bindparam("stub"), stream_id=bindparam("erased_stream"))
_HOLDING = "append lock"  # in a transaction's state: it holds the append lock
_READ_AHEAD = "read ahead"  # in a transaction's state: (stream id, its newest event), read by the lock's statement
_HEAD_HELD = "head"  # in a transaction's state: the head (position, hash) as it stands under the append lock
_APPENDED = "appended"  # in a transaction's state: the events it appended, in order
# PostgreSQL: take the append lock, then lock and read the head (``take_append_lock`` says why both)
_TAKE_LOCK = func.pg_advisory_xact_lock(APPEND_LOCK_CLASS, func.hashtext(func.current_schema())).is_not(None)
_LOCK_HEAD = DriverStatement(_HEAD.where(_TAKE_LOCK).with_for_update())
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

    def append(
        self,
        stream_id: str,
        expected_version: int,
        new_events: Sequence[DomainEvent],
        metadata: EventMetadata,
        claim: Callable[[Connection, int], None] | None = None,
    ) -> int:
        """Append after ``expected_version`` and return the last new position.

        ``claim`` runs inside the same transaction with the new position (to take
        an idempotency key); if it raises, nothing is appended.
        """
        appends = [(stream_id, expected_version + offset, event) for offset, event in enumerate(new_events, start=1)]
        return self.append_many(appends, metadata, claim)[-1]

    def append_many(
        self,
        appends: Sequence[tuple[str, int, DomainEvent]],
        metadata: EventMetadata,
        claim: Callable[[Connection, int], None] | None = None,
    ) -> list[int]:
        """Append ``(stream_id, version, event)`` rows in one transaction: all or none."""
        recorded_at = _stamp(self.clock())
        return self.append_rows([_row(stream_id, version, event, metadata, recorded_at)
                                 for stream_id, version, event in appends], claim)

    def append_rows(self, rows: Sequence[dict[str, Any]],
                    claim: Callable[[Connection, int], None] | None = None) -> list[int]:
        """Append rows as stored (``stream_id``, ``stream_version``, ``event_type``, ``schema_version``,
        ``payload``, ``meta``, ``recorded_at``) in one transaction, sealed into the chain: the positions.

        ``append_many`` builds them from domain events; an event of a type this code does not
        define (another version wrote it) goes through here too, and so through the chain.
        """
        try:
            with self.database.write() as conn:
                positions = self._append_sealed(conn, rows)
                if claim is not None:
                    claim(conn, positions[-1])
        except IntegrityError as error:
            raise _lost_race(rows) from error
        return positions

    def _append_sealed(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
        """(In a write transaction) The positions after the head, the rows sealed at them, the head moved."""
        take_append_lock(conn)
        state = transaction_state(conn)
        state.pop(_READ_AHEAD, None)  # what it read of a stream is older than this append
        [(head_position, head_hash)] = [state.pop(_HEAD_HELD)] if _HEAD_HELD in state else _READ_HEAD.rows(conn)
        sealed = list(chained(head_hash, head_position + 1, rows))
        moved = {"head_position": sealed[-1]["position"], "head_hash": sealed[-1]["hash"]}
        if len(sealed) > 1:
            conn.execute(_INSERT, sealed)
            conn.execute(_MOVE_HEAD, moved)
        elif conn.dialect.name == "postgresql":  # sent with the transaction's next statement or its commit
            with failing_as(conn, lambda error: _lost_race(rows) if isinstance(error, IntegrityError) else error):
                _INSERT_MOVING_HEAD.defer(conn, sealed[0] | moved)
        else:
            _INSERT_ONE.run(conn, sealed[0])
            _MOVE_HEAD_NOW.run(conn, moved)
        if _HOLDING in state:  # the head stays this transaction's until it commits: its next append reads it here
            state[_HEAD_HELD] = (moved["head_position"], moved["head_hash"])
        state.setdefault(_APPENDED, []).extend(_sealed_event(row) for row in sealed)
        return [row["position"] for row in sealed]

    def last_events(self, stream_ids: set[str]) -> dict[str, RecordedEvent | None]:
        """The newest event of each stream (None for a new stream), in one read."""
        newest = (select(events.c.stream_id, func.max(events.c.stream_version).label("version"))
                  .where(events.c.stream_id.in_(stream_ids)).group_by(events.c.stream_id).subquery())
        query = select(events).join(newest, (events.c.stream_id == newest.c.stream_id)
                                    & (events.c.stream_version == newest.c.version))
        found: dict[str, RecordedEvent | None] = dict.fromkeys(stream_ids)
        with self.database.read() as conn:
            for row in conn.execute(query):
                found[row.stream_id] = _recorded(row)
        return found

    def last_event(self, stream_id: str) -> RecordedEvent | None:
        """The newest event of a stream: it alone holds the stream's state."""
        with self.database.read() as conn:
            read_ahead: tuple[str, RecordedEvent | None] | None = transaction_state(conn).pop(_READ_AHEAD, None)
            if read_ahead is not None and read_ahead[0] == stream_id:
                return read_ahead[1]  # read with the lock's statement; no append has moved the head since
            found = _LAST.rows(conn, {"stream_id": stream_id})
        return _recorded(found[0]) if found else None

    def event_at(self, position: int) -> RecordedEvent | None:
        with self.database.read() as conn:
            row = conn.execute(select(events).where(events.c.position == position)).first()
        return _recorded(row) if row else None

    def events_at(self, positions: Sequence[int]) -> dict[int, RecordedEvent]:
        """The events at these positions as projections see them: a superseded one by its stand-in.

        Read ``AT_ONCE`` positions per statement (each binds two parameters: databases cap them)."""
        found: dict[int, RecordedEvent] = {}
        for first in range(0, len(positions), AT_ONCE):
            found |= self._events_at(positions[first:first + AT_ONCE])
        return found

    def _events_at(self, positions: Sequence[int]) -> dict[int, RecordedEvent]:
        wanted = {superseded_stream_id(position): position for position in positions}
        with self.database.read() as conn:
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

    def stream(self, stream_id: str) -> list[RecordedEvent]:
        """Every event of one stream, in version order (as recorded: supersedes are not applied)."""
        with self.database.read() as conn:
            return [_recorded(row) for row in conn.execute(_STREAM, {"stream_id": stream_id})]

    def stream_of_memory(self, memory_id: str) -> str | None:
        """The stream that holds the memory ``memory_id`` (a scan of the log's payloads: no index yet)."""
        with self.database.read() as conn:
            return conn.execute(_STREAM_OF_MEMORY, {"memory_id": memory_id}).scalar()

    def appended(self, conn: Connection) -> list[RecordedEvent]:
        """The events ``conn``'s transaction appended, in position order, as stored (they are the log's newest:
        the transaction holds the append lock); an in-process projection applies them from here. Empty
        after a savepoint rolled back (what it appended is gone): the projection then reads the log."""
        return list(transaction_state(conn).get(_APPENDED, []))

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
            head = conn.execute(_HEAD).one()
        return Checkpoint(int(head.position), head.hash)

    def checkpoint(self) -> Checkpoint:
        """The newest event's position and hash: what ``memoryd audit checkpoint`` prints to publish."""
        with self.database.read() as conn:
            newest = conn.execute(_NEWEST).first()
        return Checkpoint(int(newest.position), newest.hash) if newest else Checkpoint(0, GENESIS)

    @contextmanager
    def whole_log(self) -> Iterator[LogView]:
        """The log as one consistent read: its head, gaps, erased positions and every event (read a page at a
        time, in position order). Appends go on meanwhile; none of them is in this view."""
        with self.database.consistent_read() as conn:
            head = conn.execute(_HEAD).one()

            def every_event() -> Iterator[RecordedEvent]:
                position = 0
                while batch := self.read_after(conn, position, VERIFY_PAGE):
                    yield from batch
                    position = batch[-1].position

            yield LogView(Checkpoint(int(head.position), head.hash), _gaps(conn), erased_positions(conn),
                          every_event())

    def verify_chain(self, since: Checkpoint | None = None, progress: Callable[[int], None] | None = None) -> Verdict:
        """Walk the whole log in one consistent read, a page at a time, and check its hash chain
        (``events/chain.py``), up to its head and past it (an event past the head is a moved-back head)."""
        with self.whole_log() as log:

            def walked() -> Iterator[RecordedEvent]:
                for event in log.events:
                    yield event
                    if progress is not None:
                        progress(1)

            return verify(walked(), log.head, log.gaps, since, log.erased)

    def import_log(self, head: Checkpoint, gaps: Sequence[tuple[int, int]], log: Iterable[RecordedEvent],
                   erased: dict[int, int]) -> Verdict:
        """Into an empty log, every event as exported (positions, digests and hashes kept), its gaps and its
        head, in one transaction, the chain checked as the events stream in: nothing is kept unless all of it
        verifies (the verdict says where it broke)."""
        with self.database.write() as conn:
            self.hold_appends(conn)
            if conn.execute(_HEAD).one().position or conn.execute(select(events.c.position).limit(1)).first():
                raise ValidationError("the log is not empty: import into a new database (memoryd db upgrade creates one)")
            pending: list[dict[str, Any]] = []

            def inserted() -> Iterator[RecordedEvent]:
                for event in log:
                    check_storable([event.payload, event.metadata], f"the event at position {event.position}")
                    pending.append(stored_row(event) | {"position": event.position, "hash": event.hash})
                    if len(pending) >= VERIFY_PAGE:
                        conn.execute(_INSERT, pending)
                        pending.clear()
                    yield event

            verdict = verify(inserted(), head, gaps, erased=erased)
            if verdict.broken is not None:
                raise ImportRefused(verdict)
            if pending:
                conn.execute(_INSERT, pending)
            if erased_positions(conn) != erased:  # the header's list must be the imported erasures' own
                raise ValidationError("the export's header lists erased positions its memory.erase events do not")
            if gaps:
                conn.execute(insert(event_gaps), [{"first_position": first, "last_position": last}
                                                  for first, last in gaps])
            conn.execute(_MOVE_HEAD, {"head_position": head.position, "head_hash": head.hash})
            transaction_state(conn).pop(_HEAD_HELD, None)  # moved here, not by an append
        return verdict

    def redact(self, conn: Connection, erased_by: int, memory_of: dict[int, str]) -> None:
        """(In the erasure at ``erased_by``'s transaction) Replace the payloads of the events at ``memory_of``'s
        positions by content-free stubs and their stream ids (which name the memory) by digests: the one
        change the log ever takes. The chain keeps verifying (``events/chain.py``)."""
        positions = sorted(memory_of)
        for first in range(0, len(positions), AT_ONCE):  # databases cap bound parameters
            chunk = positions[first:first + AT_ONCE]
            streams = dict(conn.execute(select(events.c.position, events.c.stream_id)
                                        .where(events.c.position.in_(chunk))).all())
            conn.execute(_REDACT, [{"at": position, "stub": ErasedEvent.stub(erased_by, memory_of[position]),
                                    "erased_stream": erased_stream_id(streams[position], erased_by)}
                                   for position in chunk])

    def position_at(self, moment: dt.datetime) -> int:
        """The last position recorded at or before ``moment`` (aware); 0 before the first event."""
        recorded_at = _stamp(moment)
        with self.database.read() as conn:
            return int(conn.execute(select(func.coalesce(func.max(events.c.position), 0))
                                    .where(events.c.recorded_at <= recorded_at)).scalar_one())

    def head_position(self) -> int:
        with self.database.read() as conn:
            return int(conn.execute(select(func.coalesce(func.max(events.c.position), 0))).scalar_one())

    def hold_appends(self, conn: Connection, reading: str | None = None) -> None:
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
        state = transaction_state(conn)
        if reading is None or _HOLDING in state:
            take_append_lock(conn)
            return
        postgres = conn.dialect.name == "postgresql"
        statement = _LOCK_HEAD_AND_NEWEST if postgres else _READ_HEAD_AND_NEWEST
        [(head_position, head_hash, seen_position, *newest)] = statement.rows(conn, {"stream_id": reading})
        state[_HEAD_HELD] = (head_position, head_hash)
        if postgres:
            state[_HOLDING] = True
        if seen_position == head_position:
            state[_READ_AHEAD] = (reading, None if newest[0] is None else _recorded(tuple(newest)))


def take_append_lock(conn: Connection) -> None:
    """(PostgreSQL) Take the append lock for this transaction, once: it is held until the transaction ends.

    One statement takes it and reads the head, which the transaction's first append then uses. The advisory
    lock queues appenders in order of arrival (a row lock alone let newcomers overtake waiters: at 8 writers
    its p95 was 2.5 times the advisory lock's, ``bench/bench_appends.py``). Waiting in it, the statement has
    already read the head as its snapshot saw it; ``FOR UPDATE`` then finds the row changed by the append
    it waited for and reads the newest version (READ COMMITTED's re-check), so the head is never stale."""
    state = transaction_state(conn)
    if conn.dialect.name == "postgresql" and _HOLDING not in state:
        [state[_HEAD_HELD]] = _LOCK_HEAD.rows(conn)
        state[_HOLDING] = True


def _lost_race(rows: Sequence[dict[str, Any]]) -> ConcurrencyConflict:
    """What a unique key's refusal of appended rows means: another writer took the stream's next version."""
    streams = sorted({row["stream_id"] for row in rows})
    return ConcurrencyConflict(f"another writer moved {', '.join(streams[:3])} first")


def _gaps(conn: Connection) -> list[tuple[int, int]]:
    return [(int(first), int(last)) for first, last in conn.execute(select(event_gaps))]


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
