"""The ``structured_memories`` read model, one row per live memory, and ``memory_counts`` beside it.

Each apply is an upsert or a delete keyed by ``memory_id`` carrying the
event's full memory, so applying the same event twice leaves the same row.
``last_accessed`` starts at the write time and ``access_count`` at zero;
reads may bump them later, and a write keeps the count. The counts per
namespace and type move only when a row appears, goes or changes type, so
they are as idempotent as the rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Executable, bindparam, delete, select
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.types import MEMORY_EVENTS, MemoriesErased, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.schema import memory_counts, structured_memories

_REWRITTEN_ON_UPDATE = ("name", "description", "type", "scope", "scope_id", "content", "created", "updated", "last_accessed",
                        "version")


_KEY = (structured_memories.c.scope, structured_memories.c.scope_id, structured_memories.c.type)  # what counts
_KEY_OF = select(*_KEY).where(structured_memories.c.memory_id == bindparam("memory_id"))
_EMPTIED = delete(memory_counts).where(
    memory_counts.c.scope == bindparam("scope"), memory_counts.c.scope_id == bindparam("scope_id"),
    memory_counts.c.type == bindparam("type"), memory_counts.c.count <= 0)
_DELETE = delete(structured_memories).where(structured_memories.c.memory_id == bindparam("gone")).returning(*_KEY)


class MemoryTableProjection:
    name = "structured_memories"
    tables = (structured_memories, memory_counts)  # what ``reset`` clears and ``memoryd projections verify`` compares

    def __init__(self) -> None:
        self._upserts: dict[str, Executable] = {}

    def apply(self, conn: Connection, recorded: RecordedEvent) -> None:
        if not recorded.event_type.startswith(MEMORY_EVENTS):
            return  # another family's event: not decoded, so its trouble is not this projection's
        event = recorded.to_domain()
        if isinstance(event, MemoriesErased):
            for memory_id in event.memory_ids:
                self._delete(conn, memory_id)
            return
        if not isinstance(event, MemoryEvent):  # an erased event among them: its erasure took the row out
            return
        memory = event.memory
        if isinstance(event, MemoryDeleted):
            self._delete(conn, memory.memory_id)
            return
        before = conn.execute(_KEY_OF, {"memory_id": memory.memory_id}).first()
        row: dict[str, Any] = memory.to_dict() | {"last_accessed": memory.updated, "access_count": 0,
                                                  "version": recorded.stream_version}
        conn.execute(self._upsert(conn.dialect.name), row)
        after = (memory.scope, memory.scope_id, memory.type)
        if before is None or tuple(before) != after:  # new, or moved to another namespace or type
            if before is not None:
                self._count(conn, tuple(before), -1)
            self._count(conn, after, +1)

    def _delete(self, conn: Connection, memory_id: str) -> None:
        """The row goes, and its own namespace and type count one less (whatever an event carries)."""
        if (gone := conn.execute(_DELETE, {"gone": memory_id}).first()) is not None:
            self._count(conn, tuple(gone), -1)

    def _count(self, conn: Connection, key: tuple[Any, ...], change: int) -> None:
        """Add ``change`` to a namespace's count; a count that reaches 0 goes, so that the counts depend on
        the memories there, not on the history that left them (a replay of an erased log has none)."""
        scope, scope_id, memory_type = key
        values = {"scope": scope, "scope_id": scope_id, "type": memory_type, "count": change}
        conn.execute(self._counter(conn.dialect.name), values)
        if change < 0:
            conn.execute(_EMPTIED, values)

    def _counter(self, dialect: str) -> Executable:
        """One INSERT .. ON CONFLICT DO UPDATE adding to a namespace's count, per dialect, built once."""
        key = f"counts:{dialect}"
        if key not in self._upserts:
            statement = (postgres_insert if dialect == "postgresql" else sqlite_insert)(memory_counts)
            self._upserts[key] = statement.on_conflict_do_update(
                index_elements=[memory_counts.c.scope, memory_counts.c.scope_id, memory_counts.c.type],
                set_={"count": memory_counts.c.count + statement.excluded["count"]})
        return self._upserts[key]

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
        conn.execute(delete(memory_counts))
