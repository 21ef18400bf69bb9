"""The directory: users, API tokens and workstreams.

Reference data rather than memories: created by operators through the CLI
and consulted by the API for authentication and scope ownership. Tokens are
stored only as SHA-256 hashes; the clear value is shown once, at creation.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, insert, select, update

from memoryd.db import Database
from memoryd.domain import utc_timestamp
from memoryd.errors import NotFound, ValidationError
from memoryd.schema import tokens, users, workstreams
from memoryd.text import checked_identifier, checked_text

TOKEN_SCOPES = ("read", "write", "service")  # each implies the ones before it
PERMISSIONS = ("admin.memories",)
TOKEN_PREFIX = "mdt_"


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


_TOKEN = select(tokens).where(tokens.c.token_hash == bindparam("token_hash"))  # every request: built once
_WORKSTREAM = select(workstreams).where(workstreams.c.workstream_id == bindparam("workstream_id"))  # every turn: built once


class Directory:
    def __init__(self, database: Database) -> None:
        self.database = database

    def create_user(self, name: str) -> str:
        checked_text(name, "name")
        user_id = str(uuid.uuid4())
        with self.database.write() as conn:
            conn.execute(insert(users).values(user_id=user_id, name=name, created=utc_timestamp()))
        return user_id

    def create_token(
        self, user_id: str, scopes: list[str], permissions: list[str], value: str | None = None
    ) -> tuple[str, str]:
        """Return ``(token_id, clear token)``; ``value`` adopts a token chosen by the operator."""
        unknown = [scope for scope in scopes if scope not in TOKEN_SCOPES]
        if unknown or not scopes:
            raise ValidationError(f"scopes must be some of {', '.join(TOKEN_SCOPES)} (got {', '.join(scopes) or 'none'})")
        if bad := [permission for permission in permissions if permission not in PERMISSIONS]:
            raise ValidationError(f"unknown permission: {', '.join(bad)}; known: {', '.join(PERMISSIONS)}")
        value = value or TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = str(uuid.uuid4())
        with self.database.write() as conn:
            if conn.execute(select(users.c.user_id).where(users.c.user_id == user_id)).first() is None:
                raise NotFound(f"user not found: {user_id}")
            conn.execute(
                insert(tokens).values(
                    token_id=token_id,
                    user_id=user_id,
                    token_hash=hash_token(value),
                    scopes=",".join(scopes),
                    permissions=",".join(permissions),
                    created=utc_timestamp(),
                )
            )
        return token_id, value

    def authenticate(self, value: str) -> Principal | None:
        digest = hash_token(value)
        with self.database.read() as conn:
            row = conn.execute(_TOKEN, {"token_hash": digest}).first()
        if row is None or not hmac.compare_digest(row.token_hash, digest):
            return None
        return Principal(
            user_id=row.user_id,
            token_id=row.token_id,
            scopes=frozenset(filter(None, row.scopes.split(","))),
            permissions=frozenset(filter(None, row.permissions.split(","))),
        )

    def user_exists(self, user_id: str) -> bool:
        with self.database.read() as conn:
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

    def workstream(self, workstream_id: str) -> Workstream | None:
        with self.database.read() as conn:
            row = conn.execute(_WORKSTREAM, {"workstream_id": workstream_id}).first()
        if row is None:
            return None
        return Workstream(row.workstream_id, row.name, row.owner_user_id, row.project_id, bool(row.persona_memory))


def hash_token(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
