"""Agent sessions and their memory tool, and the workstreams they run in.

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
from api.responses import respond
from api.schemas import (
    CreateSessionRequest,
    CreateWorkstreamRequest,
    SessionSchema,
    WorkstreamChangeRequest,
    WorkstreamSchema,
    load,
)
from events.streams import live_project
from memoryd.app.tool import ToolResult
from memoryd.directory import Workstream
from memoryd.errors import Forbidden, NotFound, Unauthorized, ValidationError
from memoryd.sessions import Session

F = TypeVar("F", bound=Callable[..., Any])

blueprint = Blueprint("sessions", __name__)


def session_authorized(view: F) -> F:
    """Require the token of the session the path names (the memory tool's own token)."""

    @wraps(view)
    def guarded(session_id: str) -> Any:
        caller = _session_from_token()
        session = services().sessions.get(session_id)
        if session is None:
            raise NotFound("session not found")
        if caller.session_id != session.session_id:
            raise Forbidden("this token belongs to another session")
        g.session = session
        return view(session_id)

    return cast(F, guarded)


@blueprint.post("/v1/api/sessions")
@authorized("write", admin=True)
@idempotent()
def open_session() -> tuple[Response, int]:
    body = load(CreateSessionRequest(), json_object())
    workstream = services().directory.workstream(body["workstream_id"])  # the session checks that it exists
    project_id = workstream.project_id if workstream else None

    def answer(session: Session, token: str) -> dict[str, Any]:
        return SessionSchema().dump(_session_body(session) | {"token": token, "project_id": project_id})

    session, token = services().sessions.create(
        body["kind"], body["workstream_id"], body["user_id"] or "", body["parent_session_id"] or "",
        within=lambda conn, created, token: answered_within(conn, 201, answer(created, token)))
    return jsonify(answer(session, token)), 201


@blueprint.post("/v1/api/sessions/<session_id>/memory")
@session_authorized
@idempotent(lambda position: _tool_answer(ToolResult.of_event(services().store.event_at(position))))
def memory_tool(session_id: str) -> tuple[Response, int]:
    return _tool_answer(services().tool.run(g.session, json_object(checked=False), g.get("idempotency_claim")))


@blueprint.post("/v1/api/admin/workstreams")
@authorized("write", admin=True)
@idempotent()
def create_workstream() -> tuple[Response, int]:
    body = load(CreateWorkstreamRequest(), json_object())
    owner = body["owner"]
    if not services().directory.user_exists(owner):
        raise NotFound(f"user not found: {owner}")
    workstream_id = services().directory.create_workstream(
        owner, body["name"], _existing_project(body["project_id"]), _persona_memory(body["persona"], True),
        within=lambda conn, created: answered_within(conn, 201, WorkstreamSchema().dump(_workstream_body(created))))
    return respond(WorkstreamSchema(), _workstream_body(_found_workstream(workstream_id)), 201)


@blueprint.patch("/v1/api/admin/workstreams/<workstream_id>")
@authorized("write", admin=True)
def change_workstream(workstream_id: str) -> tuple[Response, int]:
    raw = json_object()
    body = load(WorkstreamChangeRequest(), raw)
    changes: dict[str, Any] = {}
    if "project_id" in raw:
        changes["project_id"] = _existing_project(body["project_id"])
    if "persona" in raw:
        changes["persona_memory"] = _persona_memory(body["persona"], True)
    return respond(WorkstreamSchema(), _workstream_body(services().directory.change_workstream(workstream_id, changes)))


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


def _existing_project(project_id: str | None) -> str | None:
    if project_id and live_project(services().store, project_id) is None:
        raise NotFound(f"project not found: {project_id}")
    return project_id or None


def _persona_memory(persona: Any, default: bool) -> bool:
    if persona is None:
        return default
    memory = persona.get("memory", default) if isinstance(persona, dict) else None
    if not isinstance(memory, bool):
        raise ValidationError("persona must be an object like {\"memory\": true}")
    return memory


def _session_body(session: Session) -> dict[str, Any]:
    return {"session_id": session.session_id, "kind": session.kind, "user_id": session.user_id or None,
            "workstream_id": session.workstream_id, "parent_session_id": session.parent_session_id or None}


def _found_workstream(workstream_id: str) -> Workstream:
    workstream = services().directory.workstream(workstream_id)
    if workstream is None:
        raise NotFound("Workstream not found")
    return workstream


def _workstream_body(workstream: Workstream) -> dict[str, Any]:
    return {"workstream_id": workstream.workstream_id, "name": workstream.name, "owner": workstream.owner_user_id,
            "project_id": workstream.project_id, "persona": {"memory": workstream.persona_memory}}
