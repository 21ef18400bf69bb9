"""Projects for administrators and service tokens: ``/v1/api/admin/projects``.

Every change is a command that appends a project event, so the audit trail
shows who granted, changed or revoked access and who archived what.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from api.answer_schemas import DeletedProjectSchema, ProjectSchema
from api.context import authorized, json_object, services, writing
from api.idempotency import idempotent
from api.responses import POSITION_HEADER, respond
from api.schemas import CreateProjectRequest, GrantAccessRequest, load
from commands.projects import (
    ArchiveProject,
    CreateProject,
    DeleteProject,
    GrantProjectAccess,
    ProjectOutcome,
    ReactivateProject,
    RevokeProjectAccess,
)
from events.types import MemoryEvent, ProjectEvent, project_stream_id
from memoryd.kernel.errors import NotFound, StorageError
from projections.project_tables import get_project

blueprint = Blueprint("projects", __name__, url_prefix="/v1/api/admin/projects")


@blueprint.post("")
@authorized("write", admin=True)
@idempotent(lambda position: _answer(_outcome_at(position), 201))
def create() -> tuple[Response, int]:
    body = load(CreateProjectRequest(), json_object())
    return _answer(services().bus.handle(CreateProject(body["name"], body["owner"]), *writing("admin")), 201)


@blueprint.get("/<project_id>")
@authorized("read", admin=True)
def get(project_id: str) -> tuple[Response, int]:
    with services().database.read() as conn:
        project = get_project(conn, project_id)
    if project is None:
        raise NotFound(f"project not found: {project_id}")
    return respond(ProjectSchema(), _body(project.to_dict()))


@blueprint.put("/<project_id>/members/<user_id>")
@authorized("write", admin=True)
def grant(project_id: str, user_id: str) -> tuple[Response, int]:
    access = load(GrantAccessRequest(), json_object())["access"]
    return _answer(services().bus.handle(GrantProjectAccess(project_id, user_id, access), *writing("admin")))


@blueprint.delete("/<project_id>/members/<user_id>")
@authorized("write", admin=True)
@idempotent(lambda position: _answer(_outcome_at(position)))
def revoke(project_id: str, user_id: str) -> tuple[Response, int]:
    return _answer(services().bus.handle(RevokeProjectAccess(project_id, user_id), *writing("admin")))


@blueprint.delete("/<project_id>")
@authorized("write", admin=True)
@idempotent(lambda position: _deleted(_outcome_at(position)))
def delete(project_id: str) -> tuple[Response, int]:
    """Delete the project and every memory in its scope (each a memory.delete event)."""
    return _deleted(services().bus.handle(DeleteProject(project_id), *writing("admin")))


@blueprint.post("/<project_id>/archive")
@authorized("write", admin=True)
@idempotent(lambda position: _answer(_outcome_at(position)))
def archive(project_id: str) -> tuple[Response, int]:
    return _answer(services().bus.handle(ArchiveProject(project_id), *writing("admin")))


@blueprint.post("/<project_id>/reactivate")
@authorized("write", admin=True)
@idempotent(lambda position: _answer(_outcome_at(position)))
def reactivate(project_id: str) -> tuple[Response, int]:
    return _answer(services().bus.handle(ReactivateProject(project_id), *writing("admin")))


def _body(project: dict[str, Any]) -> dict[str, Any]:
    members = [{"user_id": user_id, "access": access} for user_id, access in sorted(project.pop("members").items())]
    return project | {"owner": project.pop("owner_user_id"), "members": members}


def _outcome_at(position: int) -> ProjectOutcome:
    """A project write's outcome from its event (an idempotent replay whose answer was lost).

    A project delete's last event may be one of the memory deletes appended with it.
    """
    recorded = services().store.event_at(position)
    event = recorded.to_domain() if recorded is not None else None
    if isinstance(event, MemoryEvent):
        deleted = services().store.last_event(project_stream_id(event.memory.scope_id))
        event = deleted.to_domain() if deleted is not None else None
    if not isinstance(event, ProjectEvent):
        raise StorageError(f"the event at position {position} is not a project event")
    return ProjectOutcome(event.project, position)


def _deleted(outcome: ProjectOutcome) -> tuple[Response, int]:
    response, status = respond(DeletedProjectSchema(), {"status": "ok", "project_id": outcome.project.project_id})
    response.headers[POSITION_HEADER] = str(outcome.position)
    return response, status


def _answer(outcome: ProjectOutcome, status: int = 200) -> tuple[Response, int]:
    response, status = respond(ProjectSchema(), _body(outcome.project.to_dict()), status)
    if outcome.position is not None:
        response.headers[POSITION_HEADER] = str(outcome.position)
    return response, status
