"""Lists of users, tokens, sessions and workstreams for administrators, paged by id.

Each list is in id order and pages like the audit list: ``after`` (the previous page's ``next_after``, ""
for the first page) and ``limit``. Tokens are listed as ``TokenRecord``s: never their value nor hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, select

from memoryd.storage.directory import TokenRecord, UserRecord, Workstream, token_record
from memoryd.storage.schema import project_members, sessions, tokens, users, workstreams
from memoryd.storage.sessions import Session


@dataclass(frozen=True)
class Page:
    after: str = ""
    limit: int = 100


def _paged(query: Select[Any], key: Any, page: Page) -> Select[Any]:
    if page.after:
        query = query.where(key > page.after)
    return query.order_by(key).limit(page.limit)


def list_users(conn: Connection, page: Page, state: str = "", name: str = "") -> list[UserRecord]:
    """``state``: "active", "deactivated" or "" (both)."""
    query = select(users)
    if state == "active":
        query = query.where(users.c.deactivated_at.is_(None))
    elif state == "deactivated":
        query = query.where(users.c.deactivated_at.is_not(None))
    if name:
        query = query.where(users.c.name == name)
    return [UserRecord(row.user_id, row.name, row.created, row.deactivated_at)
            for row in conn.execute(_paged(query, users.c.user_id, page))]


def list_tokens(conn: Connection, page: Page, user_id: str = "", state: str = "", now: str = "") -> list[TokenRecord]:
    """``state``: "active" (neither revoked nor expired at ``now``), "revoked", "expired" or "" (all)."""
    query = select(tokens)
    if user_id:
        query = query.where(tokens.c.user_id == user_id)
    if state == "active":
        query = query.where(tokens.c.revoked_at.is_(None),
                            tokens.c.expires_at.is_(None) | (tokens.c.expires_at > now))
    elif state == "revoked":
        query = query.where(tokens.c.revoked_at.is_not(None))
    elif state == "expired":
        query = query.where(tokens.c.revoked_at.is_(None), tokens.c.expires_at <= now)
    return [token_record(row) for row in conn.execute(_paged(query, tokens.c.token_id, page))]


def list_sessions(conn: Connection, page: Page, user_id: str = "", workstream_id: str = "",
                  state: str = "") -> list[Session]:
    """``state``: "open", "closed" or "" (both)."""
    query = select(sessions)
    if user_id:
        query = query.where(sessions.c.user_id == user_id)
    if workstream_id:
        query = query.where(sessions.c.workstream_id == workstream_id)
    if state == "open":
        query = query.where(sessions.c.closed_at.is_(None))
    elif state == "closed":
        query = query.where(sessions.c.closed_at.is_not(None))
    return [Session(row.session_id, row.kind, row.user_id or "", row.workstream_id, row.parent_session_id or "",
                    row.created, row.closed_at, row.last_active_at)
            for row in conn.execute(_paged(query, sessions.c.session_id, page))]


def list_workstreams(conn: Connection, page: Page, owner: str = "", project_id: str = "",
                     member: str = "") -> list[Workstream]:
    """``member``: the workstreams attached to a project this user is a member of (from the projects read
    model)."""
    query = select(workstreams)
    if owner:
        query = query.where(workstreams.c.owner_user_id == owner)
    if project_id:
        query = query.where(workstreams.c.project_id == project_id)
    if member:
        query = query.where(workstreams.c.project_id.in_(
            select(project_members.c.project_id).where(project_members.c.user_id == member)))
    return [Workstream(row.workstream_id, row.name, row.owner_user_id, row.project_id, bool(row.persona_memory))
            for row in conn.execute(_paged(query, workstreams.c.workstream_id, page))]
