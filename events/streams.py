"""Reading a stream's state from its newest event: every memory and project event carries the whole state.

Commands decide on these; the memory tool and entry points use ``live_project``
to check access against the log itself, never a lagging read model, and the
turn composer renders memories as ``memory_versions`` finds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Connection

from events.store import EventStore
from events.transaction import AppendTransaction
from events.types import (
    MemoryDeleted,
    MemoryEvent,
    ProjectDeleted,
    ProjectEvent,
    RecordedEvent,
    memory_stream_id,
    project_stream_id,
)
from memoryd.kernel.domain import Memory, Namespace
from memoryd.kernel.projects import Project


def current_memory(last: RecordedEvent | None) -> Memory | None:
    """A stream's state: the memory its newest event left, or None if deleted or new."""
    if last is None:
        return None
    event = last.to_domain()
    return event.memory if isinstance(event, MemoryEvent) and not isinstance(event, MemoryDeleted) else None


def current_project(last: RecordedEvent | None) -> Project | None:
    """The project as its newest event left it; None if it never existed or was deleted."""
    if last is None:
        return None
    event = last.to_domain()
    return event.project if isinstance(event, ProjectEvent) and not isinstance(event, ProjectDeleted) else None


def memory_versions(store: EventStore, positions: Sequence[int]) -> dict[int, Memory]:
    """The memory each position's event left (a version), as projections applied it; deletions are left out."""
    return {position: memory for position, recorded in store.events_at(positions).items()
            if (memory := current_memory(recorded)) is not None}


def live_project(store: EventStore, project_id: str) -> Project | None:
    """The project as the log has it now (never a lagging read model); None if missing or deleted."""
    return current_project(store.last_event(project_stream_id(project_id)))


class MemoryLocator(Protocol):
    """Finds memories' identities (a read model answers, in a command's transaction if given; the streams
    decide)."""

    def identity_of(self, memory_id: str, within: Connection | None = None) -> tuple[str, Namespace] | None: ...

    def names_in(self, namespace: Namespace, within: Connection | None = None) -> list[str]: ...


def stream_of(store: EventStore, locator: MemoryLocator, memory_id: str, tx: AppendTransaction | None = None
              ) -> str | None:
    """The stream holding the memory ``memory_id`` (read in ``tx``, if given): a live one's from its identity,
    a deleted one's by a scan of the log (None: the log never held it)."""
    identity = locator.identity_of(memory_id, tx.conn if tx is not None else None)
    if identity is None:
        return store.stream_of_memory(memory_id, tx)
    name, namespace = identity
    return memory_stream_id(name, namespace.scope, namespace.scope_id)
