"""The ``structured_memories`` read model, one row per live memory, and ``memory_counts`` beside it.

Each apply is an upsert or a delete keyed by ``memory_id`` carrying the
event's full memory, so applying the same event twice leaves the same row.
``last_accessed`` starts at the write time and ``access_count`` at zero;
reads may bump them later, and a write keeps the count. The counts per
namespace and type are kept by the table's own triggers (migration 0012):
they move only when a row appears, goes or changes type, so they are as
idempotent as the rows, and a save writes its row alone (the count row follows
in the same statement).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, bindparam, delete
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.types import MEMORY_EVENTS, MemoriesErased, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.storage.driver import DriverStatement, Transaction
from memoryd.storage.schema import memory_counts, structured_memories

_REWRITTEN_ON_UPDATE = ("name", "description", "type", "scope", "scope_id", "content", "created", "updated", "last_accessed",
                        "version")


_DELETE = delete(structured_memories).where(structured_memories.c.memory_id == bindparam("gone"))


class MemoryTableProjection:
    name = "structured_memories"
    tables = (structured_memories, memory_counts)  # what ``reset`` clears and ``memoryd projections verify`` compares

    def __init__(self) -> None:
        self._upserts: dict[str, DriverStatement] = {}

    def apply(self, tx: Transaction, recorded: RecordedEvent) -> None:
        if not recorded.event_type.startswith(MEMORY_EVENTS):
            return  # another family's event: not decoded, so its trouble is not this projection's
        event = recorded.to_domain()
        if isinstance(event, MemoriesErased):
            for memory_id in event.memory_ids:
                self._delete(tx.conn, memory_id)
            return
        if not isinstance(event, MemoryEvent):  # an erased event among them: its erasure took the row out
            return
        memory = event.memory
        if isinstance(event, MemoryDeleted):
            self._delete(tx.conn, memory.memory_id)
            return
        row: dict[str, Any] = memory.to_dict() | {"last_accessed": memory.updated, "access_count": 0,
                                                  "version": recorded.stream_version}
        self._upsert(tx.conn.dialect.name).defer(tx, row)  # nothing reads its result: sent with the next round trip

    def _delete(self, conn: Connection, memory_id: str) -> None:
        """The row goes, and (by trigger) its own namespace and type count one less, whatever an event carries;
        a count that reaches 0 goes, so the counts depend on the memories there, not on the history that left
        them (a replay of an erased log has none)."""
        conn.execute(_DELETE, {"gone": memory_id})

    def _upsert(self, dialect: str) -> DriverStatement:
        """One INSERT .. ON CONFLICT (memory_id) DO UPDATE per dialect, built once (every save runs it)."""
        if dialect not in self._upserts:
            statement = (postgres_insert if dialect == "postgresql" else sqlite_insert)(structured_memories)
            self._upserts[dialect] = DriverStatement(statement.on_conflict_do_update(
                index_elements=[structured_memories.c.memory_id],
                set_={column: statement.excluded[column] for column in _REWRITTEN_ON_UPDATE},
            ))
        return self._upserts[dialect]

    def reset(self, conn: Connection) -> None:
        conn.execute(delete(memory_counts))  # first: the rows' triggers then find no count to take from
        conn.execute(delete(structured_memories))
