"""The search index of two checkouts in one process, query by query, for A/B runs across revisions.

``revision_ab.py`` runs each checkout in its own process, where machine noise between the runs is
as large as most differences. This loads both checkouts' ``projections``, ``events`` and ``memoryd``
packages into one process (one after the other, each under its own module objects), builds the
same 100,000 synthetic memories over 100 user namespaces into each, and times the same queries
(top 20) for a caller seeing global plus one namespace and for an admin, alternating which
checkout goes first so neither always runs on the other's warm caches. Twice: with each index
merged into one segment (the same shape on both sides, so only the code differs), and as the
live index leaves it after its merges (whose part count depends on thread timing).

    git worktree add ../before REV
    .venv/bin/python bench/search/checkouts_ab.py --before ../before
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGES = ("projections", "events", "memoryd", "corpus")
MOMENT = "2026-01-01T00:00:00"


def load(root: Path) -> dict[str, Any]:
    """The classes this benchmark needs, imported from the checkout at ``root``."""
    for name in [module for module in sys.modules if module.split(".")[0] in PACKAGES]:
        del sys.modules[name]  # the other checkout's modules stay alive through the objects already taken
    sys.path[:0] = [str(root), str(root / "bench" / "search")]
    try:
        from corpus import CorpusSpec, generate, make_queries

        from events.types import MemorySaved, RecordedEvent
        from memoryd.kernel.domain import Memory
        from projections.filters import MemoryFilter, ScopePattern
        from projections.search import SearchIndex
    finally:
        del sys.path[:2]
    return {"SearchIndex": SearchIndex, "MemoryFilter": MemoryFilter, "ScopePattern": ScopePattern,
            "MemorySaved": MemorySaved, "RecordedEvent": RecordedEvent, "Memory": Memory, "CorpusSpec": CorpusSpec,
            "generate": generate, "make_queries": make_queries}


def build(checkout: dict[str, Any], merged: bool, count: int, namespaces: int) -> Any:
    spec = checkout["CorpusSpec"](count=count, seed=42, namespaces=namespaces)
    log = []
    for number, fields in enumerate(checkout["generate"](spec).memories()):
        memory = checkout["Memory"](f"id-{number}", fields["name"], fields["description"], fields["type"],
                                    fields["scope"], fields["scope_id"], fields["content"], MOMENT, MOMENT)
        saved = checkout["MemorySaved"](memory)
        log.append(checkout["RecordedEvent"](number + 1, f"s{number}", 1, saved.event_type, 1, saved.payload(), {}, MOMENT))
    index = checkout["SearchIndex"]()
    if merged:
        with index.bulk():
            index.apply_all(log)
    else:
        index.apply_all(log)
        index.wait_for_merges()
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the revision to compare with")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    checkouts = {"before": load(args.before.resolve()), "now": load(HERE.parents[1])}
    queries = checkouts["now"]["make_queries"](checkouts["now"]["CorpusSpec"](count=1_000), args.queries)
    print(f"python {sys.version.split()[0]}, {args.count:,} memories over {args.namespaces} namespaces, "
          f"{len(queries)} queries, top 20\n")
    print("| index | searched | before p50 / p95 ms | now p50 / p95 ms | now / before (p50) |")
    print("|---|---|---|---|---|")
    for merged in (True, False):
        indexes = {name: build(checkout, merged, args.count, args.namespaces) for name, checkout in checkouts.items()}
        shape = "one segment" if merged else "live: " + " / ".join(
            f"{name} {index.shape().parts} parts" for name, index in indexes.items())
        for who in ("caller", "admin"):
            samples: dict[str, list[float]] = {name: [] for name in checkouts}
            for number, query in enumerate(queries):
                order = list(checkouts.items())
                for name, checkout in order if number % 2 else order[::-1]:
                    scopes = (checkout["ScopePattern"]("global"), checkout["ScopePattern"]("user", "u00007"))
                    where = checkout["MemoryFilter"](scopes=scopes) if who == "caller" else checkout["MemoryFilter"]()
                    started = time.perf_counter()
                    indexes[name].search(where, query, 20)
                    samples[name].append((time.perf_counter() - started) * 1000)
            p50 = {name: statistics.median(values) for name, values in samples.items()}
            p95 = {name: sorted(values)[int(len(values) * 0.95)] for name, values in samples.items()}
            print(f"| {shape} | {who} | {p50['before']:.3f} / {p95['before']:.3f} | {p50['now']:.3f} / {p95['now']:.3f} "
                  f"| {p50['now'] / p50['before']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
