"""Command handlers: load the stream, decide, append with the expected version.

A memory's stream is its identity ``(name, scope, scope_id)``. Its newest
event holds the whole current state (or says it was deleted), so loading is
one indexed read however long the history. When another writer appended
first, the append raises ``ConcurrencyConflict``; the bus runs the handler
again in a new transaction, a bounded number of times.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from sqlalchemy import Connection

from commands.model import DeleteMemory, DeleteMemoryById, SaveMemory
from events.store import EventStore
from events.streams import MemoryLocator, current_memory
from events.transaction import AppendTransaction
from events.types import (
    DomainEvent,
    EventMetadata,
    MemoryDeleted,
    MemoryEvent,
    MemorySaved,
    MemoryUpdated,
    RecordedEvent,
    memory_stream_id,
)
from memoryd.kernel.domain import DEFAULT_TYPE, Memory, utc_timestamp
from memoryd.kernel.errors import MemorydError, NotFound, VersionMismatch

Claim = Callable[[Connection, int], None] | None  # runs in the append's transaction (idempotency keys)


class Users(Protocol):
    """Who exists (the directory answers): project owners and members must."""

    def user_exists(self, user_id: str, within: Connection | None = None) -> bool: ...


@dataclass(frozen=True)
class Dependencies:
    store: EventStore
    locator: MemoryLocator
    users: Users
    clock: Callable[[], str] = utc_timestamp
    new_id: Callable[[], str] = lambda: str(uuid.uuid4())


@dataclass(frozen=True)
class Outcome:
    """What a command did: the memory written or removed, and the log position."""

    memory: Memory
    created: bool
    position: int
    version: int  # the stream's version after this write: the memory's ``ETag``
    projected: bool = False  # the projections reached it in its own transaction (the bus says)


def save_memory(tx: AppendTransaction, command: SaveMemory, metadata: EventMetadata, deps: Dependencies,
                claim: Claim = None) -> Outcome:
    return _decide_and_append(tx, command.stream_id, lambda current: _decide_save(command, current, deps), metadata,
                              deps, claim, command.expected_version)


def _decide_save(command: SaveMemory, current: Memory | None, deps: Dependencies) -> MemoryEvent:
    now = deps.clock()
    if current is None:
        ns = command.namespace
        memory = Memory(deps.new_id(), command.name, command.description, command.type or DEFAULT_TYPE,
                        ns.scope, ns.scope_id, command.content, now, now)
        return MemorySaved(memory)
    changed = replace(current, description=command.description, content=command.content,
                      type=command.type or current.type, updated=now)
    return MemoryUpdated(changed)


def delete_memory(tx: AppendTransaction, command: DeleteMemory, metadata: EventMetadata, deps: Dependencies,
                  claim: Claim = None) -> Outcome:
    def decide(current: Memory | None) -> MemoryEvent:
        if current is None:
            raise NotFound(f"Memory '{command.name}' not found")
        return MemoryDeleted(current)

    return _decide_and_append(tx, command.stream_id, decide, metadata, deps, claim, command.expected_version)


def delete_memory_by_id(
    tx: AppendTransaction, command: DeleteMemoryById, metadata: EventMetadata, deps: Dependencies, claim: Claim = None
) -> Outcome:
    identity = deps.locator.identity_of(command.memory_id, tx.conn)
    if identity is None:
        raise NotFound("Memory not found")
    name, namespace = identity

    def decide(current: Memory | None) -> MemoryEvent:
        if current is None or current.memory_id != command.memory_id:
            raise NotFound("Memory not found")
        return MemoryDeleted(current)

    stream_id = memory_stream_id(name, namespace.scope, namespace.scope_id)
    return _decide_and_append(tx, stream_id, decide, metadata, deps, claim, command.expected_version)


def _decide_and_append(
    tx: AppendTransaction,
    stream_id: str,
    decide: Callable[[Memory | None], MemoryEvent],
    metadata: EventMetadata,
    deps: Dependencies,
    claim: Claim,
    expected_version: int | None,
) -> Outcome:
    """Decide on the stream's state; with ``expected_version``, only if the memory is there at that version."""

    def checked(last: RecordedEvent | None) -> MemoryEvent:
        current = current_memory(last)
        if expected_version is not None and current is None:  # no memory is at any version: never a create
            raise VersionMismatch(expected_version, None)
        event = decide(current)
        version = last.stream_version if last else 0
        if expected_version is not None and version != expected_version:
            raise VersionMismatch(expected_version, version)
        return event

    event, position, version = append_decision(tx, stream_id, checked, metadata, deps, claim)
    return Outcome(event.memory, created=isinstance(event, MemorySaved), position=position, version=version)


E = TypeVar("E", bound=DomainEvent)


def append_decision(
    tx: AppendTransaction,
    stream_id: str,
    decide: Callable[[RecordedEvent | None], E],
    metadata: EventMetadata,
    deps: Dependencies,
    claim: Claim = None,
) -> tuple[E, int, int]:
    """Load the stream's newest event, decide, append at that version (a race raises ``ConcurrencyConflict``):
    the event, its position and the stream's new version."""
    last = deps.store.last_event(stream_id, tx)
    event = decide(last)
    version = last.stream_version if last else 0
    return event, deps.store.append(stream_id, version, [event], metadata, claim, tx=tx), version + 1


def save_many(tx: AppendTransaction, commands: list[SaveMemory], metadata: EventMetadata, deps: Dependencies
              ) -> list[Outcome]:
    """Save a batch (bulk imports): decided together, appended together, all or none.

    A memory saved twice in one batch is created, then updated.
    """
    streams = [command.stream_id for command in commands]
    latest = deps.store.last_events(set(streams), tx)
    versions = {stream: (event.stream_version if event else 0) for stream, event in latest.items()}
    state = {stream: current_memory(event) for stream, event in latest.items()}
    appends, created = [], []
    for command, stream in zip(commands, streams):
        event = _decide_save(command, state[stream], deps)
        state[stream] = event.memory
        versions[stream] += 1
        appends.append((stream, versions[stream], event))
        created.append(isinstance(event, MemorySaved))
    positions = deps.store.append_many(appends, metadata, tx=tx)
    return [Outcome(event.memory, new, position, version)
            for (_, version, event), new, position in zip(appends, created, positions)]


Write = SaveMemory | DeleteMemory


def write_many(tx: AppendTransaction, commands: list[Write], metadata: EventMetadata, deps: Dependencies,
               claim: Claim = None) -> list[Outcome | None]:
    """Save and delete a batch: each decided on the state the writes before it left, appended together, all or
    none. None for a delete that found nothing and was told that is fine (``missing_ok``); a refusal names the
    write (``writes[2]: ...``)."""
    streams = [command.stream_id for command in commands]
    latest = deps.store.last_events(set(streams), tx)
    versions = {stream: (event.stream_version if event else 0) for stream, event in latest.items()}
    state = {stream: current_memory(event) for stream, event in latest.items()}
    appends: list[tuple[str, int, MemoryEvent]] = []
    decided: list[int | None] = []  # each write's row in appends
    for index, (command, stream) in enumerate(zip(commands, streams)):
        try:
            event = _decide_write(command, state[stream], versions[stream], deps)
        except MemorydError as error:
            error.message = f"writes[{index}]: {error.message}"
            error.args = (error.message,)
            raise
        if event is None:
            decided.append(None)
            continue
        state[stream] = None if isinstance(event, MemoryDeleted) else event.memory
        versions[stream] += 1
        decided.append(len(appends))
        appends.append((stream, versions[stream], event))
    positions = deps.store.append_many(appends, metadata, claim, tx=tx) if appends else []
    return [None if row is None else Outcome(appends[row][2].memory, isinstance(appends[row][2], MemorySaved),
                                             positions[row], appends[row][1]) for row in decided]


def _decide_write(command: Write, current: Memory | None, version: int, deps: Dependencies) -> MemoryEvent | None:
    if command.expected_version is not None and (current is None or version != command.expected_version):
        raise VersionMismatch(command.expected_version, None if current is None else version)
    if isinstance(command, SaveMemory):
        return _decide_save(command, current, deps)
    if current is None:
        if command.missing_ok:
            return None
        raise NotFound(f"Memory '{command.name}' not found")
    return MemoryDeleted(current)
