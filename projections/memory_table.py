"""The ``structured_memories`` read model, one row per live memory.

Each apply is an upsert or a delete keyed by ``memory_id`` carrying the
event's full memory, so applying the same event twice leaves the same row.
``last_accessed`` starts at the write time and ``access_count`` at zero;
reads may bump them later, and a write keeps the count.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Executable, delete
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.types import MEMORY_EVENTS, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.schema import structured_memories

_REWRITTEN_ON_UPDATE = ("name", "description", "type", "scope", "scope_id", "content", "created", "updated", "last_accessed")


class MemoryTableProjection:
    name = "structured_memories"

    def __init__(self) -> None:
        self._upserts: dict[str, Executable] = {}

    def apply(self, conn: Connection, recorded: RecordedEvent) -> None:
        if not recorded.event_type.startswith(MEMORY_EVENTS):
            return  # another family's event: not decoded, so its trouble is not this projection's
        event = recorded.to_domain()
        if not isinstance(event, MemoryEvent):
            return
        if isinstance(event, MemoryDeleted):
            conn.execute(delete(structured_memories).where(structured_memories.c.memory_id == event.memory.memory_id))
            return
        row: dict[str, Any] = event.memory.to_dict() | {"last_accessed": event.memory.updated, "access_count": 0}
        conn.execute(self._upsert(conn.dialect.name), row)

    def _upsert(self, dialect: str) -> Executable:
        """One INSERT .. ON CONFLICT (memory_id) DO UPDATE per dialect, built once."""
        if dialect not in self._upserts:
            statement = (postgres_insert if dialect == "postgresql" else sqlite_insert)(structured_memories)
            self._upserts[dialect] = statement.on_conflict_do_update(
                index_elements=[structured_memories.c.memory_id],
                set_={column: statement.excluded[column] for column in _REWRITTEN_ON_UPDATE},
            )
        return self._upserts[dialect]

    def reset(self, conn: Connection) -> None:
        conn.execute(delete(structured_memories))
