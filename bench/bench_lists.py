"""Lists at 1,000,000 memories: one index range per visible namespace, beside the single ``OR`` query it replaced.

Fills ``structured_memories`` (``memory_counts`` follows by the table's triggers) directly with
``--count`` rows in two layouts: spread over 1,000 user namespaces (plus 1 % global), and all in
one (global). Then runs ``list_memories(limit=100)`` for the filters callers use, in-process; for
several namespaces, the same ranges read one statement per namespace and merged in Python (as
commit 61d1195 did); the same filters through the query before issue 15 (every pattern ``OR``-ed
into one statement, ordered and limited by the database), and the admin total from the counts
beside a ``COUNT(*)``: p50 and p95 in ms and the ratio. Prints the four-namespace statement's plan.

    .venv/bin/python bench/bench_lists.py                       # sqlite and postgres, 1,000,000 rows
    .venv/bin/python bench/bench_lists.py --backend sqlite --count 200000
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import percentile, postgres_schema  # noqa: E402
from sqlalchemy import and_, func, insert, or_, select  # noqa: E402

from memoryd.kernel.domain import MEMORY_TYPES  # noqa: E402
from memoryd.storage import migrate  # noqa: E402
from memoryd.storage.db import Database  # noqa: E402
from memoryd.storage.schema import memory_counts, structured_memories  # noqa: E402
from projections.filters import MemoryFilter, ScopePattern  # noqa: E402
from projections.queries import _distinct, _merged, _rows, count_memories, list_memories  # noqa: E402

table = structured_memories
CHUNK = 20_000


def fill(database: Database, count: int, spread: bool) -> None:
    rng = random.Random(7)
    with database.write() as conn:
        conn.execute(table.delete())
        conn.execute(memory_counts.delete())
    for first in range(0, count, CHUNK):
        rows = []
        for number in range(first, min(count, first + CHUNK)):
            if spread and number % 100:
                scope, scope_id = "user", f"u{number % 1000:04d}"
            else:
                scope, scope_id = "global", ""
            moment = f"2025-{1 + number % 12:02d}-{1 + number % 28:02d}T{number % 24:02d}:{number % 60:02d}:00"
            rows.append({"memory_id": f"m{number:08d}", "name": f"note_{number}", "description": "d",
                         "type": rng.choice(MEMORY_TYPES), "scope": scope, "scope_id": scope_id, "content": "c",
                         "created": moment, "updated": moment, "last_accessed": moment, "access_count": 0})
        with database.write() as conn:
            conn.execute(insert(table), rows)
    settle(database)  # the table's triggers kept memory_counts


def settle(database: Database) -> None:
    """Statistics for the planner, and on PostgreSQL the previous layout's dead rows vacuumed away, as
    autovacuum would: their index entries would otherwise be walked by every read (an empty scope's list
    took 10 ms through 1,000,000 dead entries, 0.5 ms after the vacuum)."""
    if database.dialect != "postgresql":
        with database.write() as conn:
            conn.exec_driver_sql("ANALYZE")
        return
    with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE structured_memories")
        conn.exec_driver_sql("ANALYZE")


def before(conn: Any, where: MemoryFilter, limit: int) -> list[Any]:
    """The list query before issue 15: every pattern OR-ed, ordered and limited by the database."""
    query = _rows()
    if where.type:
        query = query.where(table.c.type == where.type)
    if where.scopes is not None:
        query = query.where(or_(*(table.c.scope == p.scope if p.scope_id is None
                                  else and_(table.c.scope == p.scope, table.c.scope_id == p.scope_id)
                                  for p in where.scopes)))
    return list(conn.execute(query.order_by(table.c.updated.desc(), table.c.memory_id).limit(limit)))


def per_namespace(conn: Any, where: MemoryFilter, limit: int) -> list[dict[str, Any]]:
    """The list as commit 61d1195 read it: one statement per pattern, merged in Python (rows via ``_mapping``)."""
    found: dict[str, dict[str, Any]] = {}
    for pattern in _distinct(where.scopes or ()):
        values = {"type": where.type, "limit": limit, "scope_0": pattern.scope, "scope_id_0": pattern.scope_id}
        for row in conn.execute(_merged((pattern.scope_id is not None,), bool(where.type)), values):
            found.setdefault(row.memory_id, dict(row._mapping))
    page = sorted(found.values(), key=lambda row: row["memory_id"])
    page.sort(key=lambda row: row["updated"], reverse=True)
    return page[:limit]


def p50_p95(samples: list[float]) -> tuple[float, float]:
    return percentile(samples, 50), percentile(samples, 95)


def timed(database: Database, call: Any, rounds: int) -> list[float]:
    samples = []
    with database.read() as conn:
        for _ in range(rounds):
            started = time.perf_counter()
            call(conn)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


FILTERS = {
    "public: global + the caller's user scope": MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", "u0007"))),
    "tool envelope: four namespaces": MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("workstream", "w1"),
                                                           ScopePattern("user", "u0007"), ScopePattern("project", "p1"))),
    "public with type=feedback": MemoryFilter(type="feedback", scopes=(ScopePattern("global"),
                                                                       ScopePattern("user", "u0007"))),
    "admin: everything": MemoryFilter(),
    "admin: type=reference": MemoryFilter(type="reference"),
    "admin: scope=user": MemoryFilter(scopes=(ScopePattern("user"),)),
    "admin: scope=user, scope_id": MemoryFilter(scopes=(ScopePattern("user", "u0123"),)),
}


def run(label: str, database: Database, count: int, rounds: int) -> None:
    print(f"\n## {label}\n")
    for spread in (True, False):
        fill(database, count, spread)
        layout = "1,000 user namespaces + 1 % global" if spread else "all in one (global)"
        print(f"\n{count:,} memories, {layout}:\n")
        print("| list (limit 100) | now p50 ms | now p95 ms | one statement per namespace p50 ms | "
              "before p50 ms | before / now (p50) |")
        print("|---|---|---|---|---|---|")
        for name, where in FILTERS.items():
            now = timed(database, lambda conn, where=where: list_memories(conn, where, 100), rounds)
            separate = "" if where.scopes is None or len(where.scopes) < 2 else \
                f"{p50_p95(timed(database, lambda conn, where=where: per_namespace(conn, where, 100), rounds))[0]:.3f}"
            old = timed(database, lambda conn, where=where: before(conn, where, 100), max(3, rounds // 20))
            with database.read() as conn:
                assert [row["memory_id"] for row in list_memories(conn, where, 100)] == \
                    [row.memory_id for row in before(conn, where, 100)]
            (now50, now95), old50 = p50_p95(now), p50_p95(old)[0]
            print(f"| {name} | {now50:.3f} | {now95:.3f} | {separate} | {old50:.1f} | {old50 / now50:.0f}x |")
        where = FILTERS["admin: type=reference"]
        now = timed(database, lambda conn, where=where: count_memories(conn, where), rounds)
        old = timed(database, lambda conn: conn.execute(select(func.count()).select_from(table).where(
            table.c.type == "reference")).scalar(), max(3, rounds // 20))
        (now50, now95), old50 = p50_p95(now), p50_p95(old)[0]
        print(f"| admin total, type=reference (counts vs COUNT(*)) | {now50:.3f} | {now95:.3f} |  | {old50:.1f} | "
              f"{old50 / now50:.0f}x |")
    with database.read() as conn:
        plan = plan_of(conn, FILTERS["tool envelope: four namespaces"])
    print(f"\nplan of the four-namespace envelope's statement:\n\n```\n{plan}\n```")


def plan_of(conn: Any, where: MemoryFilter) -> str:
    """The database's own plan of the statement ``list_memories`` runs for ``where`` (real parameters)."""
    patterns = _distinct(where.scopes or ())
    values = {"type": where.type, "limit": 100} | {
        f"{key}_{number}": value for number, pattern in enumerate(patterns)
        for key, value in (("scope", pattern.scope), ("scope_id", pattern.scope_id))}
    statement = _merged(tuple(pattern.scope_id is not None for pattern in patterns), bool(where.type))
    sql = str(statement.params(values).compile(conn, compile_kwargs={"literal_binds": True}))
    if conn.dialect.name == "sqlite":
        return "\n".join(f"{row[0]:>3} {row[1]:>3} {row[3]}" for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    return "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN (COSTS OFF) " + sql))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as scratch:
            database = Database(f"sqlite:///{Path(scratch) / 'lists.db'}")
            migrate.upgrade(database)
            run("SQLite", database, args.count, args.rounds)
            database.dispose()
    if args.backend in ("postgres", "both"):
        with postgres_schema("lists") as (_, url):
            database = Database(url)
            migrate.upgrade(database)
            run("PostgreSQL", database, args.count, args.rounds)
            database.dispose()


if __name__ == "__main__":
    main()
