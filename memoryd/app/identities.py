"""Users, tokens and sessions through their lifecycle, each change audited in its own transaction.

The directory's tables hold the identities and their credentials (never the log: no secret, hash or prefix
is ever in an event). Every act of their lifecycle (a user created, deactivated or reactivated, a token
created or revoked, a session opened or closed, its coordinator's children with it) changes the table and appends an
audit event (``events.types.IdentityEvent``) in one transaction: both happen, or neither. The audit trail
(``GET /v1/api/admin/audit?action=token.revoke``) lists them with the actor, the time and the reason.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from sqlalchemy import Connection

from events.store import EventStore
from events.transaction import AppendTransaction
from events.types import (
    EventMetadata,
    IdentityEvent,
    SessionClosed,
    SessionOpened,
    TokenCreated,
    TokenRevoked,
    UserCreated,
    UserDeactivated,
    UserReactivated,
)
from memoryd.kernel.domain import utc_timestamp
from memoryd.kernel.errors import NotFound, ValidationError
from memoryd.kernel.text import checked_text
from memoryd.storage.directory import Directory, TokenRecord, UserRecord, expiry
from memoryd.storage.sessions import Session, Sessions

MAX_REASON = 1_000
OPERATOR = EventMetadata(actor_user_id="cli", surface="cli")  # the command line: database access is the authority


class Identities:
    def __init__(self, store: EventStore, directory: Directory, sessions: Sessions,
                 appended: Callable[[int, bool], None], default_token_days: int = 0) -> None:
        self.store = store
        self.directory = directory
        self.sessions = sessions
        self.appended = appended  # the dispatcher's: projections pass the audit events (they apply none)
        self.default_token_days = default_token_days

    def create_user(self, name: str, metadata: EventMetadata = OPERATOR) -> UserRecord:
        with self.store.transaction() as tx:
            user_id = self.directory.create_user(name, conn=tx.conn)
            position = self._audit(tx, [UserCreated(user_id, name=name)], metadata)
        self.appended(position, False)
        return self._user(user_id)

    def set_user_active(self, user_id: str, active: bool, metadata: EventMetadata = OPERATOR,
                        reason: str = "") -> UserRecord:
        """Deactivate (its tokens and sessions are refused at once, everywhere) or reactivate a user; doing
        it again changes nothing and records nothing."""
        reason = _reason(reason)
        with self.store.transaction() as tx:
            user, changed = self.directory.set_user_active(user_id, active, tx.conn)
            event = (UserReactivated if active else UserDeactivated)(user_id, name=user.name, reason=reason)
            position = self._audit(tx, [event], metadata) if changed else None
        if position is not None:
            self.appended(position, False)
        return user

    def create_token(self, user_id: str, scopes: list[str], permissions: list[str],
                     metadata: EventMetadata = OPERATOR, *, name: str = "", expires_at: str | None = None,
                     expires_in_days: int | None = None, value: str | None = None) -> tuple[TokenRecord, str]:
        """A new token and its clear value (shown once). Without ``expires_at`` nor ``expires_in_days`` it
        lives ``[auth] default_token_days`` (0: for ever)."""
        if expires_at is not None and expires_in_days is not None:
            raise ValidationError("give expires_at or expires_in_days, not both")
        if expires_in_days is not None and expires_in_days < 1:
            raise ValidationError("expires_in_days must be at least 1")
        if expires_at is None:
            expires_at = expiry(self.default_token_days if expires_in_days is None else expires_in_days)
        else:
            expires_at = _timestamp(expires_at)
        with self.store.transaction() as tx:
            token_id, clear = self.directory.create_token(user_id, scopes, permissions, value, name=name,
                                                          expires_at=expires_at, conn=tx.conn)
            token = self.directory.token(token_id, tx.conn)
            assert token is not None
            details = {"scopes": token.scopes, "permissions": token.permissions, "expires_at": token.expires_at}
            position = self._audit(tx, [TokenCreated(user_id, token_id=token_id, name=name, details=details)], metadata)
        self.appended(position, False)
        return token, clear

    def revoke_token(self, token_id: str, metadata: EventMetadata = OPERATOR, reason: str = "") -> TokenRecord:
        """Revoke a token: its next request, to any API process, is refused ("token revoked")."""
        reason = _reason(reason)
        with self.store.transaction() as tx:
            token, changed = self.directory.revoke_token(token_id, tx.conn)
            event = TokenRevoked(token.user_id, token_id=token_id, name=token.name, reason=reason)
            position = self._audit(tx, [event], metadata) if changed else None
        if position is not None:
            self.appended(position, False)
        return token

    def open_session(self, kind: str, workstream_id: str, user_id: str = "", parent_session_id: str = "",
                     metadata: EventMetadata = OPERATOR,
                     within: Callable[[Connection, Session, str], None] | None = None) -> tuple[Session, str]:
        """Open a session and return it with its token (shown once); ``within`` runs in the same transaction."""
        with self.store.transaction() as tx:
            session, token = self.sessions.create(kind, workstream_id, user_id, parent_session_id, within=within,
                                                  conn=tx.conn)
            position = self._audit(tx, [SessionOpened(session.user_id, session_id=session.session_id,
                                                  details=_described(session))], metadata)
        self.appended(position, False)
        return session, token

    def close_session(self, session_id: str, metadata: EventMetadata = OPERATOR, reason: str = "") -> list[Session]:
        """Close a session and, for a coordinator, its open children: their tokens are refused from then on,
        their receipts stay. The sessions closed now (none if it was closed already)."""
        reason = _reason(reason)
        with self.store.transaction() as tx:
            closed = self.sessions.close(session_id, tx.conn)
            position = self._audit(tx, [_closed(session, reason if session.session_id == session_id else
                                            f"its coordinator {session_id} closed") for session in closed],
                                   metadata) if closed else None
        if position is not None:
            self.appended(position, False)
        return closed

    def close_idle(self, metadata: EventMetadata = OPERATOR, session_ids: Sequence[str] | None = None) -> list[str]:
        """Close the sessions unused for ``[auth] session_idle_days`` (or those of ``session_ids`` still
        open and idle): the ids closed now, children included."""
        idle = set(self.sessions.idle()) if session_ids is None else set(session_ids) & set(self.sessions.idle())
        reason = f"idle for {self.sessions.idle_days} days"
        closed: list[str] = []
        for session_id in sorted(idle):
            try:
                closed += [session.session_id for session in self.close_session(session_id, metadata, reason)]
            except NotFound:  # gone meanwhile
                continue
        return closed

    def _audit(self, tx: AppendTransaction, audit_events: Sequence[IdentityEvent], metadata: EventMetadata) -> int:
        """(In the change's transaction ``tx``) Append the audit events, each at its stream's next version: the
        last position."""
        streams = {event.stream_id() for event in audit_events}
        self.store.hold_appends(tx)
        versions = {stream: (found.stream_version if found else 0)
                    for stream, found in self.store.last_events(streams, tx).items()}
        appends = []
        for event in audit_events:
            versions[event.stream_id()] += 1
            appends.append((event.stream_id(), versions[event.stream_id()], event))
        return self.store.append_many(appends, metadata, tx=tx)[-1]

    def _user(self, user_id: str) -> UserRecord:
        user = self.directory.user(user_id)
        if user is None:
            raise NotFound(f"user not found: {user_id}")
        return user


def _closed(session: Session, reason: str) -> SessionClosed:
    return SessionClosed(session.user_id, session_id=session.session_id, reason=reason, details=_described(session))


def _described(session: Session) -> dict[str, str]:
    return {"kind": session.kind, "workstream_id": session.workstream_id,
            "parent_session_id": session.parent_session_id}


def _reason(reason: str) -> str:
    checked_text(reason, "reason")
    if len(reason) > MAX_REASON:
        raise ValidationError(f"reason must be at most {MAX_REASON} characters")
    return reason.strip()


def _timestamp(text: str) -> str:
    """An ISO 8601 time as the directory stores it (UTC, to the second); a time without a zone is UTC."""
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError("expires_at must be an ISO 8601 time, like 2027-01-31T00:00:00Z") from None
    return utc_timestamp(moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC))
