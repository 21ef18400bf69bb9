"""The search index's apply and query cost at the checkout it runs from, for A/B runs across revisions.

Builds one index from 100,000 synthetic memories over 100 user namespaces (``bench/search/corpus.py``),
then times 500 chat-like queries (top 20) for a caller seeing global plus one namespace, and for an
admin. Run it from two checkouts in turn, several rounds interleaved, and compare the medians::

    git worktree add ../before REV
    for round in 1 2 3 4 5; do
      for tree in ../before .; do (cd $tree && $OLDPWD/.venv/bin/python $OLDPWD/bench/search/revision_ab.py); done
    done
"""

from __future__ import annotations

import statistics
import sys
import time

sys.path.insert(0, ".")  # the checkout it runs from
sys.path.insert(0, "bench/search")

from corpus import CorpusSpec, generate, make_queries  # noqa: E402

from events.types import MemorySaved, RecordedEvent  # noqa: E402
from memoryd.kernel.domain import Memory  # noqa: E402
from projections.filters import MemoryFilter, ScopePattern  # noqa: E402
from projections.search import SearchIndex  # noqa: E402

MOMENT = "2026-01-01T00:00:00"


def events() -> list[RecordedEvent]:
    found = []
    for number, fields in enumerate(generate(CorpusSpec(count=100_000, seed=42, namespaces=100)).memories()):
        memory = Memory(f"id-{number}", fields["name"], fields["description"], fields["type"], fields["scope"],
                        fields["scope_id"], fields["content"], MOMENT, MOMENT)
        found.append(RecordedEvent(number + 1, f"s{number}", 1, MemorySaved.event_type, 1,
                                   MemorySaved(memory).payload(), {}, MOMENT))
    return found


def query_p50(index: SearchIndex, where: MemoryFilter, queries: list[str]) -> float:
    samples = []
    for query in queries:
        started = time.perf_counter()
        index.search(where, query, 20)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    log = events()
    index = SearchIndex()
    started = time.perf_counter()
    for recorded in log:
        index.apply(recorded)
    apply_us = (time.perf_counter() - started) / len(log) * 1e6
    index.wait_for_merges()
    queries = make_queries(CorpusSpec(count=1_000), 500)
    caller = MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", "u00007")))
    print(f"apply {apply_us:.1f} us  caller p50 {query_p50(index, caller, queries):.3f} ms  "
          f"admin p50 {query_p50(index, MemoryFilter(), queries):.3f} ms")


if __name__ == "__main__":
    main()
