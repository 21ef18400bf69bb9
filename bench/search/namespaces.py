"""Design question: a numpy inverted index over many namespaces, global postings + mask vs partitioned.

1,000,000 memories spread evenly over 1,000 user namespaces (interleaved in insertion
order); BM25 statistics (document count, average length, document frequencies) are
those of exactly the namespaces the caller sees, as issue 4 requires. Three layouts
of the same postings (per term a CSR slice of doc ids + ``uint16`` term frequencies):

* ``a  global + mask``: per term, postings in insertion (doc id) order. A query
  gathers a per-caller visibility mask over each whole posting list, keeps the
  visible postings (that count is the df), scores them. The per-caller mask
  (N bytes) and doc -> local position map (4N bytes) are built once per visibility
  set and *not* timed (favourable to this design; their build time is reported).
* ``b1 partitioned, ns column``: per term, postings sorted by (namespace, doc) with
  a ``uint16`` namespace column beside them; ``np.searchsorted`` on that column
  slices each visible run of namespaces. Local positions by ``searchsorted`` into
  the caller's sorted visible doc ids (O(visible) memory).
* ``b2 partitioned, clustered ids``: documents renumbered so each namespace is a
  contiguous doc-id range (possible for an immutable segment: renumber when it is
  built or merged); per term the postings sorted by doc id are then sorted by
  namespace too, and ``np.searchsorted`` on the doc ids with the namespaces'
  boundaries slices them. No extra bytes per posting.

Each query: exact BM25 (Lucene idf, k1 1.5, b 0.75, float64) of the visible postings,
one ``np.bincount`` into a dense array over the caller's visible documents, top 20
by the block-maxima threshold of ``baselines.top_k``. A caller who sees every
namespace (admin) takes the "no filter" path in every layout.

Checks: the three layouts return the same top 20 and scores; on a few 1-namespace
queries they equal plain-Python BM25 over just that namespace's memories.

    .venv/bin/python bench/search/namespaces.py                       # 1,000,000 x 1,000 namespaces
    .venv/bin/python bench/search/namespaces.py --count 100000 --namespaces 100
    .venv/bin/python bench/search/namespaces.py --callers 1,1000       # just the two targets
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from baselines import bm25_scores, top_k
from corpus import CorpusSpec, generate, make_queries

from projections.search.analysis import Analyzer
from projections.search.ranking import K1, B, idf

tokenize = Analyzer("none").terms  # the corpus's words as written, as its word ids hold them

TOP = 20


@dataclass
class Layout:
    name: str
    indptr: np.ndarray  # int64, terms + 1
    docs: np.ndarray  # int32 doc ids (this layout's numbering)
    tfs: np.ndarray  # uint16
    ns: np.ndarray | None  # uint16 namespace per posting (b1 only)
    doc_len: np.ndarray  # int32, indexed by this layout's doc ids
    original: np.ndarray | None  # this layout's doc id -> original doc id (b2 only)
    build_s: float = 0.0

    def posting_bytes(self) -> float:
        extra = self.ns.nbytes if self.ns is not None else 0
        return (self.docs.nbytes + self.tfs.nbytes + extra) / len(self.docs)


@dataclass
class Visibility:
    """What a caller sees, with the per-caller structures each layout uses."""

    namespaces: np.ndarray  # sorted namespace numbers
    everything: bool
    n: int  # visible documents
    total_len: int
    ns_runs: np.ndarray  # (runs, 2) [first, last + 1) namespace numbers, merged when adjacent
    doc_runs: np.ndarray  # (runs, 2) b2 doc-id ranges, and run offsets into the local space
    run_offsets: np.ndarray
    visible_docs: np.ndarray  # sorted original doc ids (a, b1 local space)
    mask: np.ndarray | None = None  # a: bool per original doc
    local_of: np.ndarray | None = None  # a: original doc -> local position
    mask_build_ms: float = 0.0


class Store:
    def __init__(self, count: int, namespaces: int, seed: int) -> None:
        started = time.perf_counter()
        self.spec = CorpusSpec(count=count, seed=seed, namespaces=namespaces)
        corpus = generate(self.spec, text=False)
        self.vocab = {w: i for i, w in enumerate(corpus.vocab)}
        self.corpus = corpus
        self.n = corpus.count
        self.namespace = corpus.namespace
        self.ns_count = np.bincount(corpus.namespace, minlength=namespaces).astype(np.int64)
        lengths = np.diff(corpus.offsets)
        self.doc_len = lengths.astype(np.int32)
        self.ns_len = np.bincount(corpus.namespace, weights=lengths, minlength=namespaces).astype(np.int64)
        self.members = np.argsort(corpus.namespace, kind="stable").astype(np.int32)  # docs grouped by namespace
        self.ns_start = np.concatenate(([0], np.cumsum(self.ns_count)))
        print(f"  corpus: {self.n:,} memories, {len(corpus.ids):,} tokens in {time.perf_counter() - started:.1f} s",
              file=sys.stderr, flush=True)

        started = time.perf_counter()
        n = self.n
        doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys, tf = np.unique(corpus.ids.astype(np.int64) * n + doc_of, return_counts=True)
        del doc_of
        terms = keys // n
        docs = keys % n
        del keys
        tf = np.minimum(tf, 65535).astype(np.int64)
        indptr = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(self.vocab)), out=indptr[1:])
        self.postings = len(docs)
        base_s = time.perf_counter() - started
        self.a = Layout("a  global + mask", indptr, docs.astype(np.int32), tf.astype(np.uint16), None,
                        self.doc_len, None, base_s)
        print(f"  a: {base_s:.1f} s", file=sys.stderr, flush=True)

        # b1: sort within each term by (namespace, doc): one packed int64 key per posting.
        started = time.perf_counter()
        ns_of = self.namespace.astype(np.int64)[docs]
        packed = ((terms * namespaces + ns_of) * n + docs) * 65536 + tf
        packed.sort()
        b1_docs = ((packed >> 16) % n).astype(np.int32)
        b1_tfs = (packed & 0xFFFF).astype(np.uint16)
        del packed
        self.b1 = Layout("b1 partitioned, ns column", indptr, b1_docs, b1_tfs,
                         self.namespace.astype(np.uint16)[b1_docs], self.doc_len, None,
                         base_s + time.perf_counter() - started)
        print(f"  b1: {self.b1.build_s:.1f} s", file=sys.stderr, flush=True)

        # b2: renumber documents so each namespace is a contiguous range, re-sort within each term.
        started = time.perf_counter()
        new_id = np.empty(n, dtype=np.int64)
        new_id[self.members] = np.arange(n)
        packed = (terms * n + new_id[docs]) * 65536 + tf
        del terms, docs, tf
        packed.sort()
        b2_docs = ((packed >> 16) % n).astype(np.int32)
        b2_tfs = (packed & 0xFFFF).astype(np.uint16)
        del packed
        self.b2 = Layout("b2 partitioned, clustered ids", indptr, b2_docs, b2_tfs, None,
                         self.doc_len[self.members], self.members, base_s + time.perf_counter() - started)
        print(f"  b2: {self.b2.build_s:.1f} s", file=sys.stderr, flush=True)
        gc.collect()

    def visibility(self, namespaces: Sequence[int], prepare_mask: bool) -> Visibility:
        ns = np.unique(np.asarray(namespaces, dtype=np.int64))
        everything = len(ns) == len(self.ns_count)
        breaks = np.flatnonzero(np.diff(ns) != 1) + 1
        firsts = ns[np.concatenate(([0], breaks))]
        lasts = ns[np.concatenate((breaks - 1, [len(ns) - 1]))] + 1
        # Needles in the haystack's dtype: otherwise np.searchsorted converts the whole posting slice.
        ns_runs = np.stack([firsts, lasts], axis=1).astype(np.uint16)
        doc_runs = np.stack([self.ns_start[firsts], self.ns_start[lasts]], axis=1).astype(np.int32)
        run_offsets = np.concatenate(([0], np.cumsum(doc_runs[:, 1] - doc_runs[:, 0])[:-1]))
        visible_docs = np.sort(np.concatenate([self.members[self.ns_start[v]:self.ns_start[v + 1]] for v in ns]))
        vis = Visibility(ns, everything, int(self.ns_count[ns].sum()), int(self.ns_len[ns].sum()), ns_runs,
                         doc_runs, run_offsets, visible_docs)
        if prepare_mask and not everything:
            started = time.perf_counter()
            visible_ns = np.zeros(len(self.ns_count), dtype=bool)
            visible_ns[ns] = True
            vis.mask = visible_ns[self.namespace]
            vis.local_of = np.full(self.n, -1, dtype=np.int32)
            vis.local_of[visible_docs] = np.arange(len(visible_docs), dtype=np.int32)
            vis.mask_build_ms = (time.perf_counter() - started) * 1e3
        return vis

    def terms(self, words: Sequence[str]) -> list[tuple[int, int]]:
        return [(self.vocab[w], r) for w, r in Counter(words).items() if w in self.vocab]


# --- the three query paths --------------------------------------------------------------------

def _finish(doc_len: np.ndarray, vis: Visibility, parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]],
            ) -> tuple[np.ndarray, np.ndarray]:
    """parts: (repeats, local positions, layout doc ids, tf) of the visible postings of each query term."""
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    a = K1 * (1 - B)
    c = K1 * B / (vis.total_len / vis.n)
    locs, scores = [], []
    for repeats, loc, d, tf in parts:
        weight = repeats * idf(vis.n, len(d)) * (K1 + 1)
        tf = tf.astype(np.float64)
        part = doc_len_norm = doc_len[d] * c
        doc_len_norm += a
        part += tf
        np.divide(tf, part, out=part)
        part *= weight
        locs.append(loc)
        scores.append(part)
    dense = np.bincount(np.concatenate(locs), weights=np.concatenate(scores), minlength=vis.n)
    return top_k(dense, TOP)


def search_a(store: Store, layout: Layout, terms: list[tuple[int, int]], vis: Visibility):
    parts = []
    for t, r in terms:
        lo, hi = layout.indptr[t], layout.indptr[t + 1]
        d = layout.docs[lo:hi]
        tf = layout.tfs[lo:hi]
        if vis.everything:
            loc = d
        else:
            keep = vis.mask[d]  # O(all postings of the term, every namespace)
            d, tf = d[keep], tf[keep]
            loc = vis.local_of[d]
        if len(d):
            parts.append((r, loc, d, tf))
    local, scores = _finish(layout.doc_len, vis, parts)
    return (local if vis.everything else vis.visible_docs[local]), scores


def search_b1(store: Store, layout: Layout, terms: list[tuple[int, int]], vis: Visibility):
    parts = []
    for t, r in terms:
        lo, hi = layout.indptr[t], layout.indptr[t + 1]
        if vis.everything:
            d, tf = layout.docs[lo:hi], layout.tfs[lo:hi]
            loc = d
        else:
            ns = layout.ns[lo:hi]
            starts = ns.searchsorted(vis.ns_runs[:, 0])
            ends = ns.searchsorted(vis.ns_runs[:, 1])
            idx = _ranges(starts, ends)
            d, tf = layout.docs[lo:hi][idx], layout.tfs[lo:hi][idx]
            loc = vis.visible_docs.searchsorted(d)
        if len(d):
            parts.append((r, loc, d, tf))
    local, scores = _finish(layout.doc_len, vis, parts)
    return (local if vis.everything else vis.visible_docs[local]), scores


def search_b2(store: Store, layout: Layout, terms: list[tuple[int, int]], vis: Visibility):
    parts = []
    single = len(vis.doc_runs) == 1
    for t, r in terms:
        lo, hi = layout.indptr[t], layout.indptr[t + 1]
        ds = layout.docs[lo:hi]
        if vis.everything:
            d, tf, loc = ds, layout.tfs[lo:hi], ds
        elif single:
            first, last = vis.doc_runs[0]
            i, j = ds.searchsorted(first), ds.searchsorted(last)
            d, tf = ds[i:j], layout.tfs[lo + i:lo + j]
            loc = d - first
        else:
            starts = ds.searchsorted(vis.doc_runs[:, 0])
            ends = ds.searchsorted(vis.doc_runs[:, 1])
            idx = _ranges(starts, ends)
            d, tf = ds[idx], layout.tfs[lo:hi][idx]
            loc = d - np.repeat(vis.doc_runs[:, 0] - vis.run_offsets, ends - starts)
        if len(d):
            parts.append((r, loc, d, tf))
    local, scores = _finish(layout.doc_len, vis, parts)
    if vis.everything:
        return layout.original[local], scores
    # local -> layout doc id -> original doc id
    run = np.searchsorted(vis.run_offsets, local, side="right") - 1
    return layout.original[local - vis.run_offsets[run] + vis.doc_runs[run, 0]], scores


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, e)`` for each pair, vectorized."""
    lengths = ends - starts
    total = int(lengths.sum())
    if len(starts) == 1:
        return np.arange(starts[0], ends[0])
    shift = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total) + shift


# --- run --------------------------------------------------------------------------------------

def pct(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--namespaces", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=200, help="queries for the 1-namespace caller")
    parser.add_argument("--callers", default="",
                        help="comma-separated namespaces seen per caller (default 1,10,N/2,N)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    if args.namespaces >= 65535:
        parser.error("namespaces are uint16 in this prototype")
    started = time.perf_counter()
    load_before = os.getloadavg()
    store = Store(args.count, args.namespaces, args.seed)
    queries = [tokenize(q) for q in make_queries(store.spec, args.queries)]
    rng = np.random.default_rng(args.seed)
    k = args.namespaces
    # Callers: how many namespaces they see, and how many queries each layout runs for them.
    def n_queries(seen: int) -> int:
        return args.queries if seen == 1 else args.queries // 2 if seen <= 10 else max(10, args.queries // 4 if seen == k
                                                                                          else args.queries // 8)
    seen_list = [int(x) for x in args.callers.split(",") if x.strip()] or [1, 10, k // 2, k]
    callers = [(min(seen, k), n_queries(min(seen, k))) for seen in seen_list]
    layouts: list[tuple[Layout, Callable]] = [(store.a, search_a), (store.b1, search_b1), (store.b2, search_b2)]
    times: dict[tuple[str, int], list[float]] = {}
    mask_ms: list[float] = []
    touched: dict[int, list[tuple[int, int]]] = {}
    gc.collect()
    gc.freeze()
    for seen, n_queries in callers:
        print(f"  caller sees {seen} namespace(s): {n_queries} queries", file=sys.stderr, flush=True)
        for qi in range(n_queries):
            words = queries[qi % len(queries)]
            terms = store.terms(words)
            vis = store.visibility(rng.choice(k, size=seen, replace=False), prepare_mask=True)
            if seen < k:
                mask_ms.append(vis.mask_build_ms)
            results = []
            order = layouts[qi % 3:] + layouts[:qi % 3]
            for layout, search in order:
                t0 = time.perf_counter_ns()
                docs, scores = search(store, layout, terms, vis)
                times.setdefault((layout.name, seen), []).append((time.perf_counter_ns() - t0) / 1e6)
                results.append((layout.name, docs, scores))
            _same(results, words)
            total_global = sum(int(store.a.indptr[t + 1] - store.a.indptr[t]) for t, _ in terms)
            visible = total_global if vis.everything else sum(
                int(vis.mask[store.a.docs[store.a.indptr[t]:store.a.indptr[t + 1]]].sum()) for t, _ in terms)
            touched.setdefault(seen, []).append((total_global, visible))
            if seen == 1 and qi < 3:
                _check_reference(store, vis, words, results[0])
    gc.unfreeze()
    load_after = os.getloadavg()

    print()
    print(f"## Namespaces: {store.n:,} memories over {k:,} namespaces of {store.n // k:,}; "
          f"{store.postings:,} postings; top {TOP}")
    print()
    print("- per-caller statistics (N, avgdl, df over the visible namespaces only); exact float64; "
          "equal results across layouts and, for 1-namespace callers, equal to plain-Python BM25 over that namespace")
    for seen, _ in callers:
        g = [x for x, _ in touched[seen]]
        v = [y for _, y in touched[seen]]
        print(f"- {seen} namespace(s) visible: postings of the query terms p50 {pct(g, 50):,.0f} in all namespaces, "
              f"{pct(v, 50):,.0f} visible")
    print(f"- a's per-caller mask + local map (N bool + N int32, {store.n * 5 / 1e6:.0f} MB per visibility set), "
          f"built outside the timings: p50 {pct(mask_ms, 50):.1f} ms")
    print(f"- machine: {os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print()
    header = " | ".join(f"{seen} ns p50 / p95 ms" for seen, _ in callers)
    print(f"| layout | build s | bytes / posting | {header} |")
    print("|---|---:|---:|" + "---:|" * len(callers))
    for layout, _ in layouts:
        cells = " | ".join(f"{pct(times[(layout.name, seen)], 50):.2f} / {pct(times[(layout.name, seen)], 95):.2f}"
                           for seen, _ in callers)
        print(f"| {layout.name} | {layout.build_s:.1f} | {layout.posting_bytes():.0f} | {cells} |")
    print()
    print("bytes / posting: doc id int32 + tf uint16 (+ namespace uint16 for b1); per document add doc length "
          "int32 and namespace; CSR offsets 8 B per term.")
    print(f"queries per caller: {', '.join(f'{seen} ns: {n}' for seen, n in callers)}; total run "
          f"{time.perf_counter() - started:.0f} s")


def _same(results: list[tuple[str, np.ndarray, np.ndarray]], words: Sequence[str]) -> None:
    name0, docs0, scores0 = results[0]
    for name, docs, scores in results[1:]:
        assert len(scores) == len(scores0) and np.allclose(scores, scores0, rtol=0, atol=1e-9), (name, words)
        if len(scores):
            cut = scores0[-1]
            above0 = {int(d) for d, s in zip(docs0, scores0) if s > cut + 1e-9}
            above = {int(d) for d, s in zip(docs, scores) if s > cut + 1e-9}
            assert above0 == above, (name0, name, words)


def _check_reference(store: Store, vis: Visibility, words: Sequence[str],
                     result: tuple[str, np.ndarray, np.ndarray]) -> None:
    """Plain-Python BM25 over exactly the visible memories gives the same top 20."""
    corpus = store.corpus
    docs = vis.visible_docs.tolist()
    documents = [corpus.ids[corpus.offsets[d]:corpus.offsets[d + 1]].tolist() for d in docs]
    ids = [store.vocab.get(w, -1) for w in words]
    reference = np.asarray(bm25_scores(documents, ids))
    order = sorted(range(len(docs)), key=lambda i: (-reference[i], docs[i]))
    want = [reference[i] for i in order[:TOP] if reference[i] > 0]
    _, _, scores = result
    assert len(want) == len(scores) and max((abs(a - b) for a, b in zip(want, scores)), default=0) < 1e-9, words


if __name__ == "__main__":
    main()
