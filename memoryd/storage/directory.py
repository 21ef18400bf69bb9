"""The directory: users, API tokens and workstreams.

Reference data rather than memories: created by operators through the CLI or the admin API and consulted
by the API for authentication and scope ownership. Tokens are stored only as SHA-256 hashes; the clear value
is shown once, at creation, and a short prefix (``mdt_`` and 4 characters) is kept to tell tokens apart in a
list. The lifecycle (a user deactivated, a token revoked or expired) is checked by the one indexed read that
authenticates every request, so it holds on every API process at once. Who changed what is in the audit
trail: ``memoryd/app/identities.py`` wraps these changes with their audit events.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from memoryd.kernel.domain import utc_timestamp
from memoryd.kernel.errors import Conflict, NotFound, Refused, ValidationError
from memoryd.kernel.text import checked_identifier, checked_text
from memoryd.storage.db import Database
from memoryd.storage.schema import tokens, users, workstreams
from memoryd.storage.touches import Touches

TOKEN_SCOPES = ("read", "write", "service")  # each implies the ones before it
PERMISSIONS = ("admin.memories",)
TOKEN_PREFIX = "mdt_"
SHOWN_PREFIX = len(TOKEN_PREFIX) + 4  # what a list shows of a token: 24 bits of its 256, no help to a guess
INVALID = "invalid token"  # what an unknown token is told: nothing more


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the token's user, scopes and permissions."""

    user_id: str
    token_id: str
    scopes: frozenset[str]
    permissions: frozenset[str]

    def has_scope(self, needed: str) -> bool:
        rank = TOKEN_SCOPES.index
        return any(rank(held) >= rank(needed) for held in self.scopes)

    def has_permission(self, permission: str) -> bool:
        return permission in self.permissions


@dataclass(frozen=True)
class Workstream:
    workstream_id: str
    name: str
    owner_user_id: str | None
    project_id: str | None = None  # the attached project
    persona_memory: bool = True  # False: the persona turns memory off


Within = Callable[[Connection, "Workstream"], None]


# Every request: the token, its user's state, in one indexed read (built once)
_TOKEN = select(tokens, users.c.deactivated_at.label("user_deactivated_at")) \
    .join(users, users.c.user_id == tokens.c.user_id).where(tokens.c.token_hash == bindparam("token_hash"))
_WORKSTREAM = select(workstreams).where(workstreams.c.workstream_id == bindparam("workstream_id"))  # every turn: built once


@dataclass(frozen=True)
class UserRecord:
    user_id: str
    name: str
    created: str
    deactivated_at: str | None

    @property
    def active(self) -> bool:
        return self.deactivated_at is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"active": self.active}


@dataclass(frozen=True)
class TokenRecord:
    """What may be shown of a token: never its value nor its hash."""

    token_id: str
    prefix: str  # "" for a token made before prefixes were kept, or whose value an operator chose
    name: str
    user_id: str
    scopes: list[str]
    permissions: list[str]
    created: str
    expires_at: str | None
    last_used_at: str | None
    revoked_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Directory:
    def __init__(self, database: Database, touches: Touches | None = None) -> None:
        self.database = database
        self.touches = touches or Touches(database)

    def create_user(self, name: str, within: Callable[[Connection, UserRecord], None] | None = None, *,
                    conn: Connection | None = None) -> str:
        """A new user; a name already taken is a ``Conflict``. ``within`` runs in the same transaction: ``conn``'s,
        if given (the caller's, which records it), else one of its own."""
        checked_text(name, "name")
        if not name.strip():
            raise ValidationError("name must not be empty")
        user = UserRecord(str(uuid.uuid4()), name, utc_timestamp(), None)
        try:
            with self.database.write(conn) as writing:
                if writing.execute(select(users.c.user_id).where(users.c.name == name)).first() is not None:
                    raise Conflict(f"a user named {name!r} already exists")
                writing.execute(insert(users).values(user_id=user.user_id, name=name, created=user.created))
                if within is not None:
                    within(writing, user)
        except IntegrityError:  # a racing create of the same name won
            raise Conflict(f"a user named {name!r} already exists") from None
        return user.user_id

    def user(self, user_id: str, conn: Connection | None = None) -> UserRecord | None:
        with self.database.read(conn) as reading:
            row = reading.execute(select(users).where(users.c.user_id == user_id)).first()
        return UserRecord(row.user_id, row.name, row.created, row.deactivated_at) if row else None

    def user_named(self, name: str) -> UserRecord | None:
        with self.database.read() as conn:
            row = conn.execute(select(users).where(users.c.name == name)).first()
        return UserRecord(row.user_id, row.name, row.created, row.deactivated_at) if row else None

    def set_user_active(self, user_id: str, active: bool, conn: Connection | None = None) -> tuple[UserRecord, bool]:
        """Deactivate or reactivate (in ``conn``'s transaction if given); the user and whether it changed (doing
        it twice changes nothing)."""
        found = self.user(user_id, conn)
        if found is None:
            raise NotFound(f"user not found: {user_id}")
        if found.active == active:
            return found, False
        deactivated_at = None if active else utc_timestamp()
        with self.database.write(conn) as writing:
            writing.execute(update(users).where(users.c.user_id == user_id).values(deactivated_at=deactivated_at))
        return UserRecord(found.user_id, found.name, found.created, deactivated_at), True

    def create_token(
        self, user_id: str, scopes: list[str], permissions: list[str], value: str | None = None, *,
        name: str = "", expires_at: str | None = None, conn: Connection | None = None,
    ) -> tuple[str, str]:
        """Return ``(token_id, clear token)``; ``value`` adopts a token chosen by the operator. In ``conn``'s
        transaction if given."""
        unknown = [scope for scope in scopes if scope not in TOKEN_SCOPES]
        if unknown or not scopes:
            raise ValidationError(f"scopes must be some of {', '.join(TOKEN_SCOPES)} (got {', '.join(scopes) or 'none'})")
        if bad := [permission for permission in permissions if permission not in PERMISSIONS]:
            raise ValidationError(f"unknown permission: {', '.join(bad)}; known: {', '.join(PERMISSIONS)}")
        checked_text(name, "name")
        if expires_at is not None and expires_at <= utc_timestamp():
            raise ValidationError("expires_at must be in the future")
        value = value or TOKEN_PREFIX + secrets.token_urlsafe(32)
        # a prefix only of a value memoryd made (an operator's own value may be short: no part of it is shown)
        prefix = value[:SHOWN_PREFIX] if value.startswith(TOKEN_PREFIX) and len(value) >= 40 else ""
        record = TokenRecord(str(uuid.uuid4()), prefix, name, user_id, list(scopes), list(permissions), utc_timestamp(),
                             expires_at, None, None)
        with self.database.write(conn) as writing:
            user = writing.execute(select(users.c.deactivated_at).where(users.c.user_id == user_id)).first()
            if user is None:
                raise NotFound(f"user not found: {user_id}")
            if user.deactivated_at is not None:
                raise Conflict(f"user {user_id} is deactivated: reactivate it first")
            writing.execute(
                insert(tokens).values(
                    token_id=record.token_id,
                    user_id=user_id,
                    token_hash=hash_token(value),
                    scopes=",".join(scopes),
                    permissions=",".join(permissions),
                    created=record.created,
                    name=name,
                    prefix=prefix,
                    expires_at=expires_at,
                )
            )
        return record.token_id, value

    def token(self, token_id: str, conn: Connection | None = None) -> TokenRecord | None:
        with self.database.read(conn) as reading:
            row = reading.execute(select(tokens).where(tokens.c.token_id == token_id)).first()
        return token_record(row) if row else None

    def revoke_token(self, token_id: str, conn: Connection | None = None) -> tuple[TokenRecord, bool]:
        """Revoke it (in ``conn``'s transaction if given); the token and whether it changed (revoking twice
        changes nothing)."""
        found = self.token(token_id, conn)
        if found is None:
            raise NotFound(f"token not found: {token_id}")
        if found.revoked_at is not None:
            return found, False
        revoked_at = utc_timestamp()
        with self.database.write(conn) as writing:
            writing.execute(update(tokens).where(tokens.c.token_id == token_id).values(revoked_at=revoked_at))
        return token_record_with(found, revoked_at=revoked_at), True

    def verify(self, value: str) -> Principal:
        """The caller a token authenticates, in one indexed read; ``Refused`` naming why not (an unknown token:
        "invalid token", nothing more). Notes its use (``last_used_at``) without waiting for it."""
        digest = hash_token(value)
        with self.database.read() as conn:
            row = conn.execute(_TOKEN, {"token_hash": digest}).first()
        if row is None or not hmac.compare_digest(row.token_hash, digest):
            raise Refused(INVALID)
        if row.revoked_at is not None:
            raise Refused("token revoked")
        now = utc_timestamp()
        if row.expires_at is not None and row.expires_at <= now:
            raise Refused("token expired")
        if row.user_deactivated_at is not None:
            raise Refused("user deactivated")
        self.touches.note(tokens, row.token_id, row.last_used_at, now)
        return Principal(
            user_id=row.user_id,
            token_id=row.token_id,
            scopes=frozenset(filter(None, row.scopes.split(","))),
            permissions=frozenset(filter(None, row.permissions.split(","))),
        )

    def authenticate(self, value: str) -> Principal | None:
        """The caller a token authenticates, or None for any token that is refused."""
        try:
            return self.verify(value)
        except Refused:
            return None

    def user_exists(self, user_id: str, within: Connection | None = None) -> bool:
        with self.database.read(within) as conn:
            return conn.execute(select(users.c.user_id).where(users.c.user_id == user_id)).first() is not None

    def has_tokens(self) -> bool:
        with self.database.read() as conn:
            return conn.execute(select(tokens.c.token_id).limit(1)).first() is not None

    def create_workstream(self, owner_user_id: str | None, name: str = "", project_id: str | None = None,
                          persona_memory: bool = True, within: Within | None = None) -> str:
        """Create it; ``within(conn, workstream)`` runs in the same transaction (to record an idempotent answer)."""
        checked_text(name, "name")
        checked_identifier(owner_user_id or "", "owner")
        checked_identifier(project_id or "", "project_id")
        workstream_id = str(uuid.uuid4())
        with self.database.write() as conn:
            if owner_user_id and conn.execute(select(users.c.user_id).where(users.c.user_id == owner_user_id)).first() is None:
                raise NotFound(f"user not found: {owner_user_id}")
            conn.execute(
                insert(workstreams).values(
                    workstream_id=workstream_id, name=name, owner_user_id=owner_user_id or None, created=utc_timestamp(),
                    project_id=project_id or None, persona_memory=persona_memory,
                )
            )
            if within is not None:
                within(conn, Workstream(workstream_id, name, owner_user_id or None, project_id or None, persona_memory))
        return workstream_id

    def change_workstream(self, workstream_id: str, changes: dict[str, object]) -> Workstream:
        """Apply ``project_id`` (None detaches) and/or ``persona_memory``."""
        allowed = {key: value for key, value in changes.items() if key in ("project_id", "persona_memory")}
        with self.database.write() as conn:
            if allowed:
                conn.execute(update(workstreams).where(workstreams.c.workstream_id == workstream_id).values(**allowed))
        found = self.workstream(workstream_id)
        if found is None:
            raise NotFound("Workstream not found")
        return found

    def workstream(self, workstream_id: str, conn: Connection | None = None) -> Workstream | None:
        with self.database.read(conn) as reading:
            row = reading.execute(_WORKSTREAM, {"workstream_id": workstream_id}).first()
        if row is None:
            return None
        return Workstream(row.workstream_id, row.name, row.owner_user_id, row.project_id, bool(row.persona_memory))


def hash_token(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def expiry(days: int | None, moment: dt.datetime | None = None) -> str | None:
    """The ``expires_at`` of a token made now that lives ``days`` days (None or 0: never expires)."""
    if not days:
        return None
    return utc_timestamp((moment or dt.datetime.now(dt.UTC)) + dt.timedelta(days=days))


def token_record(row: Any) -> TokenRecord:
    return TokenRecord(row.token_id, row.prefix, row.name, row.user_id, list(filter(None, row.scopes.split(","))),
                       list(filter(None, row.permissions.split(","))), row.created, row.expires_at, row.last_used_at,
                       row.revoked_at)


def token_record_with(record: TokenRecord, **changes: Any) -> TokenRecord:
    return TokenRecord(**(asdict(record) | changes))
