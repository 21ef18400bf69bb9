"""What the benchmark scripts in ``bench/`` share: settings, a fresh PostgreSQL
schema, the header lines that describe the run, percentiles, and the
benchmark copy of the ``events`` table.

Imported by ``bench_saves.py``, ``bench_appends.py`` and
``bench_projection_lag.py`` (run from the repo root, e.g.
``.venv/bin/python bench/bench_saves.py``; Python puts ``bench/`` on the
path, each script adds the repo root for ``memoryd``).
"""

from __future__ import annotations

import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for memoryd (the scripts did it already)

import sqlalchemy
from sqlalchemy import MetaData, Table, create_engine, text

from memoryd.storage.db import Database
from memoryd.storage.schema import events

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261130
PLACEHOLDER_HASH = "0" * 64  # a digest column's value in a baseline's row: computing the chain is memoryd's work
POSTGRES_URL = os.environ.get("MEMORYD_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# Every session a bench opens itself carries this name, so other_sessions() can leave them out.
APPLICATION_NAME = "memoryd-bench"


# -- the events-only baseline's table ------------------------------------------

def _copy_of_events(name: str) -> Table:
    """``events`` under another name: the same columns, types, keys and table options, built from
    ``memoryd.storage.schema.events`` so it cannot drift from it. Constraint and index names get the new table
    name too (PostgreSQL and SQLite want index names unique per schema, and ``events`` is next to it)."""
    table = events.to_metadata(MetaData(), name=name)
    for item in (*table.constraints, *table.indexes):
        if isinstance(item.name, str):
            item.name = item.name.replace(events.name, name, 1) if events.name in item.name else f"{name}_{item.name}"
    return table


bench_events = _copy_of_events("bench_events")


# -- PostgreSQL ----------------------------------------------------------------

@contextmanager
def postgres_schema(label: str = "", *, tag_sessions: bool = True) -> Iterator[tuple[str, str]]:
    """A fresh schema in ``POSTGRES_URL``'s database, dropped (with everything in it) on the way out.

    Yields ``(schema, url)``: ``url`` is ``POSTGRES_URL`` with the schema as its ``search_path`` and,
    with ``tag_sessions``, ``application_name=APPLICATION_NAME``."""
    schema = f"memoryd_bench_{label}_{uuid.uuid4().hex[:10]}" if label else f"memoryd_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT", connect_args={"application_name": APPLICATION_NAME})
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
        yield schema, url + (f"&application_name={APPLICATION_NAME}" if tag_sessions else "")
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def other_sessions(database: Database) -> int:
    """Client sessions on the same PostgreSQL database besides the benches' own (0 on SQLite)."""
    if database.dialect != "postgresql":
        return 0
    query = text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 "AND backend_type = 'client backend' AND application_name <> :ours")
    with database.read() as conn:
        return int(conn.execute(query, {"ours": APPLICATION_NAME}).scalar_one())


def server_version(database: Database, settings: Sequence[str] = ("synchronous_commit", "fsync")) -> str:
    """``PostgreSQL 15.x (synchronous_commit=on, fsync=on)`` with the ``SHOW`` value of each of
    ``settings``; on SQLite the library version, journal mode and synchronous level."""
    with database.read() as conn:
        if database.dialect == "postgresql":
            values = {name: conn.execute(text(f"SHOW {name}")).scalar() for name in ("server_version", *settings)}
            version = values.pop("server_version")
            return f"PostgreSQL {version} (" + ", ".join(f"{k}={v}" for k, v in values.items()) + ")"
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        synchronous = conn.exec_driver_sql("PRAGMA synchronous").scalar()
        return f"SQLite {sqlite3.sqlite_version} (journal_mode={journal}, synchronous={synchronous})"


# -- what the run ran on ---------------------------------------------------------

def environment(*versions: str, nproc: str | None = None, load_note: str = "",
                list_changed: bool = True) -> list[str]:
    """The header lines: versions (python, SQLAlchemy, psycopg, then ``versions``), the machine
    (``nproc`` or ``os.cpu_count()``), the load average (with `` (load_note)``), the git revision."""
    import psycopg

    return [
        ", ".join([f"python {platform.python_version()} ({platform.python_implementation()})",
                   f"SQLAlchemy {sqlalchemy.__version__}", f"psycopg {psycopg.__version__}", *versions]),
        f"nproc {nproc or os.cpu_count()}, {platform.system()} {platform.release()} {platform.machine()}",
        load_average() + (f" ({load_note})" if load_note else ""),
        revision(list_changed),
    ]


def revision(list_changed: bool = True) -> str:
    """``code: git <short HEAD>``, plus how many tracked files outside ``bench/`` have uncommitted
    changes (and, with ``list_changed``, which)."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "code: not a git checkout"
    changed = [line[3:] for line in dirty if line.strip() and not line[3:].startswith("bench/")]
    if not changed:
        return f"code: git {head}"
    listed = f" ({', '.join(changed)})" if list_changed else ""
    return f"code: git {head} + uncommitted changes in {len(changed)} files{listed}"


def load_average(label: str = "load average") -> str:
    one, five, fifteen = os.getloadavg()
    return f"{label} {one:.2f} {five:.2f} {fifteen:.2f}"


def print_header(script: str, argv: list[str] | None, lines: Sequence[str]) -> None:
    """``# <name>: bench/<script's path under it> <arguments>``, then one ``# `` line each of ``lines``."""
    arguments = argv if argv is not None else sys.argv[1:]
    path = Path(script).resolve().relative_to(ROOT)
    print(f"# {path.stem}: " + " ".join([str(path), *arguments]))
    for line in lines:
        print("# " + line)


def print_results(table: Sequence[str], notes: Sequence[str]) -> None:
    """The table's lines between blank lines, one ``#`` line a note (a note indented by two spaces keeps
    its indent: ``#  ...``), then the load average at the end."""
    print()
    print("\n".join(table))
    print()
    for note in [*notes, load_average("load average at the end:")]:
        print("# " + note if not note.startswith("  ") else "#" + note)


# -- numbers ---------------------------------------------------------------------

def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (1 to 99) of two values or more (``statistics.quantiles``, inclusive)."""
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclass
class Latencies:
    """Per-operation latencies in ns; the scripts' ``Stats`` add how they count operations per second."""

    latencies_ns: list[int] = field(default_factory=list)

    def percentile_ms(self, q: int) -> float:
        return percentile(self.latencies_ns, q) / 1e6


# -- content ---------------------------------------------------------------------

_WORD_TEXT = """the a of to and in for on with that this deploy release staging production rollback migration
schema index query latency cache token user project agent memory context review feedback decision note
prefers always never before after because should avoid keep check test build pipeline branch commit
config flag timeout retry queue worker job event log metric alert database postgres lock transaction"""
WORDS = _WORD_TEXT.split()


def memory_content(rng: random.Random, words: int = 80) -> str:
    """``words`` random words from ``WORDS`` as one capitalized sentence."""
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."
