"""Users, tokens and sessions for administrators, a caller's own token, and the project and workstream lists.

``/v1/api/admin/users``, ``/v1/api/admin/tokens``, ``/v1/api/admin/sessions``, ``/v1/api/admin/projects``
(GET) and ``/v1/api/admin/workstreams`` (GET); ``GET /v1/api/token``. Every change is audited
(``memoryd/app/identities.py``); lists page by id like the audit list (``after``, ``limit``, ``next_after``).
A token's secret is in exactly one answer: the one that creates it.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from api.context import authorized, caller, event_metadata, json_object, services
from api.identity_schemas import (
    CreatedTokenSchema,
    CreateTokenRequest,
    CreateUserRequest,
    ProjectPageSchema,
    ProjectsQuery,
    ReasonRequest,
    SessionPageSchema,
    SessionsQuery,
    TokenPageSchema,
    TokenSchema,
    TokensQuery,
    UserPageSchema,
    UserSchema,
    UsersQuery,
    WorkstreamPageSchema,
    WorkstreamsQuery,
)
from api.responses import respond
from api.schemas import load
from memoryd.kernel.domain import utc_timestamp
from memoryd.kernel.errors import Forbidden, NotFound
from memoryd.storage.directory import PERMISSIONS, TOKEN_SCOPES, Principal, Workstream
from memoryd.storage.listings import Page, list_sessions, list_tokens, list_users, list_workstreams
from memoryd.storage.sessions import Session
from projections.project_tables import list_projects

blueprint = Blueprint("identities", __name__)
ADMIN = "/v1/api/admin"


@blueprint.get(f"{ADMIN}/users")
@authorized("read", admin=True)
def users() -> tuple[Response, int]:
    args = load(UsersQuery(), request.args)
    with services().database.read() as conn:
        found = list_users(conn, _page(args), args["state"], args["name"])
    return respond(UserPageSchema(), {"users": [user.to_dict() for user in found],
                                      "next_after": found[-1].user_id if found else args["after"]})


@blueprint.post(f"{ADMIN}/users")
@authorized("write", admin=True)
def create_user() -> tuple[Response, int]:
    body = load(CreateUserRequest(), json_object())
    return respond(UserSchema(), services().identities.create_user(body["name"], event_metadata("admin")).to_dict(),
                   201)


@blueprint.get(f"{ADMIN}/users/<user_id>")
@authorized("read", admin=True)
def user(user_id: str) -> tuple[Response, int]:
    found = services().directory.user(user_id)
    if found is None:
        raise NotFound(f"user not found: {user_id}")
    return respond(UserSchema(), found.to_dict())


@blueprint.post(f"{ADMIN}/users/<user_id>/deactivate")
@authorized("write", admin=True)
def deactivate_user(user_id: str) -> tuple[Response, int]:
    return _set_active(user_id, False)


@blueprint.post(f"{ADMIN}/users/<user_id>/reactivate")
@authorized("write", admin=True)
def reactivate_user(user_id: str) -> tuple[Response, int]:
    return _set_active(user_id, True)


def _set_active(user_id: str, active: bool) -> tuple[Response, int]:
    reason = load(ReasonRequest(), _optional_body())["reason"]
    changed = services().identities.set_user_active(user_id, active, event_metadata("admin"), reason)
    return respond(UserSchema(), changed.to_dict())


@blueprint.get(f"{ADMIN}/tokens")
@authorized("read", admin=True)
def tokens() -> tuple[Response, int]:
    args = load(TokensQuery(), request.args)
    with services().database.read() as conn:
        found = list_tokens(conn, _page(args), args["user_id"], args["state"], utc_timestamp())
    return respond(TokenPageSchema(), {"tokens": [token.to_dict() for token in found],
                                       "next_after": found[-1].token_id if found else args["after"]})


@blueprint.post(f"{ADMIN}/tokens")
@authorized("write", admin=True)
def create_token() -> tuple[Response, int]:
    body = load(CreateTokenRequest(), json_object())
    permissions = list(dict.fromkeys([*body["permissions"], *([body["permission"]] if body["permission"] else [])]))
    _may_grant(caller(), body["scopes"], permissions)
    token, clear = services().identities.create_token(
        body["user_id"], body["scopes"], permissions, event_metadata("admin"), name=body["name"],
        expires_at=body["expires_at"], expires_in_days=body["expires_in_days"])
    return respond(CreatedTokenSchema(), token.to_dict() | {"token": clear}, 201)


@blueprint.delete(f"{ADMIN}/tokens/<token_id>")
@authorized("write", admin=True)
def revoke_token(token_id: str) -> tuple[Response, int]:
    reason = load(ReasonRequest(), _optional_body())["reason"]
    return respond(TokenSchema(), services().identities.revoke_token(token_id, event_metadata("admin"), reason)
                   .to_dict())


@blueprint.get("/v1/api/token")
@authorized("read")
def own_token() -> tuple[Response, int]:
    """The caller's own token: what a list shows of it (never its secret)."""
    found = services().directory.token(caller().token_id)
    if found is None:  # revoked and deleted in between: never happens, tokens are not deleted
        raise NotFound("token not found")
    return respond(TokenSchema(), found.to_dict())


@blueprint.get(f"{ADMIN}/sessions")
@authorized("read", admin=True)
def sessions() -> tuple[Response, int]:
    """Sessions (idle ones are closed first, so an open one listed here is usable)."""
    args = load(SessionsQuery(), request.args)
    services().identities.close_idle(event_metadata("admin"))
    with services().database.read() as conn:
        found = list_sessions(conn, _page(args), args["user_id"], args["workstream_id"], args["state"])
    return respond(SessionPageSchema(), {"sessions": [session_body(session) for session in found],
                                         "next_after": found[-1].session_id if found else args["after"]})


@blueprint.get(f"{ADMIN}/projects")
@authorized("read", admin=True)
def projects() -> tuple[Response, int]:
    args = load(ProjectsQuery(), request.args)
    with services().database.read() as conn:
        found = list_projects(conn, args["after"], args["limit"], args["owner"], args["member"], args["state"])
    return respond(ProjectPageSchema(), {"projects": [_project(project.to_dict()) for project in found],
                                         "next_after": found[-1].project_id if found else args["after"]})


@blueprint.get(f"{ADMIN}/workstreams")
@authorized("read", admin=True)
def workstreams() -> tuple[Response, int]:
    args = load(WorkstreamsQuery(), request.args)
    with services().database.read() as conn:
        found = list_workstreams(conn, _page(args), args["owner"], args["project_id"], args["member"])
    return respond(WorkstreamPageSchema(), {"workstreams": [_workstream(workstream) for workstream in found],
                                            "next_after": found[-1].workstream_id if found else args["after"]})


def session_body(session: Session) -> dict[str, Any]:
    return {"session_id": session.session_id, "kind": session.kind, "user_id": session.user_id or None,
            "workstream_id": session.workstream_id, "parent_session_id": session.parent_session_id or None,
            "created": session.created, "state": "open" if session.closed_at is None else "closed",
            "closed_at": session.closed_at, "last_active_at": session.last_active_at}


def _may_grant(principal: Principal, scopes: list[str], permissions: list[str]) -> None:
    """A caller without ``service`` mints no token stronger than its own."""
    if principal.has_scope("service"):
        return
    if stronger := [scope for scope in scopes if scope in TOKEN_SCOPES and not principal.has_scope(scope)]:
        raise Forbidden(f"Forbidden: your token cannot grant the scope {stronger[0]!r} it does not hold")
    if stronger := [permission for permission in permissions if permission in PERMISSIONS
                    and not principal.has_permission(permission)]:
        raise Forbidden(f"Forbidden: your token cannot grant the permission {stronger[0]!r} it does not hold")


def _optional_body() -> dict[str, Any]:
    """A JSON object, or nothing at all (``{}``); a ``reason`` may also come in the query string."""
    body = json_object() if request.get_data(cache=True).strip() else {}
    return body | ({"reason": request.args["reason"]} if "reason" in request.args and "reason" not in body else {})


def _page(args: dict[str, Any]) -> Page:
    return Page(args["after"], args["limit"])


def _project(project: dict[str, Any]) -> dict[str, Any]:
    members = [{"user_id": user_id, "access": access} for user_id, access in sorted(project.pop("members").items())]
    return project | {"owner": project.pop("owner_user_id"), "members": members}


def _workstream(workstream: Workstream) -> dict[str, Any]:
    return {"workstream_id": workstream.workstream_id, "name": workstream.name, "owner": workstream.owner_user_id,
            "project_id": workstream.project_id, "persona": {"memory": workstream.persona_memory}}
