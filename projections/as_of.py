"""Point-in-time reads: the admin get, list and search as they would have answered at a log position.

Built on demand from the log, at a cost bounded by the searched set: a memory's stream id begins
with its namespace (``memory:["scope","scope id",``), so the events of the namespaces a filter
admits are one range of the ``(stream_id, stream_version)`` index, read up to the position. Each
stream's last event there is the memory as it then was (a superseded event as its stand-in; an
erased one holds nothing). A search ranks those memories with a fresh index over exactly them, so
its statistics are that moment's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, select

from events.store import EventStore
from events.streams import current_memory
from events.types import MemorySaved, RecordedEvent
from memoryd.kernel.domain import Memory
from memoryd.storage.schema import events
from projections.filters import MemoryFilter
from projections.search.fused import FusedSearch
from projections.search.index import SearchIndex

PAGE = 5_000  # events per read of a range


@dataclass(frozen=True)
class Historic:
    """A memory as it was, with what the read model would have held beside it then."""

    memory: Memory
    version: int  # its stream's version: the ETag it had
    position: int  # the event that left it so

    def row(self) -> dict[str, Any]:
        """As the table's row; read counts are not in the log, so they are as the write left them."""
        return self.memory.to_dict() | {"last_accessed": self.memory.updated, "access_count": 0,
                                        "version": self.version}


def memory_as_of(store: EventStore, stream_id: str, memory_id: str, position: int) -> Historic | None:
    """The memory ``memory_id`` of ``stream_id`` as it was at ``position``; None if it was not there."""
    return next((found for found in _last_of_streams(store, range_query(store.database.dialect, stream_id, None, position))
                 if found.memory.memory_id == memory_id), None)


def list_as_of(store: EventStore, where: MemoryFilter, position: int) -> list[Historic]:
    """Every memory ``where`` admitted at ``position``: most recently updated first, then by id."""
    dialect = store.database.dialect
    found = [historic for low, high in _ranges(where)
             for historic in _last_of_streams(store, range_query(dialect, low, high, position))
             if not where.type or historic.memory.type == where.type]
    found.sort(key=lambda historic: historic.memory.memory_id)
    found.sort(key=lambda historic: historic.memory.updated, reverse=True)
    return found


def search_as_of(store: EventStore, where: MemoryFilter, query: str, limit: int, position: int,
                 index: SearchIndex, fused: FusedSearch | None = None) -> list[Historic]:
    """The ``limit`` best matches of ``query`` among the memories ``where`` admitted at ``position``, ranked
    with that moment's statistics in ``index`` (empty: the live index's ranking and analyzer), and with
    ``fused``, the semantic channel's, fused with the vectors of the versions it still holds."""
    admitted = sorted(list_as_of(store, where, position), key=lambda historic: historic.position)
    by_id = {}
    for historic in admitted:
        index.apply(RecordedEvent(historic.position, "", historic.version, MemorySaved.event_type, 1,
                                  MemorySaved(historic.memory).payload(), {}, ""))
        by_id[historic.memory.memory_id] = historic
    if fused is not None:
        versions = {memory_id: historic.position for memory_id, historic in by_id.items()}
        return [by_id[candidate.memory_id] for candidate in fused.among_versions(index, query, limit, versions)]
    return [by_id[hit.memory_id] for hit in index.search(MemoryFilter(), query, limit)]


def _ranges(where: MemoryFilter) -> list[tuple[str, str]]:
    """The stream id ranges ``[low, high)`` holding the memories of the namespaces ``where`` admits."""
    if where.scopes is None:
        return [("memory:[", "memory:\\")]  # "\\" follows "[" in code point order
    ranges = []
    for pattern in where.scopes:
        key = [pattern.scope] if pattern.scope_id is None else [pattern.scope, pattern.scope_id]
        prefix = "memory:" + json.dumps(key, ensure_ascii=False, separators=(",", ":"))[:-1] + ","
        ranges.append((prefix, prefix[:-1] + "-"))  # "-" follows ","
    return ranges


def _last_of_streams(store: EventStore, query: Select[Any]) -> Iterator[Historic]:
    """Each stream's memory as the last of its events ``query`` reads (``range_query``) left it."""
    with store.database.read() as conn:
        superseded = store.superseded(conn)
        last: RecordedEvent | None = None
        for recorded in _paged(conn, query):
            if last is not None and recorded.stream_id != last.stream_id and (found := _historic(last)) is not None:
                yield found
            last = superseded[recorded.position].stand_in(recorded) if recorded.position in superseded else recorded
        if last is not None and (found := _historic(last)) is not None:
            yield found


def range_query(dialect: str, low: str, high: str | None, position: int) -> Select[Any]:
    """The events of the streams in ``[low, high)`` (``high`` None: of the stream ``low``) up to ``position``,
    by stream and version: one index range."""
    stream_id: Any = events.c.stream_id
    if dialect == "postgresql":
        stream_id = stream_id.collate("C")  # code point order, as SQLite's; the log has an index in that order
    streams = stream_id == low if high is None else (stream_id >= low) & (stream_id < high)
    return (select(events).where(streams, events.c.position <= position)
            .order_by(stream_id, events.c.stream_version))


def _paged(conn: Connection, query: Any) -> Iterator[RecordedEvent]:
    for row in conn.execute(query.execution_options(yield_per=PAGE)):
        yield RecordedEvent(*row)


def _historic(last: RecordedEvent) -> Historic | None:
    memory = current_memory(last)
    return Historic(memory, last.stream_version, last.position) if memory is not None else None
