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

from flask import Blueprint, Response, g, jsonify, request

from api.answer_schemas import SessionSchema
from api.context import admin_caller, authorized, bearer_token, event_metadata, json_object, refused, services
from api.idempotency import answered_within, idempotent
from api.identities import session_body
from api.identity_schemas import ClosedSessionsSchema, ReasonRequest
from api.responses import respond
from api.schemas import CreateSessionRequest, load
from events.types import EventMetadata
from memoryd.app.tool import ToolResult
from memoryd.kernel.errors import Forbidden, NotFound, Refused
from memoryd.storage.directory import INVALID
from memoryd.storage.sessions import TOKEN_PREFIX as SESSION_TOKEN
from memoryd.storage.sessions import Session, SessionIdle

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

    session, token = services().identities.open_session(
        body["kind"], body["workstream_id"], body["user_id"] or "", body["parent_session_id"] or "",
        event_metadata("admin"), within=lambda conn, created, token: answered_within(conn, 201, answer(created, token)))
    return jsonify(answer(session, token)), 201


@blueprint.get("/v1/api/session")
def current_session() -> tuple[Response, int]:
    """The session a session token acts as (what an MCP server or a hook holding only the token needs)."""
    session = _session_from_token()
    workstream = services().directory.workstream(session.workstream_id)
    body = _session_body(session) | {"project_id": workstream.project_id if workstream else None}
    return jsonify(SessionSchema().dump(body)), 200


@blueprint.delete("/v1/api/sessions/<session_id>")
def close_session(session_id: str) -> tuple[Response, int]:
    """Close a session (and a coordinator's children): with its own token, or an admin's. Its token is
    refused from then on; its receipts stay readable by admins."""
    token = bearer_token()
    own = _session_from_token() if token.startswith(SESSION_TOKEN) else None
    if own is not None and own.session_id != session_id:
        raise Forbidden("this token belongs to another session")
    if own is not None:
        metadata = EventMetadata(actor_user_id=own.user_id, surface="rest", client_ip=request.remote_addr or "",
                                 request_id=g.request_id, session_id=own.session_id, workstream_id=own.workstream_id)
    else:
        g.principal = admin_caller()
        metadata = event_metadata("admin")
    reason = load(ReasonRequest(), json_object() if request.get_data(cache=True).strip() else {})["reason"]
    closed = services().identities.close_session(session_id, metadata, reason)
    return respond(ClosedSessionsSchema(), {"closed": [session_body(session) for session in closed]})


@blueprint.post("/v1/api/sessions/<session_id>/memory")
@session_authorized
@idempotent(lambda position: _tool_answer(ToolResult.of_event(services().store.event_at(position))))
def memory_tool(session_id: str) -> tuple[Response, int]:
    return _tool_answer(services().tool.run(g.session, json_object(checked=False), g.get("idempotency_claim")))


def _tool_answer(result: ToolResult) -> tuple[Response, int]:
    return jsonify(result.to_dict()), 200


def _session_from_token() -> Session:
    """The open session the bearer token acts as; a closed (or idle: closed now, and audited) session or a
    deactivated user is a 401 naming why."""
    token = bearer_token()
    if not token:
        refused("missing")
    try:
        return services().sessions.verify(token)
    except SessionIdle as idle:
        services().identities.close_idle(EventMetadata(actor_user_id="memoryd", surface="rest",
                                                       request_id=g.request_id), [idle.session_id])
        refused(idle.reason)
    except Refused as refusal:
        if refusal.reason == INVALID and services().directory.authenticate(token) is not None:
            raise Forbidden("the memory tool takes the session's own token") from None
        refused(refusal.reason)


def _session_body(session: Session) -> dict[str, Any]:
    return {"session_id": session.session_id, "kind": session.kind, "user_id": session.user_id or None,
            "workstream_id": session.workstream_id, "parent_session_id": session.parent_session_id or None}
