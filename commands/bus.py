"""The command bus: one table from each command to its handler; then tell the projections."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, overload

from commands.handlers import (
    Dependencies,
    Outcome,
    delete_memory,
    delete_memory_by_id,
    save_many,
    save_memory,
)
from commands.model import DeleteMemory, DeleteMemoryById, SaveMemory
from commands.projects import (
    ArchiveProject,
    CreateProject,
    DeleteProject,
    GrantProjectAccess,
    ProjectOutcome,
    ReactivateProject,
    RevokeProjectAccess,
    archive_project,
    create_project,
    delete_project,
    grant_project_access,
    reactivate_project,
    revoke_project_access,
)
from commands.supersede import SupersedeEvent, SupersedeOutcome, supersede_event
from events.idempotency import IdempotencyClaim, IdempotencyKeys
from events.types import EventMetadata

HANDLERS: dict[type, Callable[..., Any]] = {
    SaveMemory: save_memory,
    DeleteMemory: delete_memory,
    DeleteMemoryById: delete_memory_by_id,
    CreateProject: create_project,
    GrantProjectAccess: grant_project_access,
    RevokeProjectAccess: revoke_project_access,
    ArchiveProject: archive_project,
    ReactivateProject: reactivate_project,
    DeleteProject: delete_project,
    SupersedeEvent: supersede_event,
}


MemoryCommand = SaveMemory | DeleteMemory | DeleteMemoryById
ProjectCommand = (CreateProject | GrantProjectAccess | RevokeProjectAccess | ArchiveProject | ReactivateProject
                  | DeleteProject)
AnyCommand = MemoryCommand | ProjectCommand | SupersedeEvent
AnyOutcome = Outcome | ProjectOutcome | SupersedeOutcome


class Dispatcher(Protocol):
    """Gets projections to catch up after an append (in-process, or via workers)."""

    def appended(self, position: int) -> None: ...


class CommandBus:
    def __init__(self, deps: Dependencies, dispatcher: Dispatcher, keys: IdempotencyKeys) -> None:
        self.deps = deps
        self.dispatcher = dispatcher
        self.keys = keys

    @overload
    def handle(self, command: MemoryCommand, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> Outcome: ...

    @overload
    def handle(self, command: ProjectCommand, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> ProjectOutcome: ...

    @overload
    def handle(self, command: SupersedeEvent, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> SupersedeOutcome: ...

    def handle(self, command: AnyCommand, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> AnyOutcome:
        """Run the command; with ``claim``, its key is taken atomically with the append."""
        take_key = (lambda conn, position: self.keys.claim(conn, claim, position)) if claim else None
        outcome: AnyOutcome = HANDLERS[type(command)](command, metadata, self.deps, take_key)
        if outcome.position is not None:
            self.dispatcher.appended(outcome.position)
        return outcome

    def handle_many(self, commands: list[SaveMemory], metadata: EventMetadata) -> list[Outcome]:
        """Save a batch in one transaction (bulk imports), then tell the projections once."""
        outcomes = save_many(commands, metadata, self.deps)
        if outcomes:
            self.dispatcher.appended(outcomes[-1].position)
        return outcomes
