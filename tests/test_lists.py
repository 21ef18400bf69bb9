"""Lists read one index range per visible namespace, and the counts a projection keeps equal the table's."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, func, select

from commands.model import DeleteMemory, SaveMemory
from events.types import EventMetadata, MemoryDeleted, MemoryUpdated, RecordedEvent
from memoryd.app.services import Services
from memoryd.kernel.domain import MEMORY_TYPES, Namespace
from memoryd.storage.driver import Transaction
from memoryd.storage.schema import memory_counts, structured_memories
from projections.filters import MemoryFilter, ScopePattern
from projections.queries import _NEWEST, Keyset, _merged, count_memories, list_memories
from tests.helpers import make_services, memory_counts_by_namespace, rebuild_equals_live, table_rows

NAMESPACES = [Namespace("global", ""), Namespace("user", "u1"), Namespace("user", "u2"), Namespace("workstream", "w1"),
              Namespace("project", "p1")]
PATTERNS = [ScopePattern("global"), ScopePattern("user", "u1"), ScopePattern("user"), ScopePattern("workstream", "w1"),
            ScopePattern("project", "p1"), ScopePattern("project", "p9")]
AFTER = {"after_updated": "2026-01-01T02:00:00", "after_id": "m"}  # a page after a row: the keyset's parameters


def churn(services: Services, seed: int, writes: int = 120) -> None:
    """Saves (new and type-changing updates) and deletes over a few namespaces, in a seeded order, with
    ``updated`` times drawn from a few hours (ties included), so pages are ordered by time, then by id."""
    rng = random.Random(seed)
    moments = iter(sorted(f"2026-01-01T{rng.randrange(4):02d}:{rng.randrange(60):02d}:00" for _ in range(writes * 2)))
    services.bus.deps = replace(services.bus.deps, clock=lambda: next(moments))
    for number in range(writes):
        namespace, name = rng.choice(NAMESPACES), f"note_{rng.randrange(25)}"
        if rng.random() < 0.2:
            try:
                services.bus.handle(DeleteMemory(name, namespace), EventMetadata())
            except Exception:  # not there: nothing to delete
                pass
            continue
        services.bus.handle(SaveMemory(name, f"content {number}", "d", rng.choice(MEMORY_TYPES), namespace),
                            EventMetadata())


def oracle(services: Services, where: MemoryFilter, limit: int) -> list[str]:
    """The page by brute force: every row, filtered and sorted in Python."""
    rows = [row for row in table_rows(services) if (not where.type or row["type"] == where.type) and (
        where.scopes is None or any(row["scope"] == p.scope and p.scope_id in (None, row["scope_id"])
                                    for p in where.scopes))]
    rows.sort(key=lambda row: row["memory_id"])
    rows.sort(key=lambda row: row["updated"], reverse=True)
    return [row["memory_id"] for row in rows[:limit]]


def test_counts_follow_saves_type_changes_and_deletes_and_rebuild_to_the_same(any_services: Services) -> None:
    churn(any_services, seed=7)
    with any_services.database.read() as conn:
        grouped = conn.execute(select(structured_memories.c.scope, structured_memories.c.scope_id,
                                      structured_memories.c.type, func.count())
                               .group_by(structured_memories.c.scope, structured_memories.c.scope_id,
                                         structured_memories.c.type)).all()
    assert memory_counts_by_namespace(any_services) == {(s, i, t): n for s, i, t, n in grouped}
    assert rebuild_equals_live(any_services)


@pytest.fixture(scope="module")
def churned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """One store, churned once, that the property below pages through many ways."""
    built = make_services(f"sqlite:///{tmp_path_factory.mktemp('lists') / 'memoryd.db'}")
    churn(built, seed=11, writes=300)
    yield built
    built.database.dispose()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.none(), st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=4)),
       st.sampled_from(["", *MEMORY_TYPES]), st.integers(1, 30))
def test_a_page_is_the_brute_force_page_and_the_total_the_brute_force_count(churned: Services, patterns: Any, memory_type: Any,
                                                                            limit: Any) -> None:
    where = MemoryFilter(type=memory_type, scopes=tuple(patterns) if patterns is not None else None)
    with churned.database.read() as conn:
        page = [row["memory_id"] for row in list_memories(conn, where, limit)]
        total = count_memories(conn, where)
    assert page == oracle(churned, where, limit)
    assert total == len(oracle(churned, where, 10_000))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(st.none(), st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=4)),
       st.sampled_from(["", *MEMORY_TYPES]), st.integers(1, 40))
def test_the_pages_of_a_walk_together_are_the_unpaged_list(churned: Services, patterns: Any, memory_type: Any,
                                                           limit: Any) -> None:
    """Each page starts after the last row of the one before (ties in ``updated`` broken by id, across pages)."""
    where = MemoryFilter(type=memory_type, scopes=tuple(patterns) if patterns is not None else None)
    expected, walked, after = oracle(churned, where, 10_000), list[str](), None
    with churned.database.read() as conn:
        for _ in range(len(expected) + 1):  # a walk that repeats rows must still end
            page = list_memories(conn, where, limit, after)
            if not page:
                break
            walked += [row["memory_id"] for row in page]
            after = Keyset.of(page[-1])
    assert walked == expected


def test_one_memory_in_two_overlapping_patterns_is_listed_once(services: Services) -> None:
    services.bus.handle(SaveMemory("mine", "c", "d", None, Namespace("user", "u1")), EventMetadata())
    with services.database.read() as conn:
        rows = list_memories(conn, MemoryFilter(scopes=(ScopePattern("user"), ScopePattern("user", "u1"))), 10)
    assert [row["name"] for row in rows] == ["mine"]


def test_every_list_statement_reads_an_index_in_the_pages_order(any_services: Services) -> None:
    """The plans of the statements ``list_memories`` runs, all twelve shapes with real parameters: an index of
    ``structured_memories`` read in the page's order, no sort (SQLite's and PostgreSQL's own words).

    PostgreSQL's planner prefers a sequential scan for a table this small, so there it is asked whether
    a plan without a table scan or a sort exists at all (``enable_seqscan`` and ``enable_sort`` off)."""
    churn(any_services, seed=3, writes=40)
    values = {"scope": "user", "scope_id": "u1", "type": "feedback", "limit": 100, **AFTER}
    with any_services.database.read() as conn:
        explain = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN (COSTS OFF) "
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            conn.exec_driver_sql("SET LOCAL enable_sort = off")
        for shape, statement in _NEWEST.items():
            sql = str(statement.params(values).compile(conn, compile_kwargs={"literal_binds": True}))
            plan = " ".join(str(part) for row in conn.exec_driver_sql(explain + sql) for part in row)
            assert "ix_structured_memories_" in plan, (shape, plan)
            assert not any(word in plan for word in ("Seq Scan on structured_memories", "Sort", "TEMP B-TREE")), \
                (shape, plan)


ENVELOPES = {(False, True): ("global", "user"), (False, True, True, True): ("global", "workstream", "user", "project"),
             (True, True): ("user", "user")}


@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("shape", list(ENVELOPES))
def test_a_page_of_several_patterns_is_one_statement_of_index_reads_merged(any_services: Services, shape: Any,
                                                                           typed: bool, paged: bool) -> None:
    """Several patterns are one statement, each pattern an index read of at most ``limit`` rows in the page's
    order, merged: PostgreSQL merges the ordered reads (``Merge Append``, no sort); SQLite sorts only each
    read's own rows (a temporary B-tree over a subquery's output, never over the table)."""
    churn(any_services, seed=5, writes=40)
    values: dict[str, Any] = {"type": "feedback" if typed else "", "limit": 100, **AFTER}
    for number, (scoped, scope) in enumerate(zip(shape, ENVELOPES[shape], strict=True)):
        values |= {f"scope_{number}": scope, f"scope_id_{number}": f"{scope[0]}{number}" if scoped else None}
    with any_services.database.read() as conn:
        sql = str(_merged(shape, typed, paged).params(values).compile(conn, compile_kwargs={"literal_binds": True}))
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            conn.exec_driver_sql("SET LOCAL enable_sort = off")
            plan = [row[0] for row in conn.exec_driver_sql("EXPLAIN (COSTS OFF) " + sql)]
            assert "Merge Append" in plan[1], plan
            nodes = [line.strip().removeprefix("->").strip() for line in plan]
            assert not any(node in ("Sort", "Incremental Sort") or node.startswith("Seq Scan on structured_memories")
                           for node in nodes), plan
            reads = [line for line in plan if "Index" in line and "on structured_memories" in line]
        else:
            rows = list(conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
            assert not any(row[3].startswith("SCAN structured_memories") for row in rows), rows
            sorting = {parent for _, parent, _, detail in rows if detail.startswith("USE TEMP B-TREE")}
            sorted_over = [detail for _, parent, _, detail in rows if parent in sorting and detail.startswith("SCAN ")]
            assert len(sorted_over) == len(sorting) and all(d.startswith("SCAN anon_") for d in sorted_over), rows
            reads = [row[3] for row in rows if row[3].startswith("SEARCH structured_memories")]
    assert len(reads) == len(shape) and all("ix_structured_memories_" in read for read in reads), reads


def test_a_page_of_the_whole_envelope_is_one_round_trip(any_services: Services) -> None:
    churn(any_services, seed=9, writes=40)
    statements = []
    where = MemoryFilter(scopes=tuple(ScopePattern(n.scope, n.scope_id) for n in NAMESPACES[:4]))
    with any_services.database.read() as conn:
        event.listen(conn, "before_cursor_execute", lambda *args: statements.append(args[2]))
        page = list_memories(conn, where, 10)
    assert len(statements) == 1 and [row["memory_id"] for row in page] == oracle(any_services, where, 10)


def test_counts_follow_the_row_when_a_stand_in_moves_it_to_another_namespace(services: Services) -> None:
    saved = services.bus.handle(SaveMemory("moved", "c", "d", "user", Namespace("user", "u1")), EventMetadata())
    moved = replace(saved.memory, scope_id="u2", type="feedback")
    with services.database.transaction(Transaction) as tx:
        services.memory_table.apply(tx, RecordedEvent(saved.position + 1, "s", 2, MemoryUpdated.event_type, 1,
                                                      MemoryUpdated(moved).payload(), {}, "t"))
        services.memory_table.apply(tx, RecordedEvent(saved.position + 2, "s", 3, MemoryDeleted.event_type, 1,
                                                      MemoryDeleted(replace(moved, scope_id="u9")).payload(), {}, "t"))
    assert memory_counts_by_namespace(services) == {}


def test_a_database_at_0011_gets_its_counts_recomputed_and_kept_by_the_tables_triggers(any_services: Services) -> None:
    """Migration 0012 moves the counting into triggers on the table: it recounts a database whose counts
    were kept by the projection, and from then on any row written, moved or removed counts, however it got there."""
    from alembic import command

    from memoryd.storage import migrate

    churn(any_services, seed=12, writes=60)
    recount = memory_counts_by_namespace(any_services)
    settings_ = migrate._alembic_config()
    with any_services.database.write() as conn:
        settings_.attributes["connection"] = conn
        command.downgrade(settings_, "0011")
        conn.execute(memory_counts.update().values(count=memory_counts.c.count + 5))  # counts gone wrong before
    migrate.upgrade(any_services.database)
    assert memory_counts_by_namespace(any_services) == recount
    row = {"memory_id": "direct", "name": "direct_row", "description": "d", "type": "user", "scope": "user",
           "scope_id": "u9", "content": "c", "created": "t", "updated": "t", "last_accessed": "t", "access_count": 0}
    direct = structured_memories.c.memory_id == "direct"
    for change, counted in ((structured_memories.insert().values(row), {("user", "u9", "user"): 1}),
                            (structured_memories.update().where(direct).values(type="feedback"),
                             {("user", "u9", "feedback"): 1}),
                            (structured_memories.delete().where(direct), {})):
        with any_services.database.write() as conn:
            conn.execute(change)
        assert memory_counts_by_namespace(any_services) == recount | counted
    assert rebuild_equals_live(any_services)
