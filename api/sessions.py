"""Agent sessions and their memory tool.

``POST /v1/api/sessions`` (a service token or an admin) opens a session and
returns its token; ``POST /v1/api/sessions/{id}/memory`` runs one memory tool
call with that token and answers the tool's result. HTTP errors are for the
transport only: a refused action is ``200 {"ok": false, ...}``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import Blueprint, Response, g, jsonify

from api.context import authorized, bearer_token, json_object, services
from api.idempotency import answered_within, idempotent
from api.schemas import (
    CreateSessionRequest,
    SessionSchema,
    load,
)
from memoryd.app.tool import ToolResult
from memoryd.errors import Forbidden, NotFound, Unauthorized
from memoryd.sessions import Session

F = TypeVar("F", bound=Callable[..., Any])

blueprint = Blueprint("sessions", __name__)


def session_authorized(view: F) -> F:
    """Require the token of the session the path names (the memory tool's own token)."""

    @wraps(view)
    def guarded(session_id: str, **path: str) -> Any:
        caller = _session_from_token()
        if caller.session_id != session_id:  # the common case, the token's own session, needs no second read
            if services().sessions.get(session_id) is None:
                raise NotFound("session not found")
            raise Forbidden("this token belongs to another session")
        g.session = caller
        return view(session_id, **path)

    return cast(F, guarded)


@blueprint.post("/v1/api/sessions")
@authorized("write", admin=True)
@idempotent()
def open_session() -> tuple[Response, int]:
    body = load(CreateSessionRequest(), json_object())
    workstream = services().directory.workstream(body["workstream_id"])  # the session checks that it exists
    project_id = workstream.project_id if workstream else None

    def answer(session: Session, token: str) -> dict[str, Any]:
        return cast(dict[str, Any], SessionSchema().dump(_session_body(session) | {"token": token,
                                                                                  "project_id": project_id}))

    session, token = services().sessions.create(
        body["kind"], body["workstream_id"], body["user_id"] or "", body["parent_session_id"] or "",
        within=lambda conn, created, token: answered_within(conn, 201, answer(created, token)))
    return jsonify(answer(session, token)), 201


@blueprint.get("/v1/api/session")
def current_session() -> tuple[Response, int]:
    """The session a session token acts as (what an MCP server or a hook holding only the token needs)."""
    session = _session_from_token()
    workstream = services().directory.workstream(session.workstream_id)
    body = _session_body(session) | {"project_id": workstream.project_id if workstream else None}
    return jsonify(SessionSchema().dump(body)), 200


@blueprint.post("/v1/api/sessions/<session_id>/memory")
@session_authorized
@idempotent(lambda position: _tool_answer(ToolResult.of_event(services().store.event_at(position))))
def memory_tool(session_id: str) -> tuple[Response, int]:
    return _tool_answer(services().tool.run(g.session, json_object(checked=False), g.get("idempotency_claim")))


def _tool_answer(result: ToolResult) -> tuple[Response, int]:
    return jsonify(result.to_dict()), 200


def _session_from_token() -> Session:
    token = bearer_token()
    session = services().sessions.by_token(token) if token else None
    if session is not None:
        return session
    if token and services().directory.authenticate(token) is not None:
        raise Forbidden("the memory tool takes the session's own token")
    raise Unauthorized("Unauthorized: missing or invalid token")


def _session_body(session: Session) -> dict[str, Any]:
    return {"session_id": session.session_id, "kind": session.kind, "user_id": session.user_id or None,
            "workstream_id": session.workstream_id, "parent_session_id": session.parent_session_id or None}
