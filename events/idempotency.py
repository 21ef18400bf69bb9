"""Durable idempotency keys, claimed in the same transaction as the append.

A retried request whose first attempt appended finds its claim and gets the
first answer back; it can never append a second time, even if the first
attempt's connection dropped after the commit. The same key with a
different request is refused.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from memoryd.db import Database
from memoryd.domain import utc_timestamp
from memoryd.schema import idempotency_keys as keys


@dataclass(frozen=True)
class IdempotencyClaim:
    """A caller's key for one request, and a digest of that request."""

    user_id: str
    key: str
    fingerprint: str


@dataclass(frozen=True)
class StoredOutcome:
    fingerprint: str
    position: int
    status: int | None
    response: Any


class IdempotencyKeyTaken(Exception):
    """Another request already claimed this key."""


class IdempotencyKeys:
    def __init__(self, database: Database, window: dt.timedelta) -> None:
        self.database = database
        self.window = window

    def claim(self, conn: Connection, claim: IdempotencyClaim, position: int) -> None:
        """Inside the append's transaction: take the key for ``position`` or raise."""
        conn.execute(delete(keys).where(keys.c.user_id == claim.user_id, keys.c.key == claim.key,
                                        keys.c.created < self._cutoff()))
        insert = postgres_insert if conn.dialect.name == "postgresql" else sqlite_insert
        taken = conn.execute(insert(keys).values(
            user_id=claim.user_id, key=claim.key, fingerprint=claim.fingerprint, position=position,
            created=utc_timestamp()).on_conflict_do_nothing().returning(keys.c.key)).first()
        if taken is None:  # (rowcount is not reliable for ON CONFLICT on every driver)
            raise IdempotencyKeyTaken(claim.key)

    def find(self, user_id: str, key: str) -> StoredOutcome | None:
        query = select(keys).where(keys.c.user_id == user_id, keys.c.key == key, keys.c.created >= self._cutoff())
        with self.database.read() as conn:
            row = conn.execute(query).first()
        return StoredOutcome(row.fingerprint, row.position, row.status, row.response) if row else None

    def remember(self, user_id: str, key: str, status: int, response: Any) -> None:
        with self.database.write() as conn:
            conn.execute(update(keys).where(keys.c.user_id == user_id, keys.c.key == key)
                         .values(status=status, response=response))

    def purge_expired(self) -> int:
        with self.database.write() as conn:
            return conn.execute(delete(keys).where(keys.c.created < self._cutoff())).rowcount

    def _cutoff(self) -> str:
        return utc_timestamp(dt.datetime.now(dt.timezone.utc) - self.window)
