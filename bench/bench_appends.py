"""Appends per second on PostgreSQL with 1, 4 and 8 concurrent writers vs a raw INSERT.

memoryd serializes appends on PostgreSQL: ``EventStore.append`` takes
``pg_advisory_xact_lock`` (one lock per schema) in the statement that reads
the log's head, before its INSERT, and holds it until the commit, so a later
position can never commit before an earlier one.
This measures what that costs when several writers append at once.

Two paths, same database, same engine and pool, one transaction per append,
a new stream per append (so there are never version conflicts):

* ``memoryd EventStore.append``: ``store.append(stream, 0, [MemorySaved(...)],
  metadata)``: advisory lock with the head's read, ``INSERT`` with the head's
  move, commit.
* ``raw INSERT (no lock)``: the same row, built from the same event, inserted
  with ``INSERT ... RETURNING position`` into ``bench_events``, a copy of the
  ``events`` table (same columns, types and unique key), with no lock.

For each writer count the paths take turns in rounds (default 500 appends per
round, the order rotating each round). In a round, W threads take the next
append from a shared counter until the round's appends are used up.
appends/s is appends divided by the summed wall time of that path's rounds;
p50/p95 is the latency of one ``append`` call (lock wait included).

Run from the repo root::

    .venv/bin/python bench/bench_appends.py                 # 3,000 appends per configuration
    .venv/bin/python bench/bench_appends.py --count 1000 --writers 1,8

PostgreSQL: ``MEMORYD_BENCH_POSTGRES_URL`` (default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``); a fresh schema is
created and dropped afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import (
    PLACEHOLDER_HASH,
    SEED,
    Latencies,
    bench_events,
    environment,
    memory_content,
    other_sessions,
    postgres_schema,
    print_header,
    print_results,
    server_version,
)
from sqlalchemy import insert

from events.store import EventStore
from events.types import EventMetadata, MemorySaved, memory_stream_id
from memoryd.kernel.domain import Memory
from memoryd.storage import migrate
from memoryd.storage.db import Database

DEFAULT_COUNT = 3_000
DEFAULT_WRITERS = (1, 4, 8)
ROUND = 500
WARMUP = 100
OURS = "memoryd EventStore.append"
RAW = "raw INSERT (no lock)"
PATHS = (OURS, RAW)


def _event(rng: random.Random, key: str) -> tuple[str, MemorySaved, EventMetadata]:
    """A new memory's first event (~80 words of content), its stream and metadata."""
    content = memory_content(rng)
    memory = Memory(str(uuid.UUID(int=rng.getrandbits(128))), key, "A benchmark memory.", "general", "global", "",
                    content, "2026-11-30T00:00:00", "2026-11-30T00:00:00")
    metadata = EventMetadata(surface="rest", request_id=uuid.UUID(int=rng.getrandbits(128)).hex)
    return memory_stream_id(key, "global", ""), MemorySaved(memory), metadata


@dataclass
class Stats(Latencies):
    wall_ns: int = 0  # summed wall time of the path's rounds (writers overlap, so not the summed latencies)

    @property
    def per_second(self) -> float:
        return len(self.latencies_ns) / (self.wall_ns / 1e9)


class Paths:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.store = EventStore(database)

    def ours(self, stream_id: str, event: MemorySaved, metadata: EventMetadata) -> None:
        self.store.append(stream_id, 0, [event], metadata)

    def raw(self, stream_id: str, event: MemorySaved, metadata: EventMetadata) -> None:
        # The row EventStore.append builds, inserted the same way, minus the append lock (and the chain's
        # digests, which need the head: placeholders, as bench_saves uses).
        recorded_at = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        row = {"stream_id": stream_id, "stream_version": 1, "event_type": event.event_type,
               "schema_version": event.schema_version, "payload": event.payload(), "meta": metadata.to_dict(),
               "recorded_at": recorded_at, "payload_sha256": PLACEHOLDER_HASH, "hash": PLACEHOLDER_HASH}
        with self.database.write() as conn:
            conn.execute(insert(bench_events).returning(bench_events.c.position), row).scalar_one()


Op = Callable[[str, MemorySaved, EventMetadata], None]


def run_round(op: Op, items: list[tuple[str, MemorySaved, EventMetadata]], writers: int, stats: Stats) -> None:
    """``writers`` threads share ``items``; adds the round's wall time and per-append latencies to ``stats``."""
    pending = iter(items)
    take = threading.Lock()
    start_line = threading.Barrier(writers + 1)
    latencies: list[list[int]] = [[] for _ in range(writers)]
    errors: list[BaseException] = []

    def writer(mine: list[int]) -> None:
        start_line.wait()
        try:
            while True:
                with take:
                    item = next(pending, None)
                if item is None:
                    return
                start = time.perf_counter_ns()
                op(*item)
                mine.append(time.perf_counter_ns() - start)
        except BaseException as error:  # noqa: BLE001 - re-raised by the main thread
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(latencies[i],), daemon=True) for i in range(writers)]
    for thread in threads:
        thread.start()
    start_line.wait()
    started = time.perf_counter_ns()
    for thread in threads:
        thread.join()
    stats.wall_ns += time.perf_counter_ns() - started
    if errors:
        raise errors[0]
    for mine in latencies:
        stats.latencies_ns.extend(mine)


def bench_writers(paths: Paths, writers: int, count: int, rng: random.Random, label: str) -> dict[str, Stats]:
    items = {path: [_event(rng, f"{label}_{'ours' if path == OURS else 'raw'}_{writers}_{i:06d}") for i in range(count)]
             for path in PATHS}
    ops: dict[str, Op] = {OURS: paths.ours, RAW: paths.raw}
    results = {path: Stats() for path in PATHS}
    for number, start in enumerate(range(0, count, ROUND)):
        order = PATHS if number % 2 == 0 else PATHS[::-1]  # rotate who goes first
        for path in order:
            run_round(ops[path], items[path][start:start + ROUND], writers, results[path])
    return results


def table(rows: list[tuple[int, str, Stats, float]]) -> list[str]:
    lines = ["| writers | path | n | appends/s | p50 ms | p95 ms | ours / raw (appends/s) |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for writers, path, stats, ratio in rows:
        ratio_text = f"{ratio:.2f}" if path == OURS else "1.00"
        lines.append(f"| {writers} | {path} | {len(stats.latencies_ns)} | {stats.per_second:,.0f} | "
                     f"{stats.percentile_ms(50):.3f} | {stats.percentile_ms(95):.3f} | {ratio_text} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="appends per path and writer count")
    parser.add_argument("--writers", default=",".join(map(str, DEFAULT_WRITERS)),
                        help="comma-separated writer counts (default 1,4,8)")
    args = parser.parse_args(argv)
    writer_counts = [int(w) for w in args.writers.split(",")]

    print_header(__file__, argv, environment())
    print(f"# seed {SEED}, rounds of {ROUND} appends per path (order rotating), warm-up {WARMUP} per path and "
          "writer count, one transaction per append, a new stream per append")
    rng = random.Random(SEED)
    rows, notes = [], []
    with postgres_schema() as (_schema, url):
        database = Database(url)
        try:
            migrate.upgrade(database)
            bench_events.create(database.engine, checkfirst=True)
            version = server_version(database, ("synchronous_commit", "fsync", "commit_delay"))
            notes.append(f"{version}; pool_size 10, max_overflow 20, pool_pre_ping on both paths")
            others_before = other_sessions(database)
            paths = Paths(database)
            started = time.perf_counter()
            for writers in writer_counts:
                bench_writers(paths, writers, WARMUP, rng, "warm")  # warm-up: connections, caches (never counted)
                results = bench_writers(paths, writers, args.count, rng, "run")
                ratio = results[OURS].per_second / results[RAW].per_second
                rows.extend((writers, path, results[path], ratio) for path in PATHS)
            notes.append(f"side-by-side run took {time.perf_counter() - started:.1f} s")
            notes.append(f"other client sessions on the database before/after: {others_before}/{other_sessions(database)}")
        finally:
            database.dispose()
    print_results(table(rows), notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
