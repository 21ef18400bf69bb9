"""Durable idempotency keys: claimed before the request runs, fenced at the append.

An attempt takes the key first (a row with no answer yet), so concurrent
retries of one request wait for its answer instead of deciding on their own.
The append that the request makes records its position in the same
transaction, and only while the claim is still that attempt's: a retried
request can never append twice, even if the first attempt's connection
dropped after the commit. The same key with a different request is refused.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Text, cast, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.erasure import erasures_since, newest_erasure
from events.store import take_append_lock
from memoryd.db import Database
from memoryd.domain import utc_timestamp
from memoryd.schema import idempotency_keys as keys


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


class IdempotencyKeyTaken(Exception):
    """Another attempt holds this key now."""


class IdempotencyKeys:
    def __init__(self, database: Database, window: dt.timedelta) -> None:
        self.database = database
        self.window = window

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
