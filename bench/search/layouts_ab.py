"""An earlier index (by default the first layout, git 51bcebf) vs the current one, side by side.

Both are built in one process from the same corpus (1,000,000 memories in 1,000 user
namespaces by default), then take the same 6,000 operations (adds, replaces, deletes in
turn) in interleaved blocks of 60, each apply timed alone; then, their background merges
settled, the same queries for a one-namespace caller and for the admin, interleaved. The
earlier index is loaded from git (``git show REV:projections/search_index.py``; it was one
module until the package), so this needs a git checkout.

    .venv/bin/python bench/search/layouts_ab.py                 # ~10 min, ~9 GB peak
    .venv/bin/python bench/search/layouts_ab.py --count 100000  # quick
    .venv/bin/python bench/search/layouts_ab.py --baseline ef6ac99 --count 230000 --namespaces 200
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import bench_index as bi
from corpus import CorpusSpec, generate, make_queries, namespace_id

import projections.search as segments
import projections.search.ranking
from projections.filters import MemoryFilter, ScopePattern

FIRST_LAYOUT = "51bcebf"


def earlier_layout(revision: str) -> types.ModuleType:
    source = subprocess.run(["git", "show", f"{revision}:projections/search_index.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = sys.modules["earlier_layout"] = types.ModuleType("earlier_layout")  # dataclasses look modules up
    sys.modules.setdefault("projections.ranking", projections.search.ranking)  # where that layout imports it from
    exec(compile(source, f"{revision}:projections/search_index.py", "exec"), module.__dict__)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--namespaces", type=int, default=1_000)
    parser.add_argument("--operations", type=int, default=6_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--baseline", default=FIRST_LAYOUT, help="the git revision of the earlier index")
    args = parser.parse_args()
    layouts = {f"layout at {args.baseline}": earlier_layout(args.baseline), "current": segments}
    corpus = generate(CorpusSpec(count=args.count, seed=args.seed, namespaces=args.namespaces))
    memories = bi.Memories(corpus)
    fresh = bi.Memories(generate(CorpusSpec(count=args.operations, seed=args.seed + 1, namespaces=args.namespaces)),
                        family=9, time_offset=args.count)
    print(f"# layouts_ab.py: {args.count:,} memories in {args.namespaces:,} namespaces, load {bi.load()}\n")
    indexes = {}
    for name, module in layouts.items():
        started = time.perf_counter()
        index = indexes[name] = module.SearchIndex()
        with index.bulk():
            for i in range(args.count):
                index.apply(bi.recorded(i + 1, bi.MEMORY_SAVED, memories.record(i)))
        print(f"- {name}: built in {time.perf_counter() - started:.0f} s")
    gc.collect()
    gc.freeze()
    rng = np.random.default_rng(args.seed)
    victims = rng.choice(args.count, args.operations, replace=False).tolist()
    operations, position = [], args.count
    for j in range(args.operations):
        position += 1
        kind = ("add", "replace", "delete")[j % 3]
        if kind == "add":
            event = bi.recorded(position, bi.MEMORY_SAVED, fresh.record(j, bi.memory_id(j, 9)))
        elif kind == "replace":
            old = memories.record(victims.pop())
            event = bi.recorded(position, bi.MEMORY_UPDATED, fresh.record(
                j, old["memory_id"], name=old["name"], scope=(old["scope"], old["scope_id"])))
        else:
            event = bi.recorded(position, bi.MEMORY_DELETED, memories.record(victims.pop()))
        operations.append((kind, event))
    applies: dict[tuple[str, str], list[float]] = {(n, k): [] for n in indexes for k in ("add", "replace", "delete")}
    gc.disable()
    for block in range(0, len(operations), 60):
        names = list(indexes) if (block // 60) % 2 else list(reversed(indexes))
        for name in names:
            for kind, event in operations[block:block + 60]:
                t0 = time.perf_counter_ns()
                indexes[name].apply(event)
                applies[(name, kind)].append((time.perf_counter_ns() - t0) / 1e6)
    gc.enable()
    for index in indexes.values():
        if hasattr(index, "wait_for_merges"):  # the first layout had no background merges
            index.wait_for_merges()
    first, second = indexes
    print(f"\n| apply | {first} p50 / p95 ms | {second} p50 / p95 ms |\n|---|---:|---:|")
    for kind in ("add", "replace", "delete"):
        a, b = applies[(first, kind)], applies[(second, kind)]
        print(f"| {kind} ({len(a):,}) | {bi.pct(a, 50):.3f} / {bi.pct(a, 95):.3f} | "
              f"{bi.pct(b, 50):.3f} / {bi.pct(b, 95):.3f} |")
    queries = make_queries(CorpusSpec(count=args.count, seed=args.seed, namespaces=args.namespaces), 200)
    callers = rng.choice(args.namespaces, len(queries))
    searches: dict[tuple[str, str], list[float]] = {(n, w): [] for n in indexes for w in ("caller", "admin")}
    gc.disable()
    for k, query in enumerate(queries):
        caller = MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", namespace_id(int(callers[k])))))
        for name in (list(indexes) if k % 2 else list(reversed(indexes))):
            for who, where in (("caller", caller), ("admin", MemoryFilter(scopes=None))):
                if who == "admin" and k >= 100:
                    continue
                t0 = time.perf_counter_ns()
                indexes[name].search(where, query, bi.TOP)
                searches[(name, who)].append((time.perf_counter_ns() - t0) / 1e6)
    gc.enable()
    print(f"\n| search after the {args.operations:,} operations | {first} p50 / p95 ms | {second} p50 / p95 ms |"
          "\n|---|---:|---:|")
    for who in ("caller", "admin"):
        a, b = searches[(first, who)], searches[(second, who)]
        print(f"| {who} ({len(a)} queries) | {bi.pct(a, 50):.2f} / {bi.pct(a, 95):.2f} | "
              f"{bi.pct(b, 50):.2f} / {bi.pct(b, 95):.2f} |")
    for name, index in indexes.items():
        print(f"\n{name} after: {index.shape() if hasattr(index, 'shape') else len(index)}")
    print(f"\nload {bi.load()}")


if __name__ == "__main__":
    main()
