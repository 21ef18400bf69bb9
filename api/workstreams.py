"""Workstreams for administrators and service tokens: ``/v1/api/admin/workstreams``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from api.answer_schemas import WorkstreamSchema
from api.context import authorized, json_object, services
from api.idempotency import answered_within, idempotent
from api.responses import respond
from api.schemas import CreateWorkstreamRequest, WorkstreamChangeRequest, load
from memoryd.kernel.errors import NotFound, ValidationError
from memoryd.storage.directory import Workstream

blueprint = Blueprint("workstreams", __name__)


@blueprint.post("/v1/api/admin/workstreams")
@authorized("write", admin=True)
@idempotent()
def create_workstream() -> tuple[Response, int]:
    body = load(CreateWorkstreamRequest(), json_object())
    workstream_id = services().workstreams.create(
        body["owner"], body["name"], body["project_id"], _persona_memory(body["persona"], True),
        within=lambda conn, created: answered_within(conn, 201, WorkstreamSchema().dump(_workstream_body(created))))
    return respond(WorkstreamSchema(), _workstream_body(_found_workstream(workstream_id)), 201)


@blueprint.patch("/v1/api/admin/workstreams/<workstream_id>")
@authorized("write", admin=True)
def change_workstream(workstream_id: str) -> tuple[Response, int]:
    raw = json_object()
    body = load(WorkstreamChangeRequest(), raw)
    changes: dict[str, Any] = {}
    if "project_id" in raw:
        changes["project_id"] = body["project_id"]
    if "persona" in raw:
        changes["persona_memory"] = _persona_memory(body["persona"], True)
    return respond(WorkstreamSchema(), _workstream_body(services().workstreams.change(workstream_id, changes)))


def _persona_memory(persona: Any, default: bool) -> bool:
    if persona is None:
        return default
    memory = persona.get("memory", default) if isinstance(persona, dict) else None
    if not isinstance(memory, bool):
        raise ValidationError("persona must be an object like {\"memory\": true}")
    return memory


def _found_workstream(workstream_id: str) -> Workstream:
    workstream = services().directory.workstream(workstream_id)
    if workstream is None:
        raise NotFound("Workstream not found")
    return workstream


def _workstream_body(workstream: Workstream) -> dict[str, Any]:
    return {"workstream_id": workstream.workstream_id, "name": workstream.name, "owner": workstream.owner_user_id,
            "project_id": workstream.project_id, "persona": {"memory": workstream.persona_memory}}
