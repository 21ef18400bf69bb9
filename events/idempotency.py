"""Durable idempotency keys: claimed before the request runs, fenced at the append.

An attempt takes the key first (a row with no answer yet), so concurrent
retries of one request wait for its answer instead of deciding on their own.
The append that the request makes records its position in the same
transaction, and only while the claim is still that attempt's: a retried
request can never append twice, even if the first attempt's connection
dropped after the commit. The same key with a different request is refused.

A claim is a lease: ``created`` is when it was taken, renewed every
``RENEW_EVERY`` while its request runs (``leased``). One not renewed for
``LEASE`` has lost its attempt (the process died, or the request ended
without giving the key back because the database was gone), and a retry takes
it over. Taking over too early is safe, only wasted: the fence at the append
turns the first attempt away.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Text, cast, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from events.erasure import erasures_since, newest_erasure
from events.store import take_append_lock
from memoryd.kernel.domain import TIMESTAMP_FORMAT, utc_timestamp
from memoryd.storage.db import Database
from memoryd.storage.schema import idempotency_keys as keys

LEASE = dt.timedelta(seconds=5)  # a claim not renewed this long has lost its attempt
RENEW_EVERY = 1.0  # seconds between renewals of the claims a process's running requests hold
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IdempotencyClaim:
    """A caller's key for one request, a digest of that request, and the attempt that claims it."""

    user_id: str
    key: str
    fingerprint: str
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class StoredOutcome:
    fingerprint: str
    position: int | None  # None: the holder has appended nothing (yet)
    status: int | None  # None: no answer stored (yet)
    response: Any
    attempt: str | None
    claimed: str

    @property
    def answered(self) -> bool:
        """The request's outcome is known: an answer, or at least the event it appended."""
        return self.status is not None or self.position is not None

    def lease_left(self, now: dt.datetime) -> dt.timedelta:
        """How long the claim's lease still runs unless renewed (negative: its attempt is gone)."""
        claimed = dt.datetime.strptime(self.claimed, TIMESTAMP_FORMAT).replace(tzinfo=dt.UTC)
        return claimed + LEASE - now


class IdempotencyKeyTaken(Exception):
    """Another attempt holds this key now."""


class IdempotencyKeys:
    def __init__(self, database: Database, window: dt.timedelta) -> None:
        self.database = database
        self.window = window
        self._renewals = _Renewals(database)

    def leased(self, claim: IdempotencyClaim) -> Any:
        """A context in which ``claim``'s lease is renewed: around the request that holds it."""
        return self._renewals.held(claim)

    def take(self, claim: IdempotencyClaim) -> StoredOutcome | None:
        """Claim the key for ``claim.attempt`` (None), or return what holds it already."""
        with self.database.write() as conn:
            conn.execute(delete(keys).where(keys.c.user_id == claim.user_id, keys.c.key == claim.key,
                                            keys.c.created < self._cutoff()))
            insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
            taken = conn.execute(insert(keys).values(
                user_id=claim.user_id, key=claim.key, fingerprint=claim.fingerprint, position=None,
                created=utc_timestamp(), attempt=claim.attempt).on_conflict_do_nothing().returning(keys.c.key)).first()
        return None if taken is not None else self.find(claim.user_id, claim.key)

    def take_over(self, claim: IdempotencyClaim, abandoned: StoredOutcome) -> bool:
        """Take a claim whose attempt left without an outcome (it died); False if another moved first."""
        with self.database.write() as conn:
            moved = conn.execute(update(keys).where(
                keys.c.user_id == claim.user_id, keys.c.key == claim.key, keys.c.position.is_(None),
                keys.c.status.is_(None), _held_by(abandoned.attempt),
            ).values(attempt=claim.attempt, fingerprint=claim.fingerprint, created=utc_timestamp()))
        return moved.rowcount == 1

    def claim(self, conn: Connection, claim: IdempotencyClaim, position: int) -> None:
        """Inside the append's transaction: record ``position`` under this attempt's claim, or raise."""
        recorded = conn.execute(update(keys).where(
            keys.c.user_id == claim.user_id, keys.c.key == claim.key, keys.c.attempt == claim.attempt,
            keys.c.position.is_(None)).values(position=position))
        if recorded.rowcount != 1:
            raise IdempotencyKeyTaken(claim.key)

    def answer(self, conn: Connection, claim: IdempotencyClaim, status: int, response: Any) -> None:
        """Inside the transaction that creates a resource (no event): store the answer under this claim, or raise."""
        stored = conn.execute(update(keys).where(
            keys.c.user_id == claim.user_id, keys.c.key == claim.key, keys.c.attempt == claim.attempt,
        ).values(status=status, response=response))
        if stored.rowcount != 1:
            raise IdempotencyKeyTaken(claim.key)

    def erasure_mark(self) -> int:
        """Where erasures stand now (the newest one's position): taken before a request runs, for ``remember``."""
        with self.database.read() as conn:
            return newest_erasure(conn)

    def remember(self, claim: IdempotencyClaim, status: int, response: Any, erasures_before: int) -> None:
        """Store the request's answer; unless another erasure committed while it ran (``erasures_before`` is
        ``erasure_mark`` from its start): the answer may hold what was erased, so a request that appended
        nothing gives its key back (a retry runs again) and one that did keeps no answer (a retry answers
        from the log). A key answered inside its own transaction (a created session) keeps its answer."""
        mine = (keys.c.user_id == claim.user_id, keys.c.key == claim.key, keys.c.attempt == claim.attempt)
        with self.database.write() as conn:
            take_append_lock(conn)  # an erasure holds it from its first read to its commit
            own = conn.execute(select(keys.c.position).where(*mine)).scalar()
            if erasures_since(conn, erasures_before, own):
                conn.execute(delete(keys).where(*mine, keys.c.position.is_(None), keys.c.status.is_(None)))
                return
            conn.execute(update(keys).where(*mine).values(status=status, response=response))

    def release(self, claim: IdempotencyClaim) -> None:
        """Give the key back after a request that changed nothing failed, so a retry runs again."""
        with self.database.write() as conn:
            conn.execute(delete(keys).where(keys.c.user_id == claim.user_id, keys.c.key == claim.key,
                                            keys.c.attempt == claim.attempt, keys.c.position.is_(None)))

    def find(self, user_id: str, key: str) -> StoredOutcome | None:
        query = select(keys).where(keys.c.user_id == user_id, keys.c.key == key, keys.c.created >= self._cutoff())
        with self.database.read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return StoredOutcome(row.fingerprint, row.position, row.status, row.response, row.attempt, row.created)

    @staticmethod
    def forget(conn: Connection, positions: Sequence[int], memory_ids: Sequence[str]) -> int:
        """(In an erasure's transaction) Forget the keys whose answers could give back erased memories: those of
        the writes at ``positions``, and any stored answer naming one of ``memory_ids`` (a turn's block, a
        tool call's result); a retry of such a request runs again. The keys forgotten."""
        forgotten = 0
        for first in range(0, len(positions), 500):
            forgotten += conn.execute(delete(keys).where(keys.c.position.in_(positions[first:first + 500]))).rowcount
        answer = cast(keys.c.response, Text)
        for memory_id in memory_ids:
            forgotten += conn.execute(delete(keys).where(answer.contains(memory_id, autoescape=True))).rowcount
        return forgotten

    def purge_expired(self) -> int:
        with self.database.write() as conn:
            return conn.execute(delete(keys).where(keys.c.created < self._cutoff())).rowcount

    def _cutoff(self) -> str:
        return utc_timestamp(dt.datetime.now(dt.UTC) - self.window)


def _held_by(attempt: str | None) -> Any:
    return keys.c.attempt.is_(None) if attempt is None else keys.c.attempt == attempt


class _Renewals:
    """The claims this process's running requests hold, renewed by one thread while any is held.

    A request that answers within ``RENEW_EVERY`` (nearly all) costs no renewal; the thread starts with the
    first claim held (in each process: a fork does not copy it) and stops when the database is disposed.
    """

    def __init__(self, database: Database) -> None:
        self.database = database
        self._held: dict[str, tuple[IdempotencyClaim, float]] = {}  # attempt -> its claim, when last renewed
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        database.before_dispose(self._stop)

    @contextmanager
    def held(self, claim: IdempotencyClaim) -> Iterator[None]:
        with self._lock:
            self._held[claim.attempt] = (claim, time.monotonic())
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._renew_while_running, name="memoryd-claims", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                del self._held[claim.attempt]

    def _renew_while_running(self) -> None:
        while not self._stopped.wait(RENEW_EVERY):
            now = time.monotonic()
            with self._lock:
                due = [claim for claim, renewed in self._held.values() if now - renewed >= RENEW_EVERY]
            if not due:
                continue
            try:
                self._renew(due)
            except SQLAlchemyError as error:  # the database is away: so are the requests' own writes
                log.warning("could not renew %d idempotency claims: %s", len(due), type(error).__name__)
                continue
            with self._lock:
                for claim in due:
                    if claim.attempt in self._held:
                        self._held[claim.attempt] = (claim, now)

    def _renew(self, claims: list[IdempotencyClaim]) -> None:
        renewed = utc_timestamp()
        with self.database.write() as conn:
            for claim in claims:
                conn.execute(update(keys).where(
                    keys.c.user_id == claim.user_id, keys.c.key == claim.key, keys.c.attempt == claim.attempt,
                    keys.c.position.is_(None), keys.c.status.is_(None)).values(created=renewed))

    def _stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
