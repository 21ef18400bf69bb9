"""Saves per second through the command handler vs a raw insert, side by side.

Three paths write the same rows in the same database, interleaved in small
chunks (rotating which path goes first) so table growth, cache warm-up and
background noise hit all of them alike:

* ``memoryd``: ``services.bus.handle(SaveMemory.validated(...), EventMetadata(...))``:
  validation, then one transaction: (PG: the append lock, which reads the
  log's head) stream load, event append, the in-process projections with
  their checkpoints.
* ``raw memories``: one SQLAlchemy Core ``INSERT`` (``ON CONFLICT DO UPDATE``
  for updates, the projection's own statement shape), built once, into
  ``structured_memories``, one transaction (commit) per row.
* ``raw events``: one Core ``INSERT`` of the same event row into a copy of the
  ``events`` table (``bench_events``, same columns, types and unique key),
  one transaction per row. A copy, so the projector never sees these rows.

Both baselines go through the same ``Database`` engine as memoryd (same pool,
SQLite pragmas and ``BEGIN IMMEDIATE``, PG ``pool_pre_ping``), so the ratio
isolates what memoryd does per save, not connection set-up.

Workloads: ``create`` (N new memories) and ``update`` (N saves of existing
memories, picked with a fixed seed: upserts). Single writer, sequential.

Run from the repo root::

    .venv/bin/python bench/bench_saves.py                  # both backends, defaults
    .venv/bin/python bench/bench_saves.py --backend sqlite --count 5000
    .venv/bin/python bench/bench_saves.py --breakdown      # + where memoryd's time goes
    .venv/bin/python bench/bench_saves.py --rounds 5       # five fresh databases: the ratios' spread
    .venv/bin/python bench/bench_saves.py --backend sqlite --pages   # + WAL pages per save, by table and index
    .venv/bin/python bench/bench_saves.py --backend sqlite --replay  # + each path's statements replayed alone

With ``--rounds`` above 1 the table is the first round's, and a summary gives each ratio's median and
range over the rounds, and what a save costs against the two raw inserts it amounts to (the memory row
and the event row, each in a transaction of its own): the floor an event-sourced save works against.

PostgreSQL: ``MEMORYD_BENCH_POSTGRES_URL`` (default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``); a fresh schema is
created and dropped afterwards.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import (
    PLACEHOLDER_HASH,
    SEED,
    Latencies,
    bench_events,
    environment,
    other_sessions,
    postgres_schema,
    print_header,
    print_results,
    server_version,
)
from sqlalchemy import event, insert
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from commands.model import SaveMemory
from events.types import MEMORY_SAVED, MEMORY_UPDATED, EventMetadata, memory_stream_id
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.kernel.config import Config, StorageSettings
from memoryd.kernel.domain import REST_MAX_CONTENT, Memory, Namespace, utc_timestamp
from memoryd.storage import driver, migrate
from memoryd.storage.schema import structured_memories

CHUNK = 50
WARMUP = 25
DEFAULT_COUNT = {"sqlite": 2000, "postgres": 1000}
PAGES_PASS = 200  # saves per path in the --pages pass
REPLAY_PASS = 1000  # creates per path in the --replay pass
OURS = "memoryd bus.handle"
RAW_MEMORIES = "raw insert structured_memories"
RAW_EVENTS = "raw insert events only"
PATHS = (OURS, RAW_MEMORIES, RAW_EVENTS)

_WORD_TEXT = """
the a of to and in for on with that this is was be it as at by from or an not are we our
deploy release staging production rollback migration schema index query latency cache
token user project workstream agent memory context prompt review feedback decision note
prefers always never before after when because should must avoid use keep run check test
build pipeline branch commit merge conflict ticket sprint deadline meeting customer team
config flag timeout retry queue worker job event log metric alert dashboard incident
database postgres sqlite backup restore replica vacuum lock transaction snapshot version
python flask api endpoint request response error status header json payload limit page
api_key secret rotate expire permission scope admin owner access audit policy compliance
frontend backend service cluster node container image registry volume network proxy
monday friday weekly daily morning quarter roadmap priority estimate blocker dependency
document summary detail example reason goal plan step result outcome issue fix patch
"""
_WORDS = _WORD_TEXT.split()
_TOPIC_TEXT = """deploy_checklist coding_style review_preferences oncall_runbook db_conventions
api_guidelines release_notes team_contacts incident_postmortem sprint_goals customer_context
tooling_setup branch_policy test_strategy"""
_TOPICS = _TOPIC_TEXT.split()
_TYPES = ("general", "feedback", "reference", "user")


def _sentence(rng: random.Random, words: int) -> str:
    body = " ".join(rng.choice(_WORDS) for _ in range(words))
    return body[0].upper() + body[1:] + "."


def _content(rng: random.Random, words: int = 80) -> str:
    parts, left = [], words
    while left > 0:
        n = min(left, rng.randint(8, 16))
        parts.append(_sentence(rng, n))
        left -= n
    return " ".join(parts)


@dataclass(frozen=True)
class Save:
    name: str
    content: str
    description: str
    type: str
    request_id: str


def make_workload(count: int, seed: int) -> tuple[list[Save], list[tuple[int, Save]]]:
    """``count`` creates, then ``count`` updates of existing memories (index, new fields)."""
    rng = random.Random(seed)
    creates = [
        Save(
            name=f"{rng.choice(_TOPICS)}_{i:05d}",
            content=_content(rng),
            description=_sentence(rng, 8),
            type=rng.choice(_TYPES),
            request_id=uuid.UUID(int=rng.getrandbits(128)).hex,
        )
        for i in range(count)
    ]
    updates = []
    for _ in range(count):
        i = rng.randrange(count)
        updates.append((i, Save(creates[i].name, _content(rng), _sentence(rng, 8), creates[i].type,
                                uuid.UUID(int=rng.getrandbits(128)).hex)))
    return creates, updates


@dataclass
class Stats(Latencies):
    @property
    def per_second(self) -> float:  # sequential, one path at a time: the summed latencies are its wall time
        return len(self.latencies_ns) / (sum(self.latencies_ns) / 1e9)


class Runner:
    """The three write paths against one freshly migrated database."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.database = services.database
        dialect = self.database.dialect
        self.insert = postgres_insert if dialect == "postgresql" else sqlite_insert
        self.ours_ns = Namespace("user", "bench-ours")
        self.raw_ns = Namespace("user", "bench-raw")
        self.events_ns = Namespace("user", "bench-events")
        self.raw_ids: dict[int, str] = {}
        self.raw_versions: dict[int, int] = {}
        bench_events.create(self.database.engine, checkfirst=True)
        # the baselines' statements are built once, as memoryd's are: no path pays for building one
        self.raw_insert = insert(structured_memories)
        upsert = self.insert(structured_memories)
        self.raw_upsert = upsert.on_conflict_do_update(
            index_elements=[structured_memories.c.memory_id],
            set_={c: upsert.excluded[c] for c in ("description", "type", "content", "updated", "last_accessed")},
        )
        self.raw_event_insert = insert(bench_events)

    def metadata(self, save: Save) -> EventMetadata:
        return EventMetadata(actor_user_id="bench-ours", token_id="bench-token", surface="rest",
                             client_ip="127.0.0.1", request_id=save.request_id)

    # -- memoryd ------------------------------------------------------------
    def ours(self, save: Save) -> None:
        command = SaveMemory.validated(name=save.name, content=save.content, description=save.description,
                                       type=save.type, max_content=REST_MAX_CONTENT,
                                       resolve_namespace=lambda: self.ours_ns)
        self.services.bus.handle(command, self.metadata(save))

    # -- raw structured_memories -------------------------------------------
    def raw_create(self, i: int, save: Save) -> None:
        now = utc_timestamp()
        memory_id = str(uuid.uuid4())
        row = {"memory_id": memory_id, "name": save.name, "description": save.description, "type": save.type,
               "scope": self.raw_ns.scope, "scope_id": self.raw_ns.scope_id, "content": save.content,
               "created": now, "updated": now, "last_accessed": now, "access_count": 0}
        with self.database.write() as conn:
            conn.execute(self.raw_insert, row)
        self.raw_ids[i] = memory_id

    def raw_update(self, i: int, save: Save) -> None:
        now = utc_timestamp()
        row = {"memory_id": self.raw_ids[i], "name": save.name, "description": save.description, "type": save.type,
               "scope": self.raw_ns.scope, "scope_id": self.raw_ns.scope_id, "content": save.content,
               "created": now, "updated": now, "last_accessed": now, "access_count": 0}
        with self.database.write() as conn:
            conn.execute(self.raw_upsert, row)

    # -- raw events ---------------------------------------------------------
    def raw_event(self, i: int, save: Save) -> None:
        now = utc_timestamp()
        version = self.raw_versions.get(i, 0) + 1
        memory = Memory(str(uuid.uuid4()), save.name, save.description, save.type, self.events_ns.scope, self.events_ns.scope_id,
                        save.content, now, now)
        row = {
            "stream_id": memory_stream_id(save.name, self.events_ns.scope, self.events_ns.scope_id),
            "stream_version": version,
            "event_type": MEMORY_SAVED if version == 1 else MEMORY_UPDATED,
            "schema_version": 1,
            "payload": {"memory": memory.to_dict()},
            "meta": self.metadata(save).to_dict(),
            "recorded_at": now + ".000000Z",
            "payload_sha256": PLACEHOLDER_HASH,  # the row as stored; computing the chain is memoryd's work
            "hash": PLACEHOLDER_HASH,
        }
        with self.database.write() as conn:
            conn.execute(self.raw_event_insert, row)
        self.raw_versions[i] = version


def _timed(stats: Stats, op: Callable[[int, Save], None], i: int, save: Save) -> None:
    start = time.perf_counter_ns()
    op(i, save)
    stats.latencies_ns.append(time.perf_counter_ns() - start)


def run_workload(runner: Runner, items: list[tuple[int, Save]], update: bool) -> dict[str, Stats]:
    results = {path: Stats() for path in PATHS}
    raw_memories = runner.raw_update if update else runner.raw_create
    ops: dict[str, Callable[[int, Save], None]] = {
        OURS: lambda _i, save: runner.ours(save),
        RAW_MEMORIES: raw_memories,
        RAW_EVENTS: runner.raw_event,
    }
    for chunk_number, start in enumerate(range(0, len(items), CHUNK)):
        chunk = items[start:start + CHUNK]
        order = PATHS[chunk_number % 3:] + PATHS[:chunk_number % 3]  # rotate who goes first
        for path in order:
            for i, save in chunk:
                _timed(results[path], ops[path], i, save)
    return results


@dataclass
class Breakdown:
    """Where memoryd's time goes: phase timings plus statement/commit/checkout counts."""

    phases: dict[str, list[int]] = field(default_factory=lambda: {"load": [], "append": [], "project": []})
    counts: Counter[str] = field(default_factory=Counter)
    saves: int = 0
    database_ns: int = 0  # inside the driver: every statement's execute, and the commit (the floor of a save)


@contextmanager
def instrumented(services: Services) -> Iterator[Breakdown]:
    """Wrap the store and projector of ``services`` (instance attributes only) and count SQL work."""
    breakdown = Breakdown()
    engine = services.database.engine

    def wrap(obj: Any, attr: str, phase: str) -> None:
        original = getattr(obj, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                breakdown.phases[phase].append(time.perf_counter_ns() - start)

        setattr(obj, attr, timed)

    def count(statement: str, where: str = "") -> None:
        breakdown.counts["statements"] += 1
        word = statement.lstrip().split(None, 1)[0].upper()
        if word == "SELECT" and "pg_advisory_xact_lock" in statement:
            word = "SELECT head, advisory lock"
        elif word == "SELECT" and "FOR UPDATE" in statement:
            word = "SELECT ... FOR UPDATE"
        elif word == "SELECT" and statement.strip().upper() == "SELECT 1":
            word = "SELECT 1 (pre-ping)"
        breakdown.counts[f"  {word}{where}"] += 1

    def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        count(statement)

    send_on_driver = driver._send

    def timed_on_driver(conn: Any, writes: list[Any], last: tuple[str, Any, Any] | None) -> None:
        """Every driver statement goes through ``_send``: deferred writes, then the one being run (or the
        ``COMMIT`` the deferred writes went with)."""
        start = time.perf_counter_ns()
        try:
            send_on_driver(conn, writes, last)
        finally:
            breakdown.database_ns += time.perf_counter_ns() - start
            for write in writes:
                count(write.sql, " (driver, deferred)")
            if last is not None and last[0] != "COMMIT":
                count(last[0], " (driver)")
            if len(writes) + (last is not None) > 1:
                breakdown.counts["sent together (one round trip)"] += 1

    def on_executed(conn: Any, *args: Any) -> None:
        breakdown.database_ns += time.perf_counter_ns() - conn.info.pop("bench_started")

    def on_started(conn: Any, *args: Any) -> None:
        conn.info["bench_started"] = time.perf_counter_ns()

    def on_commit(conn: Any) -> None:
        breakdown.counts["commits"] += 1

    commit = engine.dialect.do_commit

    def timed_commit(dbapi_connection: Any) -> None:
        start = time.perf_counter_ns()
        try:
            commit(dbapi_connection)
        finally:
            breakdown.database_ns += time.perf_counter_ns() - start

    def on_checkout(*args: Any) -> None:
        breakdown.counts["pool checkouts"] += 1

    wrap(services.store, "last_event", "load")
    wrap(services.store, "append", "append")
    wrap(services.projector, "step", "project")  # inside the save's transaction
    wrap(services.projector, "catch_up", "project")  # after its commit, when the step could not
    event.listen(engine, "before_cursor_execute", on_execute)
    event.listen(engine, "before_cursor_execute", on_started)
    event.listen(engine, "after_cursor_execute", on_executed)
    event.listen(engine, "commit", on_commit)
    event.listen(engine.pool, "checkout", on_checkout)
    engine.dialect.do_commit = timed_commit  # type: ignore[method-assign]
    driver._send = timed_on_driver
    try:
        yield breakdown
    finally:
        del engine.dialect.do_commit
        driver._send = send_on_driver
        event.remove(engine, "before_cursor_execute", on_execute)
        event.remove(engine, "before_cursor_execute", on_started)
        event.remove(engine, "after_cursor_execute", on_executed)
        event.remove(engine, "commit", on_commit)
        event.remove(engine.pool, "checkout", on_checkout)
        for attr in ("last_event", "append"):
            delattr(services.store, attr)
        delattr(services.projector, "step")
        delattr(services.projector, "catch_up")


def run_breakdown(services: Services, creates: list[Save]) -> list[str]:
    """A separate, instrumented pass of memoryd alone (not part of the side-by-side numbers)."""
    lines = []
    n = min(len(creates), 300)
    ns = Namespace("user", "bench-breakdown")
    first = creates[:n]
    again = [Save(s.name, s.content + " Updated.", s.description, s.type, s.request_id) for s in first]
    for label, saves in (("create", first), ("update", again)):
        with instrumented(services) as breakdown:
            total_start = time.perf_counter_ns()
            for save in saves:
                command = SaveMemory.validated(name=save.name, content=save.content, description=save.description,
                                               type=save.type, max_content=REST_MAX_CONTENT,
                                               resolve_namespace=lambda: ns)
                services.bus.handle(command, EventMetadata(request_id=save.request_id))
            total = (time.perf_counter_ns() - total_start) / n / 1e6
        lines.append(f"  {label} (n={n}): {total:.3f} ms/save in total")
        database = breakdown.database_ns / n / 1e6
        lines.append(f"    in the database (statements and commit, driver time) {database:.3f} ms/save = "
                     f"{database / total:.0%}")
        for phase, values in breakdown.phases.items():
            if not values:
                continue
            lines.append(f"    {phase:<10} mean {statistics.fmean(values) / 1e6:.3f} ms  p50 "
                         f"{statistics.median(values) / 1e6:.3f} ms")
        for key, value in sorted(breakdown.counts.items(), key=lambda kv: (kv[0].startswith("  "), kv[0])):
            lines.append(f"    {key:<26} {value / n:.2f} per save")
    if services.database.dialect == "postgresql":
        lines.append("    (statements seen by SQLAlchemy's cursor events: pool pre-pings and psycopg's own BEGIN "
                     "are not in them)")
    return lines


WAL_GROUPS = (("event_head", "head, checkpoints"), ("projection_checkpoints", "head, checkpoints"),
              ("sqlite_schema", "page 1 (the file grew)"), ("structured_memories", "read model"),
              ("memory_counts", "read model"), ("events", "log"), ("sqlite_sequence", "log"))


def wal_pages(services: Services, creates: list[Save]) -> list[str]:
    """SQLite: the pages each path writes to the WAL per save (a commit writes every page it changed, and its
    cost follows them), by what they belong to (``dbstat``), with automatic checkpoints off for the pass."""
    database_file = str(services.database.url.database)
    engine = services.database.engine

    def no_autocheckpoint(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA wal_autocheckpoint=0")

    runner = Runner(services)
    runner.ours_ns, runner.raw_ns, runner.events_ns = (Namespace("user", f"pages-{p}") for p in ("ours", "raw", "events"))
    again = [(i, Save(s.name, s.content + " Updated.", s.description, s.type, s.request_id))
             for i, s in enumerate(creates)]
    passes: list[tuple[str, Callable[[int, Save], None], list[tuple[int, Save]]]] = [
        ("create, memoryd", lambda _i, save: runner.ours(save), list(enumerate(creates))),
        ("create, raw memories", runner.raw_create, list(enumerate(creates))),
        ("create, raw events", runner.raw_event, list(enumerate(creates))),
        ("update, memoryd", lambda _i, save: runner.ours(save), again),
        ("update, raw memories", runner.raw_update, again),
    ]
    engine.dispose()  # connections made from here on take the pragma
    event.listen(engine, "connect", no_autocheckpoint)
    lines = []
    try:
        for label, op, items in passes:
            with sqlite3.connect(database_file) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for i, save in items:
                op(i, save)
            with sqlite3.connect(database_file) as conn:
                owners = dict(conn.execute("SELECT pageno, name FROM dbstat"))
            groups: Counter[str] = Counter(_wal_group(owners.get(page, "?")) for page in _wal_frames(database_file))
            per_save = {group: count / len(items) for group, count in groups.most_common()}
            lines.append(f"  {label:<21} {sum(per_save.values()):5.1f} pages/save: "
                         + ", ".join(f"{group} {count:.1f}" for group, count in per_save.items()))
    finally:
        event.remove(engine, "connect", no_autocheckpoint)
        engine.dispose()
    return lines



def replayed(services: Services, creates: list[Save]) -> list[str]:
    """SQLite: each path's time in the process beside its statements' alone: every statement a create ran
    (with its bound values) and its commit are recorded, then run again in pure ``sqlite3`` on a copy of
    the database as it stood before them. The difference is what a path spends outside the database
    (our Python, SQLAlchemy's, the engine's transaction)."""
    database_file = str(services.database.url.database)
    services.database.engine.dispose()
    with sqlite3.connect(database_file) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = database_file + ".replay"
    shutil.copyfile(database_file, copy)
    runner = Runner(services)
    runner.ours_ns, runner.raw_ns, runner.events_ns = (Namespace("user", f"replay-{p}") for p in ("ours", "raw", "events"))
    ops: dict[str, Callable[[int, Save], None]] = {OURS: lambda _i, save: runner.ours(save),
                                                    RAW_MEMORIES: runner.raw_create, RAW_EVENTS: runner.raw_event}
    statements: dict[str, list[list[tuple[str, Any]]]] = {path: [] for path in PATHS}
    in_process: dict[str, list[int]] = {path: [] for path in PATHS}
    ran: list[tuple[str, Any]] = []
    send = driver._send

    def recorded_send(conn: Any, writes: list[Any], last: tuple[str, Any, Any] | None) -> None:
        ran.extend((write.sql, write.bound) for write in writes)
        if last is not None and last[0] != "COMMIT":
            ran.append((last[0], last[1]))
        send(conn, writes, last)

    def on_execute(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        ran.append((statement, parameters))

    def on_commit(_conn: Any) -> None:
        ran.append(("COMMIT", None))

    engine = services.database.engine
    driver._send = recorded_send
    event.listen(engine, "before_cursor_execute", on_execute)
    event.listen(engine, "commit", on_commit)
    try:
        for i, save in enumerate(creates):
            for path in PATHS:
                ran.clear()
                start = time.perf_counter_ns()
                ops[path](i, save)
                in_process[path].append(time.perf_counter_ns() - start)
                statements[path].append(list(ran))
    finally:
        driver._send = send
        event.remove(engine, "before_cursor_execute", on_execute)
        event.remove(engine, "commit", on_commit)
    alone: dict[str, list[int]] = {path: [] for path in PATHS}
    conn = sqlite3.connect(copy, isolation_level=None)
    try:
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            conn.execute(f"PRAGMA {pragma}")
        for i in range(len(creates)):
            for path in PATHS:
                start = time.perf_counter_ns()
                for sql, parameters in statements[path][i]:
                    conn.execute(sql, () if parameters is None else parameters).fetchall()
                alone[path].append(time.perf_counter_ns() - start)
    finally:
        conn.close()
    mean = {path: (statistics.fmean(in_process[path]) / 1e3, statistics.fmean(alone[path]) / 1e3) for path in PATHS}
    lines = [f"  {path:<31} in the process {process:6.0f} µs, its statements alone {db:6.0f} µs, outside the "
             f"database {process - db:6.0f} µs" for path, (process, db) in mean.items()]
    for where, index in (("in the process", 0), ("the statements alone", 1)):
        lines.append(f"  ours / raw memories, {where}: {mean[RAW_MEMORIES][index] / mean[OURS][index]:.2f}")
    return lines

def _wal_frames(database_file: str) -> list[int]:
    """The page number of every frame in the database's WAL (header 32 bytes, each frame 24 + a page)."""
    data = Path(database_file + "-wal").read_bytes()
    if len(data) < 32:
        return []
    page_size = int.from_bytes(data[8:12], "big")
    return [int.from_bytes(data[offset:offset + 4], "big") for offset in range(32, len(data) - 23, 24 + page_size)]


def _wal_group(owner: str) -> str:
    return next((group for prefix, group in WAL_GROUPS if prefix in owner), "log" if "bench_events" in owner else owner)


@contextmanager
def sqlite_database() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-") as directory:
        yield f"sqlite:///{Path(directory) / 'bench.db'}"


@contextmanager
def postgres_database() -> Iterator[str]:
    with postgres_schema() as (_schema, url):
        yield url


def bench_backend(backend: str, count: int, breakdown: bool, pages: bool = False, replay: bool = False
                  ) -> tuple[list[tuple[str, str, Stats, float]], list[str]]:
    creates, updates = make_workload(count, SEED)
    warm_creates, _ = make_workload(WARMUP, SEED + 1)
    factory = sqlite_database if backend == "sqlite" else postgres_database
    with factory() as url:
        services = build_services(Config(storage=StorageSettings(database_url=url)))
        try:
            migrate.upgrade(services.database)
            notes = [f"{backend}: {server_version(services.database)}; dispatcher {type(services.bus.dispatcher).__name__}"]
            # Warm-up on its own names and indices (never counted).
            warm = Runner(services)
            warm.ours_ns, warm.raw_ns, warm.events_ns = (Namespace("user", f"warm-{p}") for p in ("ours", "raw", "events"))
            run_workload(warm, list(enumerate(warm_creates)), update=False)
            runner = Runner(services)
            rows = []
            others_before = other_sessions(services.database)
            started = time.perf_counter()
            for workload, items, update in (("create", list(enumerate(creates)), False), ("update", updates, True)):
                stats = run_workload(runner, items, update)
                ours = stats[OURS].per_second
                for path in PATHS:
                    rows.append((workload, path, stats[path], ours / stats[path].per_second))
            notes.append(f"{backend}: side-by-side run took {time.perf_counter() - started:.1f} s")
            if backend == "postgres":
                notes.append(f"{backend}: other client sessions on the database before/after: {others_before}/"
                             f"{other_sessions(services.database)}")
            if breakdown:
                notes.append(f"{backend}: memoryd breakdown (separate instrumented pass, overhead included):")
                notes.extend(run_breakdown(services, creates))
            if pages and backend == "sqlite":
                notes.append(f"{backend}: WAL pages per save (separate pass of {PAGES_PASS} saves per path, "
                             "automatic checkpoints off):")
                notes.extend(wal_pages(services, make_workload(PAGES_PASS, SEED + 2)[0]))
            if replay and backend == "sqlite":
                notes.append(f"{backend}: each path in the process and its statements replayed alone in sqlite3 (a "
                             f"separate pass of {REPLAY_PASS} creates per path, means):")
                notes.extend(replayed(services, make_workload(REPLAY_PASS, SEED + 3)[0]))
            return rows, notes
        finally:
            services.database.dispose()


def _nproc() -> str:
    try:
        return subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""  # environment() falls back to os.cpu_count()


def rounds_summary(rounds: list[list[tuple[str, str, str, Stats, float]]]) -> list[str]:
    """Per backend and workload over the rounds: ours / raw memories (saves/s), median and range, and ours
    against both raw inserts together (mean time per save, ours over the two baselines' sum)."""
    ratios: dict[tuple[str, str], list[float]] = {}
    floors: dict[tuple[str, str], list[float]] = {}
    for results in rounds:
        mean_ms = {(backend, workload, path): statistics.fmean(stats.latencies_ns) / 1e6
                   for backend, workload, path, stats, _ratio in results}
        for backend, workload, path, _stats, ratio in results:
            key = (backend, workload)
            if path == RAW_MEMORIES:
                ratios.setdefault(key, []).append(ratio)
                both = mean_ms[(backend, workload, RAW_MEMORIES)] + mean_ms[(backend, workload, RAW_EVENTS)]
                floors.setdefault(key, []).append(mean_ms[(backend, workload, OURS)] / both)
    lines = ["| backend | workload | rounds | ours / raw memories: median (min–max) | "
             "ours / (raw memories + raw events), time per save: median (min–max) |",
             "|---|---|---:|---:|---:|"]
    for (backend, workload), values in ratios.items():
        floor = floors[(backend, workload)]
        lines.append(f"| {backend} | {workload} | {len(values)} | {statistics.median(values):.2f} "
                     f"({min(values):.2f}–{max(values):.2f}) | {statistics.median(floor):.2f} "
                     f"({min(floor):.2f}–{max(floor):.2f}) |")
    return lines


def table(results: list[tuple[str, str, str, Stats, float]]) -> list[str]:
    lines = ["| backend | workload | path | n | saves/s | p50 ms | p95 ms | ours / this (saves/s) |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for backend, workload, path, stats, ratio in results:
        ratio_text = "1.00" if path == OURS else f"{ratio:.2f}"
        lines.append(f"| {backend} | {workload} | {path} | {len(stats.latencies_ns)} | {stats.per_second:,.0f} | "
                     f"{stats.percentile_ms(50):.3f} | {stats.percentile_ms(95):.3f} | {ratio_text} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--count", type=int, default=None,
                        help="memories per workload (default 2000 on sqlite, 1000 on postgres)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also run an instrumented memoryd-only pass: phase timings, statements, commits per save")
    parser.add_argument("--pages", action="store_true",
                        help="SQLite: also count the WAL pages each path writes per save, by table and index")
    parser.add_argument("--replay", action="store_true",
                        help="SQLite: also replay each path's statements alone in sqlite3 (what it spends outside "
                             "the database)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="side-by-side runs, each on a fresh database (a summary of the ratios over them)")
    args = parser.parse_args(argv)
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)

    print_header(__file__, argv, environment(f"sqlite3 lib {sqlite3.sqlite_version}", nproc=_nproc(), list_changed=False,
                                             load_note="other work on the machine skews absolute numbers more than ratios"))
    print(f"# seed {SEED}, chunk {CHUNK} (paths interleaved, rotating order), warm-up {WARMUP} per path, "
          "one transaction per save on every path")
    rounds: list[list[tuple[str, str, str, Stats, float]]] = [[] for _ in range(max(args.rounds, 1))]
    notes = []
    for backend in backends:
        count = args.count or DEFAULT_COUNT[backend]
        for number, results in enumerate(rounds):
            rows, backend_notes = bench_backend(backend, count, args.breakdown and number == 0, args.pages and number == 0,
                                                 args.replay and number == 0)
            results.extend((backend, *row) for row in rows)
            notes.extend(backend_notes if number == 0 else backend_notes[1:])  # the server's line once
    lines = table(rounds[0])
    if len(rounds) > 1:
        lines += ["", f"Over {len(rounds)} rounds (the table above is the first):", "", *rounds_summary(rounds)]
    print_results(lines, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
