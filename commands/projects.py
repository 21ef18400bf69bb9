"""Project commands: create, grant or change access, revoke, archive, reactivate.

Each handler reads the project's newest event (its whole state), decides and
appends one event carrying the project after the change. A command that
would change nothing appends nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from commands.handlers import Claim, Dependencies, append_decision
from events.streams import current_memory, current_project
from events.transaction import AppendTransaction
from events.types import (
    EventMetadata,
    MemoryDeleted,
    ProjectAccessGranted,
    ProjectAccessRevoked,
    ProjectArchived,
    ProjectCreated,
    ProjectDeleted,
    ProjectEvent,
    ProjectReactivated,
    RecordedEvent,
    memory_stream_id,
    project_stream_id,
)
from memoryd.kernel.domain import Namespace
from memoryd.kernel.errors import NotFound, ValidationError
from memoryd.kernel.projects import ACTIVE, ARCHIVED, Project, clean_access, clean_project_name


@dataclass(frozen=True)
class CreateProject:
    name: str
    owner_user_id: str


@dataclass(frozen=True)
class GrantProjectAccess:
    """Give a member read or write access, or change their level."""

    project_id: str
    user_id: str
    access: str


@dataclass(frozen=True)
class RevokeProjectAccess:
    project_id: str
    user_id: str


@dataclass(frozen=True)
class ArchiveProject:
    project_id: str


@dataclass(frozen=True)
class ReactivateProject:
    project_id: str


@dataclass(frozen=True)
class DeleteProject:
    project_id: str




@dataclass(frozen=True)
class ProjectOutcome:
    project: Project
    position: int | None  # None: nothing changed, nothing appended


def delete_project(tx: AppendTransaction, command: DeleteProject, metadata: EventMetadata, deps: Dependencies,
                   claim: Claim = None) -> ProjectOutcome:
    """Delete the project and, in the same append, every memory in its scope (each a memory.delete)."""
    stream = project_stream_id(command.project_id)
    last = deps.store.last_event(stream, tx)
    project = current_project(last)
    if project is None or last is None:
        raise NotFound(f"project not found: {command.project_id}")
    names = deps.locator.names_in(Namespace("project", command.project_id), tx.conn)
    streams = {name: memory_stream_id(name, "project", command.project_id) for name in names}
    latest = deps.store.last_events(set(streams.values()), tx) if streams else {}
    appends: list[tuple[str, int, Any]] = [(stream, last.stream_version + 1, ProjectDeleted(project))]
    for stream_id, newest in latest.items():
        memory = current_memory(newest)
        if memory is not None and newest is not None:
            appends.append((stream_id, newest.stream_version + 1, MemoryDeleted(memory)))
    return ProjectOutcome(project, deps.store.append_many(appends, metadata, claim, tx=tx)[-1])


def create_project(tx: AppendTransaction, command: CreateProject, metadata: EventMetadata, deps: Dependencies,
                   claim: Claim = None) -> ProjectOutcome:
    name = clean_project_name(command.name)
    _existing_user(tx, deps, command.owner_user_id)
    now = deps.clock()
    project = Project(deps.new_id(), name, command.owner_user_id, ACTIVE, (), now, now)
    event, position, _ = append_decision(tx, project_stream_id(project.project_id),
                                         lambda _: ProjectCreated(project), metadata, deps, claim)
    return ProjectOutcome(event.project, position)


def grant_project_access(tx: AppendTransaction, command: GrantProjectAccess, metadata: EventMetadata,
                         deps: Dependencies, claim: Claim = None) -> ProjectOutcome:
    access = clean_access(command.access)
    _existing_user(tx, deps, command.user_id)

    def change(project: Project) -> ProjectEvent | None:
        if command.user_id == project.owner_user_id:
            raise ValidationError("the project's owner always has write access")
        if dict(project.members).get(command.user_id) == access:
            return None
        return ProjectAccessGranted(project.with_member(command.user_id, access, deps.clock()), command.user_id)

    return _change(tx, command.project_id, change, metadata, deps, claim)


def revoke_project_access(tx: AppendTransaction, command: RevokeProjectAccess, metadata: EventMetadata,
                          deps: Dependencies, claim: Claim = None) -> ProjectOutcome:
    def change(project: Project) -> ProjectEvent | None:
        if command.user_id not in dict(project.members):
            raise NotFound(f"user {command.user_id} is not a member of project {project.project_id}")
        return ProjectAccessRevoked(project.with_member(command.user_id, None, deps.clock()), command.user_id)

    return _change(tx, command.project_id, change, metadata, deps, claim)


def archive_project(tx: AppendTransaction, command: ArchiveProject, metadata: EventMetadata, deps: Dependencies,
                    claim: Claim = None) -> ProjectOutcome:
    return _change(tx, command.project_id, lambda project: None if project.state == ARCHIVED else
                   ProjectArchived(replace(project, state=ARCHIVED, updated=deps.clock())), metadata, deps, claim)


def reactivate_project(tx: AppendTransaction, command: ReactivateProject, metadata: EventMetadata,
                       deps: Dependencies, claim: Claim = None) -> ProjectOutcome:
    return _change(tx, command.project_id, lambda project: None if project.state == ACTIVE else
                   ProjectReactivated(replace(project, state=ACTIVE, updated=deps.clock())), metadata, deps, claim)


def _existing_user(tx: AppendTransaction, deps: Dependencies, user_id: str) -> None:
    if not deps.users.user_exists(user_id, tx.conn):
        raise NotFound(f"user not found: {user_id}")


class _Unchanged(Exception):
    def __init__(self, project: Project) -> None:
        self.project = project


def _change(tx: AppendTransaction, project_id: str, change: Callable[[Project], ProjectEvent | None], metadata: EventMetadata,
            deps: Dependencies, claim: Claim) -> ProjectOutcome:
    def decide(last: RecordedEvent | None) -> ProjectEvent:
        project = current_project(last)
        if project is None:
            raise NotFound(f"project not found: {project_id}")
        event = change(project)
        if event is None:
            raise _Unchanged(project)
        return event

    try:
        event, position, _ = append_decision(tx, project_stream_id(project_id), decide, metadata, deps, claim)
    except _Unchanged as unchanged:
        return ProjectOutcome(unchanged.project, None)
    return ProjectOutcome(event.project, position)

