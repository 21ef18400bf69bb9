"""Pruning on vs off: the same index, the same queries, side by side in one process.

``SearchIndex`` scores a query's rarest words first and, once the words still to come
cannot lift an unscored memory into the top, looks the common words up only for the
memories that still can (MaxScore; ``projections/search/scoring.py``). Tuning the
index's ``prune_from`` to infinity turns that off: every posting of every word is
scored. This runs both on one built index, query by query in alternating order, checks
that each answer is identical (ids, order and scores), and prints p50/p95 and the ratio.

    .venv/bin/python bench/search/pruning_ab.py                                     # 100,000 all visible, ~1 min
    .venv/bin/python bench/search/pruning_ab.py --count 1000000 --namespaces 1000   # admin + one-namespace caller, ~3 min
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import bench_index as bi
from corpus import CorpusSpec, generate, make_queries, namespace_id

from projections.filters import MemoryFilter, ScopePattern
from projections.search import SearchIndex


@contextmanager
def pruning(index: SearchIndex, on: bool) -> Iterator[None]:
    saved = index.tuning
    index.tuning = saved if on else dataclasses.replace(saved, prune_from=math.inf)
    try:
        yield
    finally:
        index.tuning = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--namespaces", type=int, default=0, help="0: all global (one caller sees everything)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    spec = CorpusSpec(count=args.count, seed=args.seed, namespaces=args.namespaces)
    print(f"# pruning_ab.py: {args.count:,} memories, {args.namespaces or 'no'} user namespaces, "
          f"load {bi.load()}\n")
    build = bi.build_index(bi.Memories(generate(spec)))
    index = build.index
    print(f"- index built in {build.build_s:.0f} s: {index.shape()}")
    queries = make_queries(spec, args.queries)
    callers = {"all visible (admin)": lambda k: MemoryFilter(scopes=None)}
    if args.namespaces:
        callers["one namespace + global (caller)"] = lambda k: MemoryFilter(
            scopes=(ScopePattern("global"), ScopePattern("user", namespace_id(k % args.namespaces))))
    times: dict[tuple[str, bool], list[float]] = {(who, on): [] for who in callers for on in (True, False)}
    pruned = dict.fromkeys(callers, 0)
    gc.collect()
    gc.disable()
    for k, query in enumerate(queries):
        for who, where_of in callers.items():
            where, answers = where_of(k), {}
            for on in ((True, False) if k % 2 else (False, True)):
                with pruning(index, on):
                    started = time.perf_counter_ns()
                    hits = index.search(where, query, bi.TOP)
                    times[(who, on)].append((time.perf_counter_ns() - started) / 1e6)
                answers[on] = [(hit.memory_id, hit.score) for hit in hits]
            assert answers[True] == answers[False], f"pruning changed the answer to {query!r} for {who}"
            before = index.shape().lookups  # an untimed pass: did this query prune?
            index.search(where, query, bi.TOP)
            pruned[who] += index.shape().lookups > before
    gc.enable()
    print(f"- {len(queries)} queries (3-12 words, as they come), top {bi.TOP}; every answer identical with and "
          "without pruning\n")
    print("| searched | queries that looked common words up | pruning off p50 / p95 ms | "
          "pruning on p50 / p95 ms | off / on p50 | off / on p95 |")
    print("|---|---:|---:|---:|---:|---:|")
    for who in callers:
        off, on = times[(who, False)], times[(who, True)]
        print(f"| {who} | {pruned[who]} of {len(queries)} | {bi.pct(off, 50):.2f} / {bi.pct(off, 95):.2f} | "
              f"{bi.pct(on, 50):.2f} / {bi.pct(on, 95):.2f} | {bi.pct(off, 50) / bi.pct(on, 50):.2f}× | "
              f"{bi.pct(off, 95) / bi.pct(on, 95):.2f}× |")
    print(f"\nload {bi.load()}")


if __name__ == "__main__":
    main()
