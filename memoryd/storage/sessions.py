"""Agent sessions: who acts, in which workstream, and the token that proves it.

A session is ``interactive`` or ``coordinator``; a coordinator's children are
interactive sessions that name it as their parent and share its user. A
coordinator needs a real user: there is no anonymous coordinator. A session's
token can act only as that session, until the session is closed (by its token,
an admin or the operator, with its coordinator, or after ``session_idle_days``
without use) or its user is deactivated.
"""

from __future__ import annotations

import datetime as dt
import hmac
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, insert, select, update

from memoryd.kernel.domain import utc_timestamp
from memoryd.kernel.errors import NotFound, Refused, ValidationError
from memoryd.kernel.text import checked_identifier
from memoryd.storage.db import Database
from memoryd.storage.directory import INVALID, Directory, hash_token
from memoryd.storage.schema import sessions, users

KINDS = ("interactive", "coordinator")
TOKEN_PREFIX = "mds_"
# Built once: every session route runs one of these.
_BY_ID = select(sessions).where(sessions.c.session_id == bindparam("session_id"))
_BY_TOKEN = select(sessions, users.c.deactivated_at.label("user_deactivated_at")) \
    .outerjoin(users, users.c.user_id == sessions.c.user_id).where(sessions.c.token_hash == bindparam("token_hash"))
_CHILDREN = select(sessions.c.session_id).where(sessions.c.parent_session_id == bindparam("parent"),
                                                sessions.c.closed_at.is_(None))


class SessionIdle(Refused):
    """A session unused for ``session_idle_days``: refused as closed; the caller records its close."""

    def __init__(self, session_id: str) -> None:
        super().__init__("session closed")
        self.session_id = session_id


@dataclass(frozen=True)
class Session:
    session_id: str
    kind: str
    user_id: str  # "" when anonymous
    workstream_id: str
    parent_session_id: str  # "" unless a coordinator's child
    created: str = ""
    closed_at: str | None = None
    last_active_at: str | None = None

    @property
    def is_coordinator(self) -> bool:
        return self.kind == "coordinator"


class Sessions:
    def __init__(self, database: Database, directory: Directory, idle_days: int = 0) -> None:
        self.database = database
        self.directory = directory
        self.idle_days = idle_days  # 0: sessions never close for idleness

    def create(self, kind: str, workstream_id: str, user_id: str = "", parent_session_id: str = "",
               within: Callable[[Connection, Session, str], None] | None = None, *,
               conn: Connection | None = None) -> tuple[Session, str]:
        """Open a session, in ``conn``'s transaction if given (the caller's, which records it), else one of its
        own; returns it and its token (shown once, stored hashed).

        ``within(conn, session, token)`` runs in the same transaction (to record an idempotent answer).
        """
        for field, value in (("kind", kind), ("workstream_id", workstream_id), ("user_id", user_id),
                             ("parent_session_id", parent_session_id)):
            checked_identifier(value, field)
        if kind not in KINDS:
            raise ValidationError(f"kind must be one of {list(KINDS)}")
        if self.directory.workstream(workstream_id, conn) is None:
            raise NotFound("Workstream not found")
        user = self.directory.user(user_id, conn) if user_id else None
        if user_id and user is None:
            raise NotFound(f"user not found: {user_id}")
        if user is not None and not user.active:
            raise ValidationError(f"user {user_id} is deactivated")
        if parent_session_id:
            parent = self.get(parent_session_id, conn)
            if parent is None:
                raise NotFound(f"parent session not found: {parent_session_id}")
            if parent.closed_at is not None:
                raise ValidationError(f"parent session {parent_session_id} is closed")
            if not parent.is_coordinator or kind != "interactive":
                raise ValidationError("a child session is interactive and its parent is a coordinator session")
            if user_id and user_id != parent.user_id:
                raise ValidationError("a child session acts as its coordinator's user")
            user_id = parent.user_id
        if kind == "coordinator" and not user_id:
            raise ValidationError("coordinator sessions require an authenticated user_id")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        session = Session(str(uuid.uuid4()), kind, user_id, workstream_id, parent_session_id, utc_timestamp())
        with self.database.write(conn) as writing:
            writing.execute(insert(sessions).values(
                session_id=session.session_id, kind=kind, user_id=user_id or None, workstream_id=workstream_id,
                parent_session_id=parent_session_id or None, token_hash=hash_token(token), created=session.created))
            if within is not None:
                within(writing, session, token)
        return session, token

    def get(self, session_id: str, conn: Connection | None = None) -> Session | None:
        with self.database.read(conn) as reading:
            row = reading.execute(_BY_ID, {"session_id": session_id}).first()
        return _session(row) if row else None

    def verify(self, token: str) -> Session:
        """The open session a token acts as, in one indexed read; ``Refused`` naming why not ("invalid token"
        for an unknown one), ``SessionIdle`` for one unused for ``idle_days`` (whose close the caller records).
        Notes its use (``last_active_at``) without waiting for it."""
        digest = hash_token(token)
        with self.database.read() as conn:
            row = conn.execute(_BY_TOKEN, {"token_hash": digest}).first()
        if row is None or not hmac.compare_digest(row.token_hash, digest):
            raise Refused(INVALID)
        if row.closed_at is not None:
            raise Refused("session closed")
        if row.user_deactivated_at is not None:
            raise Refused("user deactivated")
        now = utc_timestamp()
        if self.idle_since(now) > (row.last_active_at or row.created):
            raise SessionIdle(row.session_id)
        self.directory.touches.note(sessions, row.session_id, row.last_active_at, now)
        return _session(row)

    def by_token(self, token: str) -> Session | None:
        """The open session a token acts as, or None for any token that is refused."""
        try:
            return self.verify(token)
        except Refused:
            return None

    def idle_since(self, now: str | None = None) -> str:
        """Sessions last used before this time are idle ("" when sessions never idle out)."""
        if not self.idle_days:
            return ""
        moment = dt.datetime.fromisoformat(now).replace(tzinfo=dt.UTC) if now else dt.datetime.now(dt.UTC)
        return utc_timestamp(moment - dt.timedelta(days=self.idle_days))

    def close(self, session_id: str, conn: Connection | None = None) -> list[Session]:
        """(In ``conn``'s transaction if given) Close the session and, if a coordinator, its open children:
        the sessions closed now, the named one first (none when it was closed already)."""
        found = self.get(session_id, conn)
        if found is None:
            raise NotFound(f"session not found: {session_id}")
        if found.closed_at is not None:
            return []
        closed_at = utc_timestamp()
        with self.database.write(conn) as writing:
            children = [self.get(child, writing) for (child,) in writing.execute(_CHILDREN, {"parent": session_id}).all()]
            closing = [found, *(child for child in children if child is not None)]
            writing.execute(update(sessions).where(sessions.c.session_id.in_([s.session_id for s in closing]))
                         .values(closed_at=closed_at))
        return [Session(s.session_id, s.kind, s.user_id, s.workstream_id, s.parent_session_id, s.created, closed_at,
                        s.last_active_at) for s in closing]

    def idle(self, limit: int = 1_000) -> list[str]:
        """Open sessions unused for ``idle_days`` (none when they never idle out), oldest first."""
        if not self.idle_days:
            return []
        cutoff = self.idle_since()
        last = sessions.c.last_active_at
        query = select(sessions.c.session_id).where(
            sessions.c.closed_at.is_(None),
            ((last.is_(None) & (sessions.c.created < cutoff)) | (last < cutoff))).order_by(sessions.c.created)
        with self.database.read() as conn:
            return list(conn.execute(query.limit(limit)).scalars())


def _session(row: object) -> Session:
    return Session(row.session_id, row.kind, row.user_id or "", row.workstream_id,  # type: ignore[attr-defined]
                   row.parent_session_id or "", row.created, row.closed_at,  # type: ignore[attr-defined]
                   row.last_active_at)  # type: ignore[attr-defined]
