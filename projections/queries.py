"""The read side: short queries over the ``structured_memories`` projection.

Rows come with their access telemetry (``memory_access``, kept beside the log
by tool reads) folded into ``last_accessed`` and ``access_count``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Integer, Result, Select, String, and_, bindparam, func, or_, select, union_all
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from memoryd.kernel.domain import Namespace
from memoryd.storage.db import Database
from memoryd.storage.schema import events, memory_access, memory_counts, projection_checkpoints
from memoryd.storage.schema import structured_memories as memories
from projections.filters import MemoryFilter, ScopePattern


def _rows() -> Select[Any]:
    """Memories with their reads folded in: latest access, and the count of reads."""
    columns = [column for column in memories.c if column.key not in ("last_accessed", "access_count")]
    return select(
        *columns,
        func.coalesce(memory_access.c.last_accessed, memories.c.last_accessed).label("last_accessed"),
        (memories.c.access_count + func.coalesce(memory_access.c.access_count, 0)).label("access_count"),
    ).select_from(memories.outerjoin(memory_access, memory_access.c.memory_id == memories.c.memory_id))


def _newest(scoped: bool | None, typed: bool, paged: bool, suffix: str = "") -> Select[Any]:
    """A page of the newest rows: of a scope (and scope id), of a type, and after a row (``paged``: the keyset
    ``after_updated``, ``after_id``), as bound parameters; built once.

    ``suffix`` names the scope's parameters apart, for several such reads in one statement."""
    query = _rows()
    if scoped is not None:
        query = query.where(memories.c.scope == bindparam(f"scope{suffix}"))
    if scoped:
        query = query.where(memories.c.scope_id == bindparam(f"scope_id{suffix}"))
    if typed:
        query = query.where(memories.c.type == bindparam("type"))
    if paged:  # after the keyset in the page's order; the ``<=`` bounds the index range, the ``OR`` breaks the tie
        after_updated = bindparam("after_updated", type_=String)
        query = query.where(memories.c.updated <= after_updated,
                            or_(memories.c.updated < after_updated, memories.c.memory_id > bindparam("after_id")))
    return query.order_by(memories.c.updated.desc(), memories.c.memory_id).limit(bindparam("limit", type_=Integer))


_NEWEST = {(scoped, typed, paged): _newest(scoped, typed, paged)
           for scoped in (None, False, True) for typed in (False, True) for paged in (False, True)}


@dataclass(frozen=True)
class Keyset:
    """A row's place in a list's order (``updated`` newest first, then ``memory_id``): a page starts after it."""

    updated: str
    memory_id: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> Keyset:
        return cls(row["updated"], row["memory_id"])


def list_memories(conn: Connection, where: MemoryFilter, limit: int, after: Keyset | None = None
                  ) -> list[dict[str, Any]]:
    """The ``limit`` most recently updated memories ``where`` admits (updated, newest first, then id), after the
    row ``after`` names if given (keyset paging: a row written meanwhile moves to the front, so a walk of the
    pages meets every row that was not written during it once, whatever was written).

    One statement: an index range read per scope pattern, each stopping at ``limit`` rows, merged and cut
    to ``limit`` by the database. A page costs what the page costs, however many memories the caller
    cannot see (an ``OR`` over the patterns would make the database read and sort every row), in one
    round trip and one snapshot.
    """
    values: dict[str, Any] = {"type": where.type, "limit": limit}
    if after is not None:
        values |= {"after_updated": after.updated, "after_id": after.memory_id}
    if where.scopes is None:
        return _dicts(conn.execute(_NEWEST[(None, bool(where.type), after is not None)], values))
    patterns = _distinct(where.scopes)
    if not patterns:
        return []
    for number, pattern in enumerate(patterns):
        values |= {f"scope_{number}": pattern.scope, f"scope_id_{number}": pattern.scope_id}
    statement = _merged(tuple(pattern.scope_id is not None for pattern in patterns), bool(where.type),
                        after is not None)
    return _dicts(conn.execute(statement, values))


def _dicts(result: Result[Any]) -> list[dict[str, Any]]:
    """Every row as a dict, the keys taken once (a row's ``_mapping`` per row costs a page as much as its read)."""
    keys = list(result.keys())
    return [dict(zip(keys, row)) for row in result.all()]


def _distinct(patterns: tuple[ScopePattern, ...]) -> list[ScopePattern]:
    """The patterns without repeats, and without a namespace whose whole scope is listed too: no row twice."""
    whole = {pattern.scope for pattern in patterns if pattern.scope_id is None}
    return [pattern for pattern in dict.fromkeys(patterns) if pattern.scope_id is None or pattern.scope not in whole]


@functools.lru_cache(maxsize=128)
def _merged(shape: tuple[bool, ...], typed: bool, paged: bool = False) -> Select[Any]:
    """The page of several patterns as one statement, built once per shape (which patterns name a scope id).

    Each pattern is a ``_newest`` read with parameters of its own, wrapped as a subquery so that it keeps
    its order and limit (a member of a ``UNION`` may not have them); the outer query merges at most
    ``len(shape) * limit`` rows to the page.
    """
    if len(shape) == 1:
        return _newest(shape[0], typed, paged, "_0")
    reads = [select(read) for read in
             (_newest(scoped, typed, paged, f"_{number}").subquery() for number, scoped in enumerate(shape))]
    page = union_all(*reads).subquery("page")
    return select(page).order_by(page.c.updated.desc(), page.c.memory_id).limit(bindparam("limit", type_=Integer))


def find_memory(conn: Connection, name: str, namespace: Namespace) -> dict[str, Any] | None:
    row = conn.execute(_rows().where(memories.c.name == name, memories.c.scope == namespace.scope,
                                     memories.c.scope_id == namespace.scope_id)).first()
    return dict(row._mapping) if row else None


def _count_read(insert_of: Any) -> Any:
    statement = insert_of(memory_access)
    return statement.on_conflict_do_update(index_elements=[memory_access.c.memory_id], set_={
        "last_accessed": statement.excluded.last_accessed, "access_count": memory_access.c.access_count + 1})


_COUNT_READ = {"postgresql": _count_read(postgres_insert), "sqlite": _count_read(sqlite_insert)}  # built once


def record_access(conn: Connection, memory_ids: list[str], now: str) -> None:
    """Count a read of each memory (tool get and search, turns) without touching the log.

    Rows are written in id order, so two transactions counting the same memories
    never lock them in opposite orders (no deadlock on PostgreSQL).
    """
    if memory_ids:
        conn.execute(_COUNT_READ[conn.dialect.name],
                     [{"memory_id": memory_id, "last_accessed": now, "access_count": 1}
                      for memory_id in sorted(set(memory_ids))])


def iter_memories(conn: Connection, page: int = 1_000) -> Iterator[dict[str, Any]]:
    """Every memory, streamed in pages (exports)."""
    for row in conn.execution_options(yield_per=page).execute(select(memories).order_by(memories.c.memory_id)):
        yield dict(row._mapping)


def count_memories(conn: Connection, where: MemoryFilter) -> int:
    """How many memories ``where`` admits, from the counts the table's triggers keep (no table scan)."""
    query = select(func.coalesce(func.sum(memory_counts.c.count), 0))
    if where.type:
        query = query.where(memory_counts.c.type == where.type)
    if where.scopes is not None:
        query = query.where(or_(False, *(_counted(pattern) for pattern in where.scopes)))
    return int(conn.execute(query).scalar_one())


_BY_IDS = _rows().where(memories.c.memory_id.in_(bindparam("memory_ids", expanding=True)))  # every search: built once


def get_memory(conn: Connection, memory_id: str) -> dict[str, Any] | None:
    row = conn.execute(_rows().where(memories.c.memory_id == memory_id)).first()
    return dict(row._mapping) if row else None


def memories_in_order(conn: Connection, memory_ids: list[str]) -> list[dict[str, Any]]:
    """The rows of these memories, in the given order (ids the table lacks are left out)."""
    if not memory_ids:
        return []
    found = {row["memory_id"]: row for row in _dicts(conn.execute(_BY_IDS, {"memory_ids": memory_ids}))}
    return [found[memory_id] for memory_id in memory_ids if memory_id in found]


class ProjectedMemoryLocator:
    """Finds which identity a memory id belongs to, for the admin delete-by-id command.

    The read model answers for everything up to its checkpoint; the events after
    it (not projected yet, e.g. while workers lag) are searched directly, so a
    memory whose save already answered is found even before it is projected.
    The command still decides on the stream itself.
    """

    def __init__(self, database: Database, projection: str = "structured_memories") -> None:
        self.database = database
        self.projection = projection

    def identity_of(self, memory_id: str, within: Connection | None = None) -> tuple[str, Namespace] | None:
        """The memory's name and namespace (read in ``within``, a command's transaction, if given)."""
        with self.database.read(within) as conn:
            checkpoint = conn.execute(select(projection_checkpoints.c.position)
                                      .where(projection_checkpoints.c.name == self.projection)).scalar() or 0
            newest = conn.execute(
                select(events.c.payload).where(events.c.position > checkpoint,
                                               events.c.payload[("memory", "memory_id")].as_string() == memory_id)
                .order_by(events.c.position.desc()).limit(1)).scalar()
            if newest is not None:
                memory = newest["memory"]
                return memory["name"], Namespace(memory["scope"], memory["scope_id"])
            columns = (memories.c.name, memories.c.scope, memories.c.scope_id)
            row = conn.execute(select(*columns).where(memories.c.memory_id == memory_id)).first()
        return (row.name, Namespace(row.scope, row.scope_id)) if row else None

    def names_in(self, namespace: Namespace, within: Connection | None = None) -> list[str]:
        """Names in a namespace: the read model's, plus any in the unprojected tail of the log."""
        with self.database.read(within) as conn:
            checkpoint = conn.execute(select(projection_checkpoints.c.position)
                                      .where(projection_checkpoints.c.name == self.projection)).scalar() or 0
            names = set(conn.execute(select(memories.c.name).where(
                memories.c.scope == namespace.scope, memories.c.scope_id == namespace.scope_id)).scalars())
            tail = conn.execute(select(events.c.payload).where(
                events.c.position > checkpoint, events.c.payload[("memory", "scope")].as_string() == namespace.scope,
                events.c.payload[("memory", "scope_id")].as_string() == namespace.scope_id)).scalars()
            names.update(payload["memory"]["name"] for payload in tail)
        return sorted(names)


def _counted(pattern: ScopePattern) -> Any:
    if pattern.scope_id is None:
        return memory_counts.c.scope == pattern.scope
    return and_(memory_counts.c.scope == pattern.scope, memory_counts.c.scope_id == pattern.scope_id)
