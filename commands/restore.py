"""Restoring a version of a memory: a compensating write, never an edit of the log.

The version's memory (as the projections applied it, so a superseded event's replacement) comes back
as a new event on the memory's stream: a ``memory.update`` of the memory if it is live, or a
``memory.save`` under its own id if it was deleted and its name is free. It is audited like any save
and shows in the memory's history. A name that now holds another memory (saved again after the
delete) is a conflict: restore would overwrite a memory that is not this one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commands.handlers import Claim, Dependencies, Outcome, append_decision
from events.streams import current_memory, stream_of
from events.transaction import AppendTransaction
from events.types import EventMetadata, MemoryDeleted, MemoryEvent, MemorySaved, MemoryUpdated, RecordedEvent
from memoryd.kernel.domain import Memory
from memoryd.kernel.errors import Conflict, NotFound, ValidationError


@dataclass(frozen=True)
class RestoreMemory:
    """Bring back version ``version`` of the memory ``memory_id`` (administrators)."""

    memory_id: str
    version: int


def restore_memory(tx: AppendTransaction, command: RestoreMemory, metadata: EventMetadata, deps: Dependencies,
                   claim: Claim = None) -> Outcome:
    stream_id = stream_of(deps.store, deps.locator, command.memory_id, tx)
    if stream_id is None:
        raise NotFound("Memory not found")
    wanted = _version(tx, deps, stream_id, command)

    def decide(last: RecordedEvent | None) -> MemoryEvent:
        current = current_memory(last)
        now = deps.clock()
        if current is None:  # deleted (and the name is free): the memory comes back under its own id
            return MemorySaved(replace(wanted, updated=now))
        if current.memory_id != command.memory_id:
            raise Conflict(f"the name '{wanted.name}' now holds another memory ({current.memory_id}); "
                           "delete it first, or save the old content under another name")
        return MemoryUpdated(replace(current, description=wanted.description, content=wanted.content,
                                     type=wanted.type, updated=now))

    event, position, version = append_decision(tx, stream_id, decide, metadata, deps, claim)
    return Outcome(event.memory, created=isinstance(event, MemorySaved), position=position, version=version)


def _version(tx: AppendTransaction, deps: Dependencies, stream_id: str, command: RestoreMemory) -> Memory:
    """The memory as version ``command.version`` left it, as the projections applied it."""
    found = [event for event in deps.store.stream(stream_id, tx) if event.stream_version == command.version]
    if not found:
        raise NotFound(f"the memory has no version {command.version}")
    applied = deps.store.events_at([found[0].position], tx)[found[0].position].to_domain()
    if not isinstance(applied, MemoryEvent) or applied.memory.memory_id != command.memory_id:
        raise NotFound(f"version {command.version} of the memory's name is another memory's")
    if isinstance(applied, MemoryDeleted):
        raise ValidationError(f"version {command.version} is the memory's delete; restore a version before it")
    return applied.memory
