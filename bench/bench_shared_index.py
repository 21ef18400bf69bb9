"""One search index per host (issue 15, goal 4): API processes mapping one snapshot file, against private copies.

Builds an index of the synthetic corpus (default 1,000,000 memories in 1,000 user
namespaces, ``bench/search/corpus.py``) and stores it as the search snapshot of a
SQLite database, then starts real processes that each build the service
(``memoryd.bootstrap.build_services``) and serve searches from it, and measures
them side by side in one run:

* **mapped** (ours): every process maps this host's file of the snapshot; the first
  one on the host writes the file from the database, the others find it.
* **private copy** (the baseline: what every process did before): the same
  snapshot read into each process's own memory (the service's fallback when it
  cannot write the file, forced here with an unwritable snapshot directory).

For each, one process alone and then four at once: RSS and PSS from
``/proc/PID/smaps_rollup`` after each process ran its searches (a caller seeing one
namespace and an admin seeing everything, which touch the postings), and the time
from spawning the process to its first answered search.

The index is filled directly rather than through the log (a log of 1,000,000
saves takes the better part of an hour to write) and stored as the snapshot of a
one-event log, so the processes start through the service's real path: the
snapshot row, the file, its checksum, the log hash, the catch-up.

    .venv/bin/python bench/bench_shared_index.py                  # 1,000,000 (~4 min, ~6 GB peak to build)
    .venv/bin/python bench/bench_shared_index.py --count 100000   # quicker
    .venv/bin/python bench/bench_shared_index.py --work DIR       # keep the database in DIR, reuse it next time
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench" / "search")]

QUERIES = 200  # searches each process runs before it is measured


def build(args: argparse.Namespace, url: str) -> dict[str, Any]:
    """A database whose stored snapshot holds the whole corpus; what was built."""
    from bench_index import Memories, build_index
    from corpus import CorpusSpec, generate
    from sqlalchemy import insert

    from commands.model import SaveMemory
    from events.types import EventMetadata
    from memoryd.bootstrap import build_services
    from memoryd.kernel.config import Config, StorageSettings
    from memoryd.kernel.domain import Namespace, utc_timestamp
    from memoryd.storage import migrate
    from memoryd.storage.schema import search_snapshots

    started = time.perf_counter()
    corpus = generate(CorpusSpec(count=args.count, namespaces=args.namespaces), progress=True)
    built = build_index(Memories(corpus), label="index")
    services = build_services(Config(storage=StorageSettings(database_url=url)))
    migrate.upgrade(services.database)
    services.bus.handle(SaveMemory("bench_note", "the one event of this log", "d", None, Namespace("global", "")),
                        EventMetadata())
    event = services.store.event_at(1)
    assert event is not None
    built.index.position = 1  # the snapshot of this one-event log (see the module's docstring)
    blob = built.index.to_bytes(event.hash)
    with services.database.write() as conn:
        conn.execute(insert(search_snapshots).values(position=1, created=utc_timestamp(), data=blob))
    services.database.dispose()
    return {"memories": len(built.index), "snapshot_bytes": len(blob), "build_s": time.perf_counter() - started}


def child(args: argparse.Namespace) -> None:
    """One API process as gunicorn starts one (``import api.wsgi``: imports, services, schema check, the index's
    warm-up), answering a first search, then the rest; it reports and waits to be measured."""
    os.environ |= {"MEMORYD_DATABASE_URL": args.database, "MEMORYD_SNAPSHOT_DIR": args.snapshot_dir}
    queries = json.loads(Path(args.queries).read_text())
    import api.wsgi

    imported = time.time()
    from corpus import namespace_id

    from projections.filters import MemoryFilter, ScopePattern

    services = api.wsgi._services
    caller = MemoryFilter(scopes=(ScopePattern("user", namespace_id(os.getpid() % args.namespaces)),
                                  ScopePattern("global")))
    first = services.search.search(caller, queries[0], 10)
    serving = time.time()
    timings = []
    for number, query in enumerate(queries):
        where = MemoryFilter() if number % 10 == 0 else caller  # an admin search every tenth: all postings
        begun = time.perf_counter()
        services.search.search(where, query, 10)
        timings.append(time.perf_counter() - begun)
    print(json.dumps({"serving": serving, "imported": imported, "hits": len(first),
                      "memories": len(services.search.catch_up()), "p50_ms": statistics.median(timings) * 1000}),
          flush=True)
    sys.stdin.read()  # until the parent has measured


def smaps(pid: int) -> dict[str, int]:
    """Rss, Pss and the rest of /proc/PID/smaps_rollup, in bytes."""
    found = {}
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                found[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return found


def run(args: argparse.Namespace, url: str, snapshot_dir: str, processes: int) -> dict[str, Any]:
    """Start ``processes`` API processes at once; their start times and memory once all have searched."""
    command = [sys.executable, __file__, "--child", "--database", url, "--snapshot-dir", snapshot_dir,
               "--namespaces", str(args.namespaces), "--queries", args.queries]
    spawned, children = [], []
    for _ in range(processes):
        spawned.append(time.time())
        children.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    reports = [json.loads(process.stdout.readline()) for process in children]  # type: ignore[union-attr]
    measured = [smaps(process.pid) for process in children]
    for process in children:
        process.communicate("")
    return {"start_s": [report["serving"] - at for report, at in zip(reports, spawned)],
            "imports_s": [report["imported"] - at for report, at in zip(reports, spawned)],
            "rss": sum(m["Rss"] for m in measured), "pss": sum(m["Pss"] for m in measured),
            "private": sum(m.get("Private_Clean", 0) + m.get("Private_Dirty", 0) for m in measured),
            "p50_ms": statistics.median(report["p50_ms"] for report in reports),
            "memories": reports[0]["memories"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--namespaces", type=int, default=1_000)
    parser.add_argument("--work", help="keep the database here and reuse it (default: a temporary directory)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--snapshot-dir", help=argparse.SUPPRESS)
    parser.add_argument("--queries", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="memoryd-bench-shared-"))
    work.mkdir(parents=True, exist_ok=True)
    database = work / f"memoryd-{args.count}-{args.namespaces}.db"
    url = f"sqlite:///{database}"
    print(f"# One index per host: {args.count:,} memories in {args.namespaces:,} namespaces, "
          f"{os.cpu_count()} cores, load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    if not database.exists():
        built = build(args, url)
        print(f"- built and stored: {built['memories']:,} memories, snapshot {built['snapshot_bytes'] / 1e6:,.1f} MB, "
              f"in {built['build_s']:.0f} s")
    from corpus import CorpusSpec, make_queries

    args.queries = str(work / "queries.json")
    Path(args.queries).write_text(json.dumps(make_queries(CorpusSpec(count=args.count, namespaces=args.namespaces),
                                                          QUERIES)))
    files = work / "snapshots"
    blocked = work / "no-snapshot-directory"  # a file where the directory should be: the private-copy fallback
    blocked.write_text("the baseline: every process reads the snapshot into its own memory\n")
    rows: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    for label, directory, fresh in (("mapped, file written by the first process", files, True),
                                    ("mapped, file already on the host", files, False),
                                    ("private copy in each process (baseline)", blocked / "search", False)):
        if fresh:
            shutil.rmtree(files, ignore_errors=True)
        one = run(args, url, str(directory), 1)
        four = None if fresh else run(args, url, str(directory), 4)
        rows.append((label, one, four))
        print(f"  {label}: done", file=sys.stderr, flush=True)
    print(f"- processes served {rows[0][1]['memories']:,} memories each; every one ran {QUERIES} searches "
          f"(one in ten an admin's, over everything) before it was measured\n")
    print("| processes start from | 1 process: RSS / PSS MB | 4 processes: RSS / PSS MB (sum) | 4 vs 1 (PSS) "
          "| start to first search, s (1; 4 at once: max) | of which `import api.wsgi` (1) | search p50 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, one, four in rows:
        if four is None:
            print(f"| {label} | {one['rss'] / 1e6:,.0f} / {one['pss'] / 1e6:,.0f} | | | {one['start_s'][0]:.2f} | "
                  f"{one['imports_s'][0]:.2f} | {one['p50_ms']:.2f} |")
            continue
        print(f"| {label} | {one['rss'] / 1e6:,.0f} / {one['pss'] / 1e6:,.0f} | {four['rss'] / 1e6:,.0f} / "
              f"{four['pss'] / 1e6:,.0f} | **{four['pss'] / one['pss']:.2f}x** | {one['start_s'][0]:.2f}; "
              f"{max(four['start_s']):.2f} | {one['imports_s'][0]:.2f} | {four['p50_ms']:.2f} |")
    (_, mapped_one, mapped_four), (_, private_one, private_four) = rows[1], rows[2]
    assert mapped_four is not None and private_four is not None
    print(f"\n4 processes mapping the file use {mapped_four['pss'] / mapped_one['pss']:.2f}x the PSS of one "
          f"(target <= 1.5x); with private copies {private_four['pss'] / private_one['pss']:.2f}x. Four mapped "
          f"processes hold {mapped_four['pss'] / private_four['pss']:.2f}x the memory of four private ones.")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
