"""The auditor's commands over a long log: ``memoryd audit verify`` and ``memoryd projections verify``, time and
peak memory, each beside the baseline it names.

Builds a log of ``--count`` saves (the synthetic corpus of ``bench/search/corpus.py``; 1,000 per append
transaction, through ``EventStore.append_many``, so every event is sealed into the chain), projects it
and stores a search snapshot, as a service with workers would have. Then each command runs in a
process of its own, its peak RSS read from ``/proc/self/status`` (``VmHWM``) at its exit:

* ``audit verify`` beside a **raw read of the log** (the same pages of ``SELECT * FROM events``, rows
  decoded, nothing hashed): the ratio is what checking the chain adds to reading it;
* ``projections verify`` beside ``projections rebuild table`` (the same replay into the live table,
  nothing compared) plus ``projections rebuild search`` (the same index build): the ratio is what the
  scratch copies and the comparison add.

    .venv/bin/python bench/bench_audit.py                    # 1,000,000 events, SQLite file
    .venv/bin/python bench/bench_audit.py --count 100000 --backend postgres
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "search"))

from common import postgres_schema  # noqa: E402
from corpus import CorpusSpec, generate  # noqa: E402

from events.types import EventMetadata, MemorySaved, memory_stream_id  # noqa: E402
from memoryd.bootstrap import build_services  # noqa: E402
from memoryd.kernel.config import Config, StorageSettings  # noqa: E402
from memoryd.kernel.domain import Memory, utc_timestamp  # noqa: E402
from memoryd.storage import migrate  # noqa: E402

CHUNK = 1_000
# Runs one memoryd command in this process and reports its peak RSS on the last stderr line: VmHWM, which
# (unlike getrusage's ru_maxrss, kept across exec) starts afresh in the new program, not at the parent's.
PEAK = "print(next(line.replace('VmHWM:', 'maxrss_kb').replace('kB', '') for line in open('/proc/self/status') " \
       "if line.startswith('VmHWM')), file=sys.stderr)"
RUN_COMMAND = f"""
import sys
from memoryd.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
finally:
    {PEAK}
"""
RAW_READ = """
import sys
from memoryd.storage.db import Database
from memoryd.storage.schema import events
from sqlalchemy import select
database, position, rows = Database(sys.argv[1]), 0, 0
while True:
    with database.read() as conn:
        page = conn.execute(select(events).where(events.c.position > position).order_by(events.c.position).limit(5000)).all()
    if not page:
        break
    rows, position = rows + len(page), page[-1].position
print(f"read {rows} events", file=sys.stderr)
""" + PEAK


def build(url: str, count: int) -> None:
    services = build_services(Config(storage=StorageSettings(database_url=url)))
    migrate.upgrade(services.database)
    corpus = generate(CorpusSpec(count=count, seed=42))
    start, metadata = dt.datetime(2025, 1, 1, tzinfo=dt.UTC), EventMetadata(actor_user_id="bench", surface="bench")
    chunk: list[tuple[str, int, MemorySaved]] = []
    began = time.perf_counter()
    for number, fields in enumerate(corpus.memories()):
        moment = utc_timestamp(start + dt.timedelta(seconds=number))
        memory = Memory(str(uuid.UUID(int=number + 1)), fields["name"], fields["description"], fields["type"],
                        fields["scope"], fields["scope_id"], fields["content"], moment, moment)
        chunk.append((memory_stream_id(memory.name, memory.scope, memory.scope_id), 1, MemorySaved(memory)))
        if len(chunk) == CHUNK:
            services.store.append_many(chunk, metadata)
            chunk = []
    if chunk:
        services.store.append_many(chunk, metadata)
    print(f"# appended {count:,} events in {time.perf_counter() - began:.0f} s", flush=True)
    began = time.perf_counter()
    services.projector.catch_up()
    print(f"# projected them in {time.perf_counter() - began:.0f} s", flush=True)
    began = time.perf_counter()
    services.search.rebuild()
    services.search.save_snapshot()
    print(f"# built and stored the search snapshot in {time.perf_counter() - began:.0f} s", flush=True)
    services.database.dispose()


def timed(url: str, script: str, *args: str) -> tuple[float, float, str]:
    """Seconds, peak RSS in MiB, and the last line of output other than the RSS, of one process."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT,
                          env=os.environ | {"MEMORYD_DATABASE_URL": url, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - began
    lines = (done.stdout + done.stderr).strip().splitlines()
    rss = next(int(line.split()[1]) for line in reversed(lines) if line.startswith("maxrss_kb"))
    said = [line for line in lines if not line.startswith("maxrss_kb")]
    if done.returncode != 0:
        raise SystemExit(f"{args or 'raw read'} failed:\n" + "\n".join(said[-20:]))
    return seconds, rss / 1024, said[-1] if said else ""


def run(url: str, backend: str, count: int) -> list[str]:
    build(url, count)
    rows = []
    verify = timed(url, RUN_COMMAND, "audit", "verify", "--quiet")
    raw = timed(url, RAW_READ, url)
    rows.append(f"| {backend} | {count:,} | `audit verify` | {verify[0]:.1f} | {verify[1]:.0f} | raw read of the log | "
                f"{raw[0]:.1f} | {raw[1]:.0f} | {verify[0] / raw[0]:.1f}x |")
    projections = timed(url, RUN_COMMAND, "projections", "verify")
    table = timed(url, RUN_COMMAND, "projections", "rebuild", "table")
    search = timed(url, RUN_COMMAND, "projections", "rebuild", "search")
    rows.append(f"| {backend} | {count:,} | `projections verify` | {projections[0]:.1f} | {projections[1]:.0f} | "
                f"`projections rebuild table` + `search` | {table[0] + search[0]:.1f} | {max(table[1], search[1]):.0f} | "
                f"{projections[0] / (table[0] + search[0]):.1f}x |")
    print(f"# audit verify said: {verify[2]}")
    print(f"# projections verify said: {projections[2]}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite")
    args = parser.parse_args()
    print(f"# python {sys.version.split()[0]}, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    rows = ["| backend | events | command | s | peak RSS MiB | baseline | s | peak RSS MiB | command / baseline (time) |",
            "|---|---|---|---|---|---|---|---|---|"]
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as directory:
            rows += run(f"sqlite:///{Path(directory) / 'memoryd.db'}", "sqlite", args.count)
    if args.backend in ("postgres", "both"):
        with postgres_schema("audit") as (_, url):
            rows += run(url, "postgres", args.count)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
