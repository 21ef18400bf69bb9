"""The search index's apply and query cost at the checkout it runs from, for A/B runs across revisions.

Builds one index from 100,000 synthetic memories over 100 user namespaces (``bench/search/corpus.py``),
then times 500 chat-like queries (top 20) for a caller seeing global plus one namespace, and for an admin.
Run it from two checkouts in turn, several rounds interleaved, and compare the medians:

    git worktree add /tmp/before REV
    for round in 1 2 3 4 5; do for tree in /tmp/before .; do (cd $tree && $OLDPWD/.venv/bin/python $OLDPWD/bench/search/revision_ab.py); done; done
"""
import statistics
import sys
import time

sys.path.insert(0, "."); sys.path.insert(0, "bench/search")
from corpus import CorpusSpec, generate, make_queries

from events.types import MemorySaved, RecordedEvent
from memoryd.domain import Memory
from projections.filters import MemoryFilter, ScopePattern
from projections.search import SearchIndex

corpus = generate(CorpusSpec(count=100_000, seed=42, namespaces=100))
events = []
for n, f in enumerate(corpus.memories()):
    m = Memory(f"id-{n}", f["name"], f["description"], f["type"], f["scope"], f["scope_id"], f["content"], "2026-01-01T00:00:00", "2026-01-01T00:00:00")
    events.append(RecordedEvent(n + 1, f"s{n}", 1, MemorySaved.event_type, 1, MemorySaved(m).payload(), {}, "t"))
index = SearchIndex()
t = time.perf_counter()
for e in events: index.apply(e)
apply_us = (time.perf_counter() - t) / len(events) * 1e6
index.wait_for_merges()
queries = make_queries(CorpusSpec(count=1000), 500)
caller = MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", "u00007")))
admin = MemoryFilter()
def p50(where):
    s = []
    for q in queries:
        t = time.perf_counter(); index.search(where, q, 20); s.append((time.perf_counter() - t) * 1000)
    return statistics.median(s)
print(f"apply {apply_us:.1f} us  caller p50 {p50(caller):.3f} ms  admin p50 {p50(admin):.3f} ms")
