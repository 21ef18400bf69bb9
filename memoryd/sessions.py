"""Agent sessions: who acts, in which workstream, and the token that proves it.

A session is ``interactive`` or ``coordinator``; a coordinator's children are
interactive sessions that name it as their parent and share its user. A
coordinator needs a real user: there is no anonymous coordinator. A session's
token can act only as that session.
"""

from __future__ import annotations

import hmac
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, insert, select

from memoryd.db import Database
from memoryd.directory import Directory, hash_token
from memoryd.domain import utc_timestamp
from memoryd.errors import NotFound, ValidationError
from memoryd.schema import sessions
from memoryd.text import checked_identifier

KINDS = ("interactive", "coordinator")
TOKEN_PREFIX = "mds_"
# Built once: every session route runs one of these.
_BY_ID = select(sessions).where(sessions.c.session_id == bindparam("session_id"))
_BY_TOKEN = select(sessions).where(sessions.c.token_hash == bindparam("token_hash"))


@dataclass(frozen=True)
class Session:
    session_id: str
    kind: str
    user_id: str  # "" when anonymous
    workstream_id: str
    parent_session_id: str  # "" unless a coordinator's child

    @property
    def is_coordinator(self) -> bool:
        return self.kind == "coordinator"


class Sessions:
    def __init__(self, database: Database, directory: Directory) -> None:
        self.database = database
        self.directory = directory

    def create(self, kind: str, workstream_id: str, user_id: str = "", parent_session_id: str = "",
               within: Callable[[Connection, Session, str], None] | None = None) -> tuple[Session, str]:
        """Open a session; returns it and its token (shown once, stored hashed).

        ``within(conn, session, token)`` runs in the same transaction (to record an idempotent answer).
        """
        for field, value in (("kind", kind), ("workstream_id", workstream_id), ("user_id", user_id),
                             ("parent_session_id", parent_session_id)):
            checked_identifier(value, field)
        if kind not in KINDS:
            raise ValidationError(f"kind must be one of {list(KINDS)}")
        if self.directory.workstream(workstream_id) is None:
            raise NotFound("Workstream not found")
        if user_id and not self.directory.user_exists(user_id):
            raise NotFound(f"user not found: {user_id}")
        if parent_session_id:
            parent = self.get(parent_session_id)
            if parent is None:
                raise NotFound(f"parent session not found: {parent_session_id}")
            if not parent.is_coordinator or kind != "interactive":
                raise ValidationError("a child session is interactive and its parent is a coordinator session")
            if user_id and user_id != parent.user_id:
                raise ValidationError("a child session acts as its coordinator's user")
            user_id = parent.user_id
        if kind == "coordinator" and not user_id:
            raise ValidationError("coordinator sessions require an authenticated user_id")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        session = Session(str(uuid.uuid4()), kind, user_id, workstream_id, parent_session_id)
        with self.database.write() as conn:
            conn.execute(insert(sessions).values(
                session_id=session.session_id, kind=kind, user_id=user_id or None, workstream_id=workstream_id,
                parent_session_id=parent_session_id or None, token_hash=hash_token(token), created=utc_timestamp()))
            if within is not None:
                within(conn, session, token)
        return session, token

    def get(self, session_id: str) -> Session | None:
        with self.database.read() as conn:
            row = conn.execute(_BY_ID, {"session_id": session_id}).first()
        return _session(row) if row else None

    def by_token(self, token: str) -> Session | None:
        digest = hash_token(token)
        with self.database.read() as conn:
            row = conn.execute(_BY_TOKEN, {"token_hash": digest}).first()
        return _session(row) if row is not None and hmac.compare_digest(row.token_hash, digest) else None


def _session(row: object) -> Session:
    return Session(row.session_id, row.kind, row.user_id or "", row.workstream_id,  # type: ignore[attr-defined]
                   row.parent_session_id or "")  # type: ignore[attr-defined]
