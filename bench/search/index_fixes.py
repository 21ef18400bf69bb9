"""Experiments behind the suggested fixes to ``projections.search_index`` (bench_index.py finds the problems).

Each experiment builds the real ``SearchIndex`` as ``bench_index.py`` does, then times the
current code path against a candidate replacement on the same data, and checks they agree.

* ``merge`` (100,000 memories, one global namespace, a delta just below the merge
  threshold): ``_Namespace.merge`` (lexsort of every posting) vs a linear merge that
  uses the fact that a delta's slots are all newer than the segment's (per term: the
  segment's run, then the delta's run; only the delta's term ids are sorted).
* ``admin`` (1,000,000 memories in 1,000 namespaces, ``MemoryFilter(scopes=None)``):
  ``SearchIndex.search`` vs (a) one vectorized lookup of every (namespace, term) run in a
  flat array instead of the per-namespace Python loop, with one ``np.bincount``; (b) the
  same with slots renumbered so that each namespace's slots are contiguous, in namespace
  order; (c) for scale, the one-CSR prototype is in bench_index.py part 2 (~14 ms).
* ``tiny`` (10,000 to 100,000 memories in namespaces of 1,000): a caller's p50 and what
  ``_cut`` costs when the store has at most ``limit`` blocks of 512 slots.

    /work/venv/bin/python bench/search/index_fixes.py merge
    /work/venv/bin/python bench/search/index_fixes.py admin      # ~4 min, ~5 GB
    /work/venv/bin/python bench/search/index_fixes.py tiny
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import Counter
from itertools import chain
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import bench_index as bi
from corpus import CorpusSpec, generate, make_queries, namespace_id

from events.types import MEMORY_DELETED, MEMORY_SAVED
from projections.queries import MemoryFilter, ScopePattern
from projections.ranking import idf, tokenize
from projections.search_index import _cut, _frequencies


def merge_experiment() -> None:
    corpus = generate(CorpusSpec(count=100_000))
    index = bi.build_index(bi.Memories(corpus), label="100,000").index
    fresh = bi.Memories(generate(CorpusSpec(count=7_000, seed=43)), family=9, time_offset=100_000)
    namespace = index._namespaces[("global", "")]
    memories = bi.Memories(corpus)
    index._bulk = True  # 1,000 deletes (tombstones), then a delta just below the threshold, without merging
    for d in range(0, 100_000, 100):
        index.apply(bi.recorded(index.position + 1, MEMORY_DELETED, memories.record(d)))
    for i in range(7_000):
        index.apply(bi.recorded(index.position + 1, MEMORY_SAVED, fresh.record(i, bi.memory_id(i, 9))))
    index._bulk = False
    alive = index._alive
    print(f"segment {len(namespace.slots):,} postings, {namespace.tombstones:,} tombstones, delta "
          f"{namespace.delta_size:,} words over {len(namespace.delta):,} terms")

    def linear(ns):  # type: ignore[no-untyped-def]
        d_terms = np.fromiter(ns.delta.keys(), np.int64, len(ns.delta))
        d_counts = np.fromiter((len(p) // 2 for p in ns.delta.values()), np.int64, len(ns.delta))
        pairs = np.fromiter(chain.from_iterable(ns.delta.values()), np.int64).reshape(-1, 2)
        order = np.argsort(d_terms, kind="stable")
        d_starts = (np.cumsum(d_counts) - d_counts)[order]
        d_terms, d_counts = d_terms[order], d_counts[order]
        terms = np.union1d(ns.terms, d_terms)
        seg_counts = np.zeros(len(terms), np.int64)
        seg_counts[np.searchsorted(terms, ns.terms)] = np.diff(ns.offsets)
        del_counts = np.zeros(len(terms), np.int64)
        del_counts[np.searchsorted(terms, d_terms)] = d_counts
        offsets = np.concatenate([[0], np.cumsum(seg_counts + del_counts)])
        slots = np.empty(int(offsets[-1]), np.int32)
        freqs = np.empty(int(offsets[-1]), np.uint16)
        before = np.cumsum(del_counts) - del_counts  # delta postings of all earlier terms
        seg_pos = np.arange(len(ns.slots)) + np.repeat(before[np.searchsorted(terms, ns.terms)], np.diff(ns.offsets))
        slots[seg_pos], freqs[seg_pos] = ns.slots, ns.freqs
        at = np.searchsorted(terms, d_terms)
        within = np.arange(int(d_counts.sum())) - np.repeat(np.cumsum(d_counts) - d_counts, d_counts)
        src = np.repeat(d_starts, d_counts) + within
        dst = np.repeat(offsets[at] + seg_counts[at], d_counts) + within
        slots[dst], freqs[dst] = pairs[src, 0], _frequencies(pairs[src, 1])
        live = alive[slots]
        if not live.all():  # tombstones: drop, and shift the offsets
            kept = np.concatenate([[0], np.cumsum(live)])
            offsets, slots, freqs = kept[offsets], slots[live], freqs[live]
        return terms, offsets, slots, freqs

    def current(ns):  # type: ignore[no-untyped-def]
        pending = np.fromiter(chain.from_iterable([t] * (len(p) // 2) for t, p in ns.delta.items()), np.int64)
        pairs = np.fromiter(chain.from_iterable(ns.delta.values()), np.int64).reshape(-1, 2)
        all_terms = np.concatenate([np.repeat(ns.terms, np.diff(ns.offsets)), pending])
        all_slots = np.concatenate([ns.slots, pairs[:, 0].astype(np.int32)])
        all_freqs = np.concatenate([ns.freqs, _frequencies(pairs[:, 1])])
        live = alive[all_slots]
        all_terms, all_slots, all_freqs = all_terms[live], all_slots[live], all_freqs[live]
        order = np.lexsort((all_slots, all_terms))
        all_terms, slots, freqs = all_terms[order], all_slots[order], all_freqs[order]
        terms, starts = np.unique(all_terms, return_index=True)
        return terms, np.append(starts, len(all_terms)), slots, freqs

    for _ in range(2):
        t0 = time.perf_counter()
        a = current(namespace)
        t1 = time.perf_counter()
        b = linear(namespace)
        t2 = time.perf_counter()
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        print(f"merge: current (lexsort) {(t1 - t0) * 1e3:,.0f} ms; linear {(t2 - t1) * 1e3:,.0f} ms; identical output")
    t0 = time.perf_counter()
    namespace.merge(alive)
    print(f"_Namespace.merge itself: {(time.perf_counter() - t0) * 1e3:,.0f} ms")


def admin_experiment() -> None:
    spec = CorpusSpec(count=1_000_000, namespaces=1_000)
    corpus = generate(spec)
    index = bi.build_index(bi.Memories(corpus), label="1,000,000").index
    gc.collect()
    gc.freeze()
    queries = make_queries(spec, 200)
    admin = MemoryFilter(scopes=None)
    spaces = list(index._namespaces.values())
    vocabulary = len(index._vocabulary)
    keys = np.concatenate([k * vocabulary + ns.terms for k, ns in enumerate(spaces)])
    bases = np.cumsum([0] + [len(ns.slots) for ns in spaces])
    starts = np.concatenate([ns.offsets[:-1] + bases[k] for k, ns in enumerate(spaces)])
    ends = np.concatenate([ns.offsets[1:] + bases[k] for k, ns in enumerate(spaces)])
    flat_slots = np.concatenate([ns.slots for ns in spaces])
    flat_freqs = np.concatenate([ns.freqs for ns in spaces])
    n = len(index._memory_ids)
    lengths = index._length[:n]
    owner_of = {id(ns): k for k, ns in enumerate(spaces)}
    owner = np.fromiter((owner_of[id(ns)] if ns is not None else len(spaces) for ns in index._namespace_of), np.int64, n)
    renumbered = np.empty(n, np.int64)
    renumbered[np.argsort(owner, kind="stable")] = np.arange(n)
    clustered_slots = renumbered[flat_slots].astype(np.int32)
    clustered_lengths = np.empty_like(lengths)
    clustered_lengths[renumbered] = lengths
    documents = sum(int(ns.documents[-1]) for ns in spaces)
    average = sum(int(ns.lengths[-1]) for ns in spaces) / documents
    k1, b = index.k1, index.b

    def flat(query: str, slots: np.ndarray, doc_lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        words = Counter(tokenize(query))
        known = [w for w in words if w in index._vocabulary]
        term_ids = np.array([index._vocabulary[w] for w in known], np.int64)
        repeats = np.array([words[w] for w in known], np.float64)
        wanted = (np.arange(len(spaces))[:, None] * vocabulary + term_ids[None, :]).ravel()
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        found = keys[at] == wanted
        lo, count = np.where(found, starts[at], 0), np.where(found, ends[at] - starts[at], 0)
        df = np.bincount(np.tile(np.arange(len(term_ids)), len(spaces)), weights=count, minlength=len(term_ids))
        weight = repeats * np.array([idf(documents, int(d)) for d in df]) * (k1 + 1)
        positions = np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
        s, tf = slots[positions], flat_freqs[positions].astype(np.float64)
        norm = k1 * (1 - b) + (k1 * b / average) * doc_lengths[s]
        norm += tf
        contribution = np.divide(tf, norm, out=tf)
        contribution *= np.repeat(np.tile(weight, len(spaces)), count)
        totals = np.bincount(s, weights=contribution, minlength=n)
        top = np.flatnonzero(totals >= _cut(totals, 20))
        return top, totals[top]

    for q in queries[:10]:
        hits = index.search(admin, q, 20)
        for slots, doc_lengths, number in ((flat_slots, lengths, lambda s: s),
                                           (clustered_slots, clustered_lengths, lambda s: int(renumbered[s]))):
            top, scores = flat(q, slots, doc_lengths)
            got = dict(zip(top.tolist(), scores.tolist()))
            assert all(abs(got[number(index._slot_of[h.memory_id])] - h.score) < 1e-9 for h in hits)
    print("both candidates give SearchIndex.search's scores on 10 queries")
    for round_ in (1, 2):
        now = bi.timed_loop(lambda q: index.search(admin, q, 20), queries, 60)
        a = bi.timed_loop(lambda q: flat(q, flat_slots, lengths), queries, 60)
        c = bi.timed_loop(lambda q: flat(q, clustered_slots, clustered_lengths), queries, 60)
        print(f"round {round_}, admin over 1,000,000, p50 / p95 ms: SearchIndex.search {bi.pct(now, 50):.1f} / "
              f"{bi.pct(now, 95):.1f}; (a) flat lookup + bincount {bi.pct(a, 50):.1f} / {bi.pct(a, 95):.1f}; "
              f"(b) + clustered slots {bi.pct(c, 50):.1f} / {bi.pct(c, 95):.1f} (load {bi.load()})")


def tiny_experiment() -> None:
    for count, spaces in ((10_000, 10), (20_000, 20), (100_000, 100)):
        spec = CorpusSpec(count=count, namespaces=spaces)
        index = bi.build_index(bi.Memories(generate(spec)), label=f"{count:,}").index
        caller = MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", namespace_id(3))))
        times = bi.timed_loop(lambda q, index=index, caller=caller: index.search(caller, q, 20),
                             make_queries(spec, 200), 30)
        scores = np.zeros(count)
        scores[np.random.default_rng(1).choice(count, 300, replace=False)] = np.random.default_rng(2).random(300)
        t0 = time.perf_counter()
        for _ in range(50):
            _cut(scores, 20)
        print(f"{count:,} memories in {spaces} namespaces of 1,000: caller p50 {bi.pct(times, 50):.2f} ms, "
              f"p95 {bi.pct(times, 95):.2f}; _cut over {count:,} mostly-zero scores "
              f"{(time.perf_counter() - t0) / 50 * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", choices=("merge", "admin", "tiny"))
    args = parser.parse_args()
    print(f"load average {bi.load()}")
    {"merge": merge_experiment, "admin": admin_experiment, "tiny": tiny_experiment}[args.experiment]()


if __name__ == "__main__":
    main()
