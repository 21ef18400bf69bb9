"""Our real BM25 index (``projections.search.SearchIndex``) against issue 4's targets, baselines beside it.

Parts (``--part 1,3,...``; default 1,3,4,5,6,7; part 2 needs ``--million``):

1. 100,000 memories, all visible (global): ``SearchIndex.search`` p50/p95 over ~200
   chat-like queries (as they come), in one interleaved loop with the engines of
   ``baselines.py`` (numpy prototype, summing floor, rank-bm25 on a prefix, bm25s: all over
   the index's analyzed terms; tantivy and SQLite FTS5 on a prefix, with their own
   tokenizers); speed-up vs rank-bm25; fidelity vs exact BM25.
   Targets: p50 <= 2 ms, p95 <= 5 ms, >= 200x rank-bm25.
2. 1,000,000 memories in 1,000 user namespaces of 1,000 (``--million``): a caller who
   sees one user's namespace plus an (empty) global scope, and an admin
   (``MemoryFilter(scopes=None)``) who sees all 1,000,000, each against a prototype in the
   same run. Baselines: an exact CSR prototype over only the caller's ~1,000 memories (one
   per query), rank-bm25 over them (the first ``--slow-queries``), and one CSR prototype over
   all 1,000,000 for the admin; all score the index's own terms (the corpus's word ids mapped
   through ``Analyzer()``: stopwords dropped, stems; name and description counted
   ``SUMMARY_WEIGHT`` times; the index's k1 and b), checked by exactness against ours.
   Targets (issue 29), the median over the rounds: admin p50 <= 0.3x the one-CSR
   prototype's, caller p50 <= 2.5x the prototype over only the caller's memories, index
   footprint (``memory_report``) <= 1.3x the raw text it indexes. A missed one prints a
   ``missed:`` line and the run exits 1. Build time, RSS; plus apply latencies of
   adds/replaces/deletes into 1,000-memory namespaces (delta freezes counted). Stops feeding
   at ``--max-rss-gb`` or ``--max-build-s`` and reports what ran.
3. Updates at 100,000: ``apply()`` latency of an add, a replace and a delete (a query
   sees an applied event at once; each add/replace is checked by searching its unique
   word right after), p50/p95/max over ~2,000 operations; delta freezes counted. Then a
   background merge probe: ``--probe-adds`` more adds with a search after every 10th;
   apply latency, searches while a merge runs vs not, the index's shape as it goes.
   Targets: add/replace p95 <= 0.5 ms, delete p95 <= 0.05 ms.
4. Index memory vs the raw text it indexes (UTF-8 bytes of name + description +
   content): numpy ``nbytes`` + ``sys.getsizeof`` of the Python structures, and a
   ``tracemalloc`` delta over a separate build. Target <= 2x.
5. Rebuild from a log of 100,000 memories: a fresh SQLite file, the corpus written as
   JSONL and imported with ``memoryd.app.transfer.import_memories`` (what ``memoryd memories
   import`` runs), then ``SearchService.rebuild()`` (<= 15 s) and
   ``Projector.rebuild(memory_table)`` + search rebuild (<= 60 s); snapshot save/load.
   ``--cli`` also times ``memoryd projections rebuild all`` as a subprocess.
6. HTTP end to end on that database: ``memoryd serve`` (subprocess, free port), ``POST
   /v1/api/memories/search`` over one keep-alive connection; the first request (index
   warm-up) reported apart. Target p50 <= 10 ms. Beside it, in this process:
   ``SearchService.memories`` (index + row fetch) and the bare ``SearchIndex.search``.

7. A live index of many parts vs one segment: 230,000 memories in 200 user namespaces,
   the last 30,000 applied one by one (background merges) plus 1,000 deletes, merges
   settled; against the same live memories rebuilt into one segment. Caller (one
   namespace) and admin p50/p95, interleaved; both must give the same top 20.

Timing loops run ``--rounds`` times (default 2: the machine is shared) and each loop
has a time budget (``--budget`` s). The load average is printed at each part's start
and end. Tables go to stdout (markdown), progress to stderr.

    .venv/bin/python bench/search/bench_index.py                          # parts 1,3-7 (4-10 min by the day)
    .venv/bin/python bench/search/bench_index.py --part 2 --million       # 1,000,000 (2-5 min, ~6 GB peak)
    .venv/bin/python bench/search/bench_index.py --part 1 --count 20000   # quick
    .venv/bin/python bench/search/bench_index.py --part 5,6 --cli --keep ../bench-db  # keep the DB, log
"""

from __future__ import annotations

import argparse
import gc
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import baselines as bl
from corpus import (
    MEMORY_TYPES,
    Corpus,
    CorpusSpec,
    generate,
    make_queries,
    namespace_id,
    write_jsonl,
)

from events.types import MEMORY_DELETED, MEMORY_SAVED, MEMORY_UPDATED, RecordedEvent
from projections.filters import MemoryFilter, ScopePattern
from projections.search import SearchIndex
from projections.search.analysis import SUMMARY_WEIGHT, Analyzer
from projections.search.gathered import ranges

ANALYZER = Analyzer()  # the index's own (english): every engine compared scores the terms the index scores
tokenize = ANALYZER.terms  # a query's terms

TOP = bl.TOP  # 20, as the REST default
GLOBAL_CALLER = MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", "bench-caller")))  # REST envelope
ADMIN = MemoryFilter(scopes=None)
# Part 2's targets, issue 29: ours against the prototypes in the same run, so a regression fails the bench.
ADMIN_RATIO = 0.3  # admin search p50 <= 0.3x the one-CSR prototype's (all 1,000,000)
CALLER_RATIO = 2.5  # caller search p50 <= 2.5x the numpy prototype over only the caller's ~1,000 memories
FOOTPRINT_RATIO = 1.3  # index footprint (memory_report) <= 1.3x the raw text it indexes
BASE_TIME = np.datetime64("2026-01-01T00:00:00", "s")


# --- helpers ------------------------------------------------------------------------------------

def rss() -> int:
    return bl._rss()


def peak_rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def process_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def pct(values: Sequence[float], p: float) -> float:
    return bl.pct(values, p)


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "**NOT met**"


def say(*parts: object, end: str = "\n") -> None:
    print(*parts, file=sys.stderr, flush=True, end=end)


def memory_id(number: int, family: int = 8) -> str:
    """uuid4-shaped (36 characters, like the service's ids), and the corpus index is recoverable."""
    return f"00000000-0000-4000-{family}000-{number:012d}"


def doc_number(mid: str) -> int:
    return int(mid[-12:])


def stamps(count: int, start: int = 0) -> list[str]:
    return np.datetime_as_string(BASE_TIME + np.arange(start, start + count).astype("timedelta64[s]"), unit="s").tolist()


class Memories:
    """The corpus as memory dicts (what a save event carries) and RecordedEvents, built lazily."""

    def __init__(self, corpus: Corpus, family: int = 8, time_offset: int = 0) -> None:
        self.corpus = corpus
        self.family = family
        self.types = [MEMORY_TYPES[t] for t in corpus.types.tolist()]
        self.updated = stamps(corpus.count, time_offset)

    def record(self, i: int, mid: str | None = None, suffix: str = "", name: str | None = None,
               scope: tuple[str, str] | None = None, updated: str | None = None) -> dict[str, str]:
        c = self.corpus
        scope_, scope_id = scope or c.scope(i)
        stamp = updated or self.updated[i]
        return {"memory_id": mid or memory_id(i, self.family), "name": name or c.names[i],
                "description": c.descriptions[i], "type": self.types[i], "scope": scope_, "scope_id": scope_id,
                "content": c.contents[i] + suffix, "created": stamp, "updated": stamp}


def recorded(position: int, event_type: str, memory: dict[str, str]) -> RecordedEvent:
    # The index reads only position, event_type, schema_version and payload.
    return RecordedEvent(position, f"memory:{memory['memory_id']}", 1, event_type, 1, {"memory": memory},
                         {"surface": "cli"}, memory["updated"])


@dataclass
class Build:
    index: SearchIndex
    count: int
    feed_s: float
    merge_s: float
    rss_before: int
    rss_after: int
    stopped: str = ""

    @property
    def build_s(self) -> float:
        return self.feed_s + self.merge_s


def build_index(memories: Memories, max_rss: float = float("inf"), max_s: float = float("inf"),
                label: str = "index") -> Build:
    """Feed every memory as a save event inside ``index.bulk()`` (one merge at the end)."""
    gc.collect()
    before = rss()
    index = SearchIndex()
    n = memories.corpus.count
    stopped = ""
    count = n
    started = time.perf_counter()
    with index.bulk():
        for i in range(n):
            index.apply(recorded(i + 1, MEMORY_SAVED, memories.record(i)))
            if i % 25_000 == 24_999:
                elapsed = time.perf_counter() - started
                say(f"\r  {label}: {i + 1:,}/{n:,} in {elapsed:.0f} s, RSS {mb(rss())} MB", end="")
                if rss() > max_rss or elapsed > max_s:
                    stopped = f"stopped at {i + 1:,} ({'RSS' if rss() > max_rss else 'time'} limit)"
                    count = i + 1
                    break
        fed = time.perf_counter()
    merged = time.perf_counter()
    say(f"\r  {label}: {count:,} fed in {fed - started:.1f} s, merged in {merged - fed:.1f} s" + " " * 20)
    gc.collect()
    return Build(index, count, fed - started, merged - fed, before, rss(), stopped)


def timed_loop(call: Callable[[str], object], queries: Sequence[str], budget: float,
               warm: int = 3) -> list[float]:
    """ms per call, GC paused (as in baselines.run_queries), stopping at the time budget."""
    for q in queries[-warm:]:
        call(q)
    times: list[float] = []
    gc.collect()
    gc.disable()
    deadline = time.perf_counter() + budget
    try:
        for q in queries:
            t0 = time.perf_counter_ns()
            call(q)
            times.append((time.perf_counter_ns() - t0) / 1e6)
            if time.perf_counter() > deadline:
                break
    finally:
        gc.enable()
    return times


def footprint(index: SearchIndex) -> dict[str, int]:
    """Bytes held by the index, by component (its own report: numpy nbytes, Python getsizeof)."""
    return index.memory_report()


def corpus_raw_bytes(corpus: Corpus, count: int | None = None) -> int:
    count = corpus.count if count is None else count
    return sum(len(corpus.names[i].encode()) + len(corpus.descriptions[i].encode()) + len(corpus.contents[i].encode())
               for i in range(count))


def analyzed_document(corpus: Corpus, i: int) -> list[str]:
    """Memory ``i``'s terms as the index makes them from its text (name and description terms repeated
    ``SUMMARY_WEIGHT`` times): what rank-bm25 and the part 1 engines index."""
    return list(ANALYZER.document(corpus.names[i], corpus.descriptions[i], corpus.contents[i]).elements())


_VOCABULARIES: dict[int, tuple[np.ndarray, list[str]]] = {}


def analyzed_vocabulary(corpus: Corpus) -> tuple[np.ndarray, list[str]]:
    """Each corpus word id's term id under the index's analyzer (-1: a stopword), and the terms by id.

    Stems are per word, so a memory's terms are its word ids mapped through this (several words
    can share a stem); computed once per corpus."""
    if id(corpus) not in _VOCABULARIES:
        terms: dict[str, int] = {}
        term_of = []
        for word in corpus.vocab:
            found = ANALYZER.terms(word)
            assert len(found) <= 1, (word, found)
            term_of.append(terms.setdefault(found[0], len(terms)) if found else -1)
        _VOCABULARIES[id(corpus)] = (np.array(term_of, np.int64), list(terms))
    return _VOCABULARIES[id(corpus)]


def array_index_from_ids(corpus: Corpus, members: np.ndarray | None = None, chunk: int = 50_000) -> bl.ArrayIndex:
    """``baselines.ArrayIndex`` (the exact CSR prototype) over the terms the index scores, built from the
    corpus's word ids without tokenizing the text: each word id mapped to its analyzed term (stopwords
    dropped, stems merged), name and description words counted ``SUMMARY_WEIGHT`` times, k1 and b the
    index's (``projections.search.ranking``).

    ``members``: only these memories (doc i of the prototype = members[i]); None: all.
    """
    term_of, words = analyzed_vocabulary(corpus)
    chosen_all = np.arange(corpus.count) if members is None else np.asarray(members, np.int64)
    n = len(chosen_all)
    lengths = np.zeros(n, np.int64)
    found_terms, found_docs, found_tfs = [], [], []
    for lo in range(0, n, chunk):  # term-major within a chunk; chunks in doc order
        chosen = chosen_all[lo:lo + chunk]
        size = len(chosen)
        starts, ends = corpus.offsets[chosen], corpus.offsets[chosen + 1]
        counts = ends - starts
        tokens = ranges(starts, ends)
        doc = np.repeat(np.arange(size, dtype=np.int64), counts)
        summary = (tokens - np.repeat(starts, counts)) < np.repeat(
            corpus.name_len[chosen].astype(np.int64) + corpus.desc_len[chosen], counts)
        term = term_of[corpus.ids[tokens]]
        keep = term >= 0
        weight = np.where(summary[keep], SUMMARY_WEIGHT, 1)
        keys, inverse = np.unique(term[keep] * size + doc[keep], return_inverse=True)
        found_tfs.append(np.bincount(inverse, weights=weight).astype(np.int64))
        found_terms.append((keys // size).astype(np.int32))
        found_docs.append((keys % size + lo).astype(np.int32))
        lengths[lo:lo + size] = np.bincount(doc[keep], weights=weight, minlength=size).astype(np.int64)
    terms = np.concatenate(found_terms)
    order = np.argsort(terms, kind="stable")  # sorted runs, one per chunk: merged
    proto = bl.ArrayIndex.__new__(bl.ArrayIndex)
    proto.k1, proto.b, proto.analyze = bl.K1, bl.B, tokenize
    proto.vocab = {w: i for i, w in enumerate(words)}
    proto.docs = np.concatenate(found_docs)[order]
    proto.tfs = np.minimum(np.concatenate(found_tfs)[order], 65_535).astype(np.uint16)
    proto.indptr = np.zeros(len(words) + 1, np.int64)
    np.cumsum(np.bincount(terms, minlength=len(words)), out=proto.indptr[1:])
    proto.doc_len = lengths.astype(np.int32)
    proto.n = n
    proto.total_len = int(lengths.sum())
    proto.norm = bl.K1 * (1 - bl.B) + (bl.K1 * bl.B / (proto.total_len / n)) * proto.doc_len
    return proto


def max_score_diff(hits: Sequence, exact: np.ndarray, number: Callable[[str], int]) -> float:
    return max((abs(exact[number(h.memory_id)] - h.score) for h in hits), default=0.0)


def top_ok(hits: Sequence, exact: np.ndarray, number: Callable[[str], int], k: int = 10) -> tuple[int, int]:
    """(hits among our top k whose exact score reaches the exact k-th best, k-or-fewer slots): tie-aware."""
    _, want = bl.top_k(exact, k)
    if not len(want):
        return 0, 0
    cut = want[-1] - 1e-9
    return sum(1 for h in hits[:k] if exact[number(h.memory_id)] >= cut), len(want)


# --- engines for part 1 -------------------------------------------------------------------------

class OurIndex(bl.Engine):
    name = "**memoryd SearchIndex.search**"

    def __init__(self, index: SearchIndex, where: MemoryFilter) -> None:
        self.index, self.where = index, where
        self.exact_scores = True

    def search(self, query: str) -> object:
        return self.index.search(self.where, query, TOP)

    def results(self, query: str) -> tuple[list[int], list[float]]:
        hits = self.index.search(self.where, query, TOP)
        return [doc_number(h.memory_id) for h in hits], [h.score for h in hits]


@dataclass
class Shared:
    """What several parts use: the 100,000-memory corpus, its queries, our built index."""

    args: argparse.Namespace
    corpus: Corpus | None = None
    memories: Memories | None = None
    queries: list[str] = field(default_factory=list)
    build: Build | None = None
    raw: int = 0
    workdir: Path | None = None
    database_url: str = ""
    services: object = None
    missed: list[str] = field(default_factory=list)  # targets that fail the run (part 2's ratios)

    def ensure_corpus(self) -> None:
        if self.corpus is None:
            started = time.perf_counter()
            spec = CorpusSpec(count=self.args.count, seed=self.args.seed)
            self.corpus = generate(spec)
            self.memories = Memories(self.corpus)
            self.queries = make_queries(spec, max(self.args.queries, 200))
            self.raw = corpus_raw_bytes(self.corpus)
            say(f"corpus: {self.corpus.count:,} memories, {mb(self.raw)} MB raw text, "
                f"{time.perf_counter() - started:.1f} s")

    def ensure_index(self) -> Build:
        self.ensure_corpus()
        if self.build is None:
            assert self.memories is not None
            self.build = build_index(self.memories, label="our index")
        return self.build


# --- part 1 -------------------------------------------------------------------------------------

def part1(shared: Shared) -> None:
    args = shared.args
    print(f"\n## Part 1: {args.count:,} memories all visible, top {TOP}, load {load()}\n", flush=True)
    build = shared.ensure_index()
    corpus, queries = shared.corpus, shared.queries[:args.queries]
    assert corpus is not None
    texts = [corpus.text(i) for i in range(corpus.count)]  # for tantivy and FTS5, which analyze on their own
    t0 = time.perf_counter()
    documents = [analyzed_document(corpus, i) for i in range(corpus.count)]  # the index's terms and weights
    tokenize_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()
    chosen = set(args.engines.split(","))
    ours = OurIndex(build.index, GLOBAL_CALLER)
    ours.build_s, ours.rss_bytes = build.build_s, build.rss_after - build.rss_before
    ours.index_bytes, ours.index_note = sum(footprint(build.index).values()), "arrays + Python objects"
    engines: list[bl.Engine] = [ours]
    proto = bl.measure_build("numpy prototype", lambda: bl.NumpyEngine(bl.ArrayIndex(documents, analyze=tokenize)), tokenize_s)
    if "numpy" in chosen:
        engines.append(proto)
    if "floor-sum" in chosen:
        floor = bl.FloorSum(proto.index)  # type: ignore[attr-defined]
        floor.build_s, floor.rss_bytes = proto.build_s, proto.rss_bytes
        engines.append(floor)
    rank = None
    if "rank-bm25" in chosen:
        rank = bl.measure_build("rank-bm25", lambda: bl.RankBM25(documents, analyze=tokenize), tokenize_s)
        engines.append(rank)
    if "bm25s" in chosen:
        engines.append(bl.measure_build("bm25s", lambda: bl.BM25S(documents, analyze=tokenize), tokenize_s))
    if "tantivy" in chosen:
        engines.append(bl.measure_build("tantivy", lambda: bl.Tantivy(texts)))
    if "fts5" in chosen:
        engines.append(bl.measure_build("fts5", lambda: bl.FTS5(texts)))
    n_slow = min(args.slow_queries, len(queries))
    for engine in engines:
        engine.queries = len(queries)
        if isinstance(engine, bl.RankBM25):
            engine.queries = n_slow
        if isinstance(engine, bl.FTS5):
            engine.queries = min(args.fts5_queries, len(queries))

    words = [len(tokenize(q)) for q in queries]
    touched = [proto.index.touched(tokenize(q)) for q in queries]  # type: ignore[attr-defined]
    print(f"- corpus: {corpus.count:,} memories, {mb(shared.raw)} MB raw text, "
          f"{len(proto.index.docs):,} postings; queries {len(queries)} ({np.mean(words):.1f} words avg; "  # type: ignore[attr-defined]
          f"postings touched p50 {pct(touched, 50):,.0f}, p95 {pct(touched, 95):,.0f}); rank-bm25 runs the first "
          f"{n_slow}, FTS5 the first {min(args.fts5_queries, len(queries))}")
    print(f"- our index: built from {build.count:,} RecordedEvents inside `index.bulk()` in {build.build_s:.1f} s "
          f"(feed {build.feed_s:.1f} s incl. tokenizing, final merge {build.merge_s:.1f} s); caller filter = "
          f"global + an empty user scope (the REST envelope)")
    print(f"- the numpy prototype, rank-bm25 and bm25s index the index's own terms (`Analyzer()`: "
          f"{ANALYZER.identity}, name and description counted {SUMMARY_WEIGHT}×) and analyze queries with it; their "
          f"build times include analyzing all text ({tokenize_s:.1f} s); tantivy and FTS5 use their own tokenizers")
    for round_ in range(1, args.rounds + 1):
        say(f"  part 1 round {round_}: load {load()}")
        before = load()
        times = bl.run_queries(engines, queries)
        print(f"\nRound {round_} (load average before {before}, after {load()}):\n")
        base = pct(times[rank.name][:n_slow], 50) if rank else float("nan")
        mine = times[ours.name]
        print(f"| engine | build s | index MB | index / raw | queries | p50 ms | p95 ms | p50 ms, first {n_slow} q "
              f"| speed-up vs rank-bm25 (p50, same {n_slow} q) | engine p50 / ours p50 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for engine in engines:
            t = times[engine.name]
            common = pct(t[:n_slow], 50)
            size = engine.index_bytes if engine.index_bytes is not None else engine.rss_bytes
            note = f" ({engine.index_note})" if engine.index_note else ""
            print(f"| {engine.name} | {engine.build_s:.1f} | {mb(size)}{note} | {size / shared.raw:.2f} | {len(t)} | "
                  f"{pct(t, 50):.2f} | {pct(t, 95):.2f} | {common:.2f} | {base / common:,.0f}× | "
                  f"{pct(t, 50) / pct(mine, 50):.2f} |")
        speedup = base / pct(mine[:n_slow], 50)
        print(f"\nTargets: ours p50 {pct(mine, 50):.2f} ms <= 2: {verdict(pct(mine, 50) <= 2)}; "
              f"p95 {pct(mine, 95):.2f} ms <= 5: {verdict(pct(mine, 95) <= 5)}; "
              f"speed-up vs rank-bm25 {speedup:,.0f}× >= 200: {verdict(speedup >= 200)}", flush=True)

    # Fidelity: our top 10 against the prototype's exact float64 scores (same formula, same statistics).
    exact_engine = proto.index  # type: ignore[attr-defined]
    ok = slots = 0
    diff = 0.0
    for q in queries[:args.fidelity_queries]:
        exact = exact_engine.dense_scores(tokenize(q))
        hits = build.index.search(GLOBAL_CALLER, q, TOP)
        diff = max(diff, max_score_diff(hits, exact, doc_number))
        a, b = top_ok(hits, exact, doc_number)
        ok, slots = ok + a, slots + b
    print(f"\nFidelity on {args.fidelity_queries} queries: our top 10 vs exact BM25 (the prototype's float64): "
          f"{ok}/{slots} tie-aware, max |score diff| over our top {TOP} {diff:.1e}")
    for engine in engines:
        if isinstance(engine, bl.Tantivy):
            engine.close()
    engines.clear()
    gc.unfreeze()
    gc.collect()


# --- part 2 -------------------------------------------------------------------------------------

def part2(shared: Shared) -> None:
    args = shared.args
    count, spaces = args.million_count, args.namespaces
    print(f"\n## Part 2: {count:,} memories in {spaces:,} user namespaces, load {load()}\n", flush=True)
    started = time.perf_counter()
    spec = CorpusSpec(count=count, seed=args.seed, namespaces=spaces)
    corpus = generate(spec, progress=True)
    memories = Memories(corpus)
    gen_s = time.perf_counter() - started
    corpus_rss = rss()
    say(f"  corpus generated in {gen_s:.1f} s, RSS {mb(corpus_rss)} MB")
    build = build_index(memories, max_rss=args.max_rss_gb * 1e9, max_s=args.max_build_s, label=f"our index ({count:,})")
    index = build.index
    gc.collect()
    gc.freeze()
    n = build.count
    raw = corpus_raw_bytes(corpus, n)
    parts = footprint(index)
    print(f"- corpus: {n:,} of {count:,} memories fed{' (' + build.stopped + ')' if build.stopped else ''}, "
          f"{spaces:,} namespaces (`user`/`u00000`...), {mb(raw)} MB raw text; generated in {gen_s:.0f} s")
    print(f"- our index: fed in {build.feed_s:.0f} s ({n / build.feed_s:,.0f} events/s, incl. building the "
          f"RecordedEvents and tokenizing), final merge into one segment {build.merge_s:.1f} s, "
          f"total {build.build_s:.0f} s; RSS {mb(build.rss_before)} -> {mb(build.rss_after)} MB "
          f"(+{mb(build.rss_after - build.rss_before)} MB; process peak {mb(peak_rss())} MB incl. the corpus)")
    print(f"- index footprint: {mb(sum(parts.values()))} MB = {sum(parts.values()) / raw:.2f}× raw text "
          f"(numpy {mb(sum(v for k, v in parts.items() if k.startswith('numpy')))} MB)")

    queries = make_queries(spec, args.queries)
    rng = np.random.default_rng(args.seed)
    callers = rng.choice(spaces, size=len(queries), replace=True)
    members_of = np.argsort(corpus.namespace[:n], kind="stable")
    bounds = np.searchsorted(corpus.namespace[:n][members_of], np.arange(spaces + 1))

    def caller_filter(space: int) -> MemoryFilter:
        return MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", namespace_id(space))))

    # Baselines for the caller: an exact CSR prototype over only the caller's memories (one per query, so
    # both run the same queries), rank-bm25 over them for the first few; all score the index's terms.
    from rank_bm25 import BM25Okapi
    n_base = min(args.slow_queries, len(queries))
    protos, ranks, members = [], [], []
    for k in range(len(queries)):
        space = int(callers[k])
        m = members_of[bounds[space]:bounds[space + 1]]
        members.append(m)
        protos.append(array_index_from_ids(corpus, m))
        if k < n_base:
            documents = [analyzed_document(corpus, d) for d in m.tolist()]
            assert [len(d) for d in documents] == protos[k].doc_len.tolist(), "word ids and the analyzer disagree"
            ranks.append(BM25Okapi(documents, k1=bl.K1, b=bl.B))
    visible = [len(m) for m in members]

    # Exactness: our scores for a caller equal the exact BM25 over only that caller's memories.
    diff = 0.0
    ok = slots = 0
    for k in range(len(queries)):
        hits = index.search(caller_filter(int(callers[k])), queries[k], TOP)
        position = {int(d): i for i, d in enumerate(members[k].tolist())}
        exact = protos[k].dense_scores(tokenize(queries[k]))
        diff = max(diff, max_score_diff(hits, exact, lambda mid, at=position: at[doc_number(mid)]))
        a, b = top_ok(hits, exact, lambda mid, at=position: at[doc_number(mid)])
        ok, slots = ok + a, slots + b

    admin_proto = None
    admin_note = ""
    if not args.no_admin_baseline:
        t0 = time.perf_counter()
        admin_proto = array_index_from_ids(corpus) if n == corpus.count else None
        if admin_proto is not None:
            say(f"  admin prototype (one CSR over all) built in {time.perf_counter() - t0:.1f} s, RSS {mb(rss())} MB")
            admin_diff = 0.0
            admin_ok = admin_slots = 0
            for q in queries[:args.fidelity_queries]:
                hits = index.search(ADMIN, q, TOP)
                exact = admin_proto.dense_scores(tokenize(q))
                admin_diff = max(admin_diff, max_score_diff(hits, exact, doc_number))
                a, b = top_ok(hits, exact, doc_number)
                admin_ok, admin_slots = admin_ok + a, admin_slots + b
            admin_note = (f"; admin (first {args.fidelity_queries} queries) vs the one-CSR prototype {admin_ok}/"
                          f"{admin_slots}, max |score diff| {admin_diff:.1e}")
    print(f"- callers: a random user namespace per query ({np.mean(visible):,.0f} memories visible on average) plus "
          f"the empty global scope; admin: `MemoryFilter(scopes=None)`, all {n:,}")
    print(f"- the prototypes and rank-bm25 score the index's terms: the corpus's word ids mapped through "
          f"`Analyzer()` ({ANALYZER.identity}: stopwords dropped, stems), name and description counted "
          f"{SUMMARY_WEIGHT}×, k1 {bl.K1}, b {bl.B}")
    print(f"- exactness: our top 10 vs exact BM25 over only the caller's memories ({len(queries)} callers) "
          f"{ok}/{slots} tie-aware, max |score diff| {diff:.1e}{admin_note}")

    ratios: dict[str, list[float]] = {"admin": [], "caller": []}
    for round_ in range(1, args.rounds + 1):
        before = load()
        say(f"  part 2 round {round_}: load {before}")
        it = itertools.count()
        caller_ms = timed_loop(lambda q, it=it: index.search(caller_filter(int(callers[next(it) % len(queries)])), q, TOP),
                               queries, args.budget, warm=0)
        it_base = itertools.count()
        proto_ms = timed_loop(lambda q, it=it_base: protos[next(it) % len(queries)].search(q), queries, args.budget,
                              warm=0)
        it_rank = itertools.count()
        rank_ms = timed_loop(lambda q, it=it_rank: bl.top_k(ranks[next(it) % n_base].get_scores(tokenize(q)), TOP),
                             queries[:n_base], args.budget, warm=0)
        admin_ms = timed_loop(lambda q: index.search(ADMIN, q, TOP), queries, args.budget)
        admin_proto_ms = (timed_loop(lambda q: admin_proto.search(q), queries, args.budget)
                          if admin_proto is not None else [])
        caller_ratio = pct(caller_ms, 50) / pct(proto_ms, 50)
        ratios["caller"].append(caller_ratio)
        admin_ratio = pct(admin_ms, 50) / pct(admin_proto_ms, 50) if admin_proto_ms else float("nan")
        if admin_proto_ms:
            ratios["admin"].append(admin_ratio)
        print(f"\nRound {round_} (load average before {before}, after {load()}):\n")
        print("| who | engine | memories searched | queries | p50 ms | p95 ms | ours / prototype p50 | target |")
        print("|---|---|---:|---:|---:|---:|---:|---|")
        print(f"| caller | **memoryd SearchIndex.search** | ~{np.mean(visible):,.0f} of {n:,} | {len(caller_ms)} | "
              f"{pct(caller_ms, 50):.2f} | {pct(caller_ms, 95):.2f} | {caller_ratio:.2f}× | <= {CALLER_RATIO}× |")
        print(f"| caller | numpy prototype over only the caller's memories | ~{np.mean(visible):,.0f} | {len(proto_ms)} | "
              f"{pct(proto_ms, 50):.2f} | {pct(proto_ms, 95):.2f} | | |")
        print(f"| caller | rank-bm25 over only the caller's memories | ~{np.mean(visible):,.0f} | {len(rank_ms)} | "
              f"{pct(rank_ms, 50):.2f} | {pct(rank_ms, 95):.2f} | | |")
        print(f"| admin | **memoryd SearchIndex.search** | {n:,} | {len(admin_ms)} | {pct(admin_ms, 50):.2f} | "
              f"{pct(admin_ms, 95):.2f} | {f'{admin_ratio:.2f}×' if admin_proto_ms else 'no prototype'} | "
              f"<= {ADMIN_RATIO}× |")
        if admin_proto_ms:
            print(f"| admin | numpy prototype, one CSR over all | {n:,} | {len(admin_proto_ms)} | "
                  f"{pct(admin_proto_ms, 50):.2f} | {pct(admin_proto_ms, 95):.2f} | | |")
        print(f"\nOurs (caller) on the first {n_base} queries (rank-bm25's): p50 {pct(caller_ms[:n_base], 50):.2f} ms",
              flush=True)
    footprint_ratio = sum(parts.values()) / raw
    print(f"\nTargets (the median of the {args.rounds} rounds' ratios):\n")
    print("| target | measured | |")
    print("|---|---:|---|")
    checks = [(f"caller search p50 <= {CALLER_RATIO}× the numpy prototype over only the caller's memories",
               float(np.median(ratios["caller"])), CALLER_RATIO),
              (f"index footprint <= {FOOTPRINT_RATIO}× raw text", footprint_ratio, FOOTPRINT_RATIO)]
    if ratios["admin"]:
        checks.insert(0, (f"admin search p50 <= {ADMIN_RATIO}× the one-CSR prototype's",
                          float(np.median(ratios["admin"])), ADMIN_RATIO))
    else:
        print(f"| admin search p50 <= {ADMIN_RATIO}× the one-CSR prototype's | not measured (no prototype) | |")
    for label, measured, target in checks:
        print(f"| {label} | {measured:.2f}× | {verdict(measured <= target)} |")
        if not measured <= target:
            shared.missed.append(f"part 2: {label}: {measured:.3f}×")
    admin_proto = None
    gc.collect()

    # Updates into 1,000-memory namespaces.
    extra = generate(CorpusSpec(count=args.million_updates * args.rounds, seed=args.seed + 1, namespaces=spaces))
    extra_memories = Memories(extra, family=9, time_offset=count)
    touched: set[int] = set()
    for round_ in range(1, args.rounds + 1):
        print()
        update_table(index, extra_memories, args.million_updates,
                     lambda i: (corpus, members_of[bounds[int(extra.namespace[i])]:bounds[int(extra.namespace[i]) + 1]]),
                     memories, caller_filter, first=(round_ - 1) * args.million_updates, touched=touched,
                     title=f"Round {round_}: updates into {n // spaces:,}-memory user namespaces at {n:,}")
    print(f"\nProcess peak RSS {mb(peak_rss())} MB; load {load()}")
    gc.unfreeze()


# --- part 3 -------------------------------------------------------------------------------------

def update_table(index: SearchIndex, fresh: Memories, operations: int,
                 targets: Callable[[int], tuple[Corpus, np.ndarray]], existing: Memories,
                 where_of: Callable[[int], MemoryFilter], title: str, check: bool = True, first: int = 0,
                 touched: set[int] | None = None) -> dict[str, list[float]]:
    """Apply ``operations`` events (50 % adds, 25 % replaces, 25 % deletes), each timed alone.

    Adds take ``fresh`` memories (with a unique word); replaces give an existing memory
    ``fresh`` content (and a unique word); deletes remove an existing memory. ``targets(i)``
    gives the existing memories (corpus numbers) op i may pick from (its namespace). Op j uses
    fresh memory ``first + j``; ``touched`` (shared across rounds) keeps replaced/deleted ones out.
    """
    rng = np.random.default_rng(operations + first)
    kinds = rng.permutation(np.array(["add"] * (operations // 2) + ["replace"] * (operations // 4)
                                     + ["delete"] * (operations - operations // 2 - operations // 4)))
    touched = set() if touched is None else touched
    position = index.position
    times: dict[str, list[float]] = {"add": [], "replace": [], "delete": []}
    seen: dict[str, list[float]] = {"add": [], "replace": []}
    merges: list[tuple[str, float]] = []
    misses = 0
    space_ns = {}
    events: list[tuple[str, RecordedEvent, str, MemoryFilter]] = []
    for j, kind in enumerate(kinds.tolist()):
        i = first + j
        _, pool = targets(i)
        word = f"zqx{i}uniq"
        if kind == "add":
            memory = fresh.record(i, memory_id(i, 9), suffix=f" {word}.")
            event = recorded(position + 1, MEMORY_SAVED, memory)
        else:
            choice = int(pool[rng.integers(len(pool))])
            while choice in touched:
                choice = int(pool[rng.integers(len(pool))])
            touched.add(choice)
            old = existing.record(choice)
            if kind == "replace":
                memory = fresh.record(i, old["memory_id"], suffix=f" {word}.", name=old["name"],
                                      scope=(old["scope"], old["scope_id"]), updated=fresh.updated[i])
                memory["created"] = old["created"]
                event = recorded(position + 1, MEMORY_UPDATED, memory)
            else:
                memory = old
                event = recorded(position + 1, MEMORY_DELETED, memory)
        position += 1
        events.append((kind, event, word, where_of(int(fresh.corpus.namespace[i]))))
        space_ns[j] = (memory["scope"], memory["scope_id"])
    gc.collect()
    gc.disable()
    try:
        for kind, event, word, where in events:
            freezes = index.shape().freezes
            t0 = time.perf_counter_ns()
            index.apply(event)
            t1 = time.perf_counter_ns()
            ms = (t1 - t0) / 1e6
            times[kind].append(ms)
            if index.shape().freezes != freezes:
                merges.append((kind, ms))
            if check and kind != "delete":
                hits = index.search(where, word, 5)
                seen[kind].append((time.perf_counter_ns() - t0) / 1e6)
                if [h.memory_id for h in hits] != [event.payload["memory"]["memory_id"]]:
                    misses += 1
    finally:
        gc.enable()
    print(f"{title}: {operations:,} operations, shuffled (load {load()})\n")
    print("| operation | n | p50 ms | p95 ms | p99 ms | max ms | target (p95) | "
          "| apply + query for its unique word, p50 / p95 ms |")
    print("|---|---:|---:|---:|---:|---:|---|---|---|")
    for kind, target in (("add", 0.5), ("replace", 0.5), ("delete", 0.05)):
        t = times[kind]
        both = (f"{pct(seen[kind], 50):.2f} / {pct(seen[kind], 95):.2f}" if seen.get(kind) else "")
        print(f"| {kind} | {len(t)} | {pct(t, 50):.3f} | {pct(t, 95):.3f} | {pct(t, 99):.3f} | {max(t):.2f} | "
              f"<= {target} ms | {verdict(pct(t, 95) <= target)} | {both} |")
    merge_note = ", ".join(f"{k} {ms:.1f} ms" for k, ms in merges[:8]) + (" ..." if len(merges) > 8 else "")
    print(f"\nDelta freezes during these operations (background merges follow): {len(merges)}"
          + (f" ({merge_note})" if merges else "")
          + (f"; unique-word checks: {sum(len(v) for v in seen.values()) - misses} of "
             f"{sum(len(v) for v in seen.values())} found at once (the only hit)" if check else ""))
    return times


def merge_probe(index: SearchIndex, fresh: Memories, queries: Sequence[str], first: int, adds: int) -> None:
    """Keep adding while background merges run: apply latency, and searches during a merge vs not."""
    position = index.position
    apply_ms: list[float] = []
    during: list[float] = []
    idle: list[float] = []
    shapes = [index.shape()]
    gc.collect()
    gc.disable()
    try:
        for j in range(adds):
            position += 1
            event = recorded(position, MEMORY_SAVED, fresh.record(first + j, memory_id(first + j, 9)))
            t0 = time.perf_counter_ns()
            index.apply(event)
            apply_ms.append((time.perf_counter_ns() - t0) / 1e6)
            if j % 10 == 0:
                merging = index.shape().merging
                t0 = time.perf_counter_ns()
                index.search(GLOBAL_CALLER, queries[j // 10 % len(queries)], TOP)
                (during if merging else idle).append((time.perf_counter_ns() - t0) / 1e6)
            if j % 5_000 == 4_999:
                shapes.append(index.shape())
    finally:
        gc.enable()
    waited = time.perf_counter()
    index.wait_for_merges()
    waited = time.perf_counter() - waited
    print(f"\nBackground merge probe: {adds:,} more adds, a search after every 10th (load {load()}).")
    print(f"Freezes every {index.tuning.freeze_postings:,} postings; {index.tuning.fanout} segments of a size tier "
          "merge into one, off the lock.")
    print()
    print("| measured | n | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, values in (("apply (add)", apply_ms), ("search while a merge ran", during),
                          ("search while none ran", idle)):
        if values:
            print(f"| {label} | {len(values):,} | {pct(values, 50):.3f} | {pct(values, 95):.3f} | "
                  f"{pct(values, 99):.3f} | {max(values):.2f} |")
    print()
    print("Shapes every 5,000 adds (parts read by a query, segments, postings waiting in deltas, merging): "
          + "; ".join(f"{s.parts}/{s.segments}/{s.delta_postings:,}/{'yes' if s.merging else 'no'}" for s in shapes)
          + f". After the probe the last merges finished {waited:.2f} s later: {index.shape()}.")


def part3(shared: Shared) -> None:
    args = shared.args
    print(f"\n## Part 3: updates at {args.count:,}, load {load()}\n", flush=True)
    build = shared.ensure_index()
    index = build.index
    queries = shared.queries[:args.queries]
    assert shared.corpus is not None and shared.memories is not None
    fresh_corpus = generate(CorpusSpec(count=args.updates * args.rounds + args.probe_adds, seed=args.seed + 1))
    fresh = Memories(fresh_corpus, family=9, time_offset=args.count)
    everyone = np.arange(shared.corpus.count)
    search_before = timed_loop(lambda q: index.search(GLOBAL_CALLER, q, TOP), queries, args.budget)
    touched: set[int] = set()
    for round_ in range(1, args.rounds + 1):
        update_table(index, fresh, args.updates, lambda i: (shared.corpus, everyone), shared.memories,
                     lambda _: GLOBAL_CALLER, first=(round_ - 1) * args.updates, touched=touched,
                     title=f"Round {round_}: updates at {args.count:,} (one global namespace)")
        print()

    index.wait_for_merges()
    search_after = timed_loop(lambda q: index.search(GLOBAL_CALLER, q, TOP), queries, args.budget)
    merge_probe(index, fresh, queries, first=args.updates * args.rounds, adds=args.probe_adds)
    print()
    print("| search, global caller | queries | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|")
    print(f"| fresh index (as built: one segment) | {len(search_before)} | {pct(search_before, 50):.2f} | "
          f"{pct(search_before, 95):.2f} |")
    print(f"| after the {args.rounds} × {args.updates:,} operations, merges settled | {len(search_after)} | "
          f"{pct(search_after, 50):.2f} | {pct(search_after, 95):.2f} |")
    settled = timed_loop(lambda q: index.search(GLOBAL_CALLER, q, TOP), queries, args.budget)
    print(f"| after the probe's {args.probe_adds:,} adds, merges settled ({index.shape().parts} parts) | "
          f"{len(settled)} | {pct(settled, 50):.2f} | {pct(settled, 95):.2f} |")
    shared.build = None  # mutated: later parts build their own
    print(f"\nload {load()}", flush=True)


# --- part 4 -------------------------------------------------------------------------------------

def part4(shared: Shared) -> None:
    args = shared.args
    print(f"\n## Part 4: index memory vs raw text at {args.count:,}, load {load()}\n", flush=True)
    shared.ensure_corpus()
    assert shared.memories is not None
    raw = shared.raw
    build = shared.build or shared.ensure_index()
    parts = footprint(build.index)
    total = sum(parts.values())
    print(f"Raw text: {mb(raw)} MB (UTF-8 bytes of name + description + content over {args.count:,} memories).\n")
    print("| component | MB | / raw text |")
    print("|---|---:|---:|")
    for name, value in parts.items():
        print(f"| {name} | {mb(value)} | {value / raw:.3f} |")
    numpy_total = sum(v for k, v in parts.items() if k.startswith("numpy"))
    print(f"| **total (numpy {mb(numpy_total)} + Python {mb(total - numpy_total)})** | **{mb(total)}** | "
          f"**{total / raw:.2f}** |")
    print(f"\nRSS growth across the build (events built lazily): {mb(build.rss_after - build.rss_before)} MB = "
          f"{(build.rss_after - build.rss_before) / raw:.2f}× raw text")
    del build
    # tracemalloc over a separate build (numpy reports its buffers to tracemalloc): what the build
    # holds before the final merge, the merge's peak, and what the index holds after.
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    t0 = time.perf_counter()
    traced = SearchIndex()
    with traced.bulk():
        for i in range(shared.memories.corpus.count):
            traced.apply(recorded(i + 1, MEMORY_SAVED, shared.memories.record(i)))
        gc.collect()
        fed, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
    gc.collect()
    after, merge_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    held = after - base
    print(f"tracemalloc over a separate build ({time.perf_counter() - t0:.0f} s under tracing): the index holds "
          f"{mb(held)} MB after = **{held / raw:.2f}× raw text** (target <= 2×: {verdict(held / raw <= 2)}). "
          f"During the build: the segments frozen so far and the open delta held {mb(fed - base)} MB = "
          f"{(fed - base) / raw:.1f}× before the final merge into one segment; that merge peaked at "
          f"{mb(merge_peak - base)} MB = {(merge_peak - base) / raw:.1f}× (one int64 sort key per posting). "
          f"By getsizeof/nbytes the same index: "
          f"{mb(sum(footprint(traced).values()))} MB")
    traced_build = Build(traced, shared.memories.corpus.count, 0.0, 0.0, 0, 0)
    blob_t0 = time.perf_counter()
    blob = traced_build.index.to_bytes()
    print(f"snapshot (`to_bytes`, the mapped file format): {mb(len(blob))} MB = {len(blob) / raw:.2f}× raw text, "
          f"written in {time.perf_counter() - blob_t0:.1f} s; load avg {load()}")
    del traced_build, traced, blob
    gc.collect()


# --- part 7 -------------------------------------------------------------------------------------

def part7(shared: Shared) -> None:
    """The same live memories as many parts (built live, merges settled) vs one segment (a rebuild)."""
    args = shared.args
    count, spaces, live_adds = args.parts_count, args.parts_namespaces, args.parts_live
    print(f"\n## Part 7: a live index of many parts vs one segment ({count:,} memories in {spaces:,} namespaces), "
          f"load {load()}\n", flush=True)
    spec = CorpusSpec(count=count, seed=args.seed + 7, namespaces=spaces)
    memories = Memories(generate(spec))
    deletes = list(range(0, 3 * (live_adds // 30), 3))  # one delete per 30 live adds, of bulk-loaded memories
    live = SearchIndex()
    started = time.perf_counter()
    with live.bulk():
        for i in range(count - live_adds):
            live.apply(recorded(i + 1, MEMORY_SAVED, memories.record(i)))
    for i in range(count - live_adds, count):
        live.apply(recorded(i + 1, MEMORY_SAVED, memories.record(i)))
        if i % 1_000 == 0:
            time.sleep(0.01)  # room for the merger, as between a live process's requests
    for j, i in enumerate(deletes):
        live.apply(recorded(count + 1 + j, MEMORY_DELETED, memories.record(i)))
    live.wait_for_merges()
    live_s = time.perf_counter() - started
    gone = set(deletes)
    rebuilt = SearchIndex()
    with rebuilt.bulk():
        for position, i in enumerate((i for i in range(count) if i not in gone), 1):
            rebuilt.apply(recorded(position, MEMORY_SAVED, memories.record(i)))
    queries = make_queries(spec, args.queries)
    rng = np.random.default_rng(args.seed + 7)
    callers = rng.choice(spaces, size=len(queries))

    def caller(k: int) -> MemoryFilter:
        return MemoryFilter(scopes=(ScopePattern("global"), ScopePattern("user", namespace_id(int(callers[k])))))

    for k in range(20):  # both shapes answer the same
        for where in (caller(k), ADMIN):
            assert ([(h.memory_id, round(h.score, 9)) for h in live.search(where, queries[k], TOP)]
                    == [(h.memory_id, round(h.score, 9)) for h in rebuilt.search(where, queries[k], TOP)])
    shape = live.shape()
    print(f"- live: {count - live_adds:,} loaded in bulk, then {live_adds:,} adds applied one by one and "
          f"{len(deletes):,} deletes; merges settled ({live_s:.0f} s): {shape.parts} parts ({shape.segments} segments "
          f"+ deltas holding {shape.delta_postings:,} postings), {shape.tombstones:,} tombstones")
    print(f"- rebuilt: the same {len(live):,} live memories in one segment; both give the same top {TOP} "
          f"(20 queries × caller and admin)")
    gc.collect()
    gc.freeze()
    print()
    print("| round | who | live index p50 / p95 ms | rebuilt (one segment) p50 / p95 ms | live / rebuilt p50 |")
    print("|---|---|---:|---:|---:|")
    for round_ in range(1, args.rounds + 1):
        for who in ("caller", "admin"):
            times: dict[str, list[float]] = {"live": [], "rebuilt": []}
            gc.disable()
            for k, query in enumerate(queries):
                where = caller(k) if who == "caller" else ADMIN
                for name, index in (("live", live), ("rebuilt", rebuilt)) if k % 2 else (("rebuilt", rebuilt), ("live", live)):
                    t0 = time.perf_counter_ns()
                    index.search(where, query, TOP)
                    times[name].append((time.perf_counter_ns() - t0) / 1e6)
            gc.enable()
            a, b = times["live"], times["rebuilt"]
            print(f"| {round_} | {who} ({'one namespace of ' + str(spaces) if who == 'caller' else 'all'}) | "
                  f"{pct(a, 50):.2f} / {pct(a, 95):.2f} | {pct(b, 50):.2f} / {pct(b, 95):.2f} | "
                  f"{pct(a, 50) / pct(b, 50):.2f} |")
    gc.unfreeze()
    print(f"\nload {load()}", flush=True)


# --- parts 5 and 6 ------------------------------------------------------------------------------

def services_for(url: str):  # type: ignore[no-untyped-def]
    from memoryd.bootstrap import build_services
    from memoryd.kernel.config import Config, StorageSettings

    return build_services(Config(storage=StorageSettings(database_url=url)))


def ensure_database(shared: Shared) -> tuple[object, bool]:
    """The 100,000-memory SQLite database (imported now unless ``--db`` names one); (services, imported now)."""
    if shared.services is not None:
        return shared.services, False
    args = shared.args
    if args.db and Path(args.db).exists():
        shared.database_url = f"sqlite:///{Path(args.db).resolve()}"
        shared.services = services_for(shared.database_url)
        return shared.services, False
    assert shared.workdir is not None
    path = Path(args.db) if args.db else shared.workdir / "memoryd.db"
    shared.database_url = f"sqlite:///{path.resolve()}"
    from memoryd.app.transfer import import_memories
    from memoryd.storage import migrate

    shared.ensure_corpus()
    assert shared.corpus is not None
    jsonl = shared.workdir / "memories.jsonl"
    t0 = time.perf_counter()
    size = write_jsonl(shared.corpus, jsonl)
    write_s = time.perf_counter() - t0
    services = services_for(shared.database_url)
    migrate.upgrade(services.database)
    done = [0]

    def progress(k: int) -> None:
        done[0] += k
        if done[0] % 10_000 < k:
            say(f"\r  importing {done[0]:,}", end="")

    t0 = time.perf_counter()
    with open(jsonl, encoding="utf-8") as lines:
        created, updated = import_memories(services.bus, lines, 500, progress)
    services.projector.catch_up()
    import_s = time.perf_counter() - t0
    say("")
    print(f"- log: {created:,} memories imported ({updated} updated) from {mb(size)} MB of JSONL (written in "
          f"{write_s:.1f} s) into a fresh SQLite file with `memoryd.app.transfer.import_memories(services.bus, lines, 500)` "
          f"(what `memoryd memories import` runs), projector caught up: **{import_s:.1f} s** "
          f"({created / import_s:,.0f} memories/s); log head {services.store.head_position():,}")
    shared.services = services
    return services, True


def part5(shared: Shared) -> None:
    args = shared.args
    print(f"\n## Part 5: rebuild from a log of {args.count:,} memories (SQLite file), load {load()}\n", flush=True)
    services, _ = ensure_database(shared)
    search = services.search  # type: ignore[attr-defined]
    projector, table = services.projector, services.memory_table  # type: ignore[attr-defined]
    gc.collect()
    rss0 = rss()
    t0 = time.perf_counter()
    index = search.rebuild()
    search_s = time.perf_counter() - t0
    rss1 = rss()
    t0 = time.perf_counter()
    projector.rebuild(table)
    table_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    search.rebuild()
    search2_s = time.perf_counter() - t1
    both = time.perf_counter() - t0
    t0 = time.perf_counter()
    position = search.save_snapshot()
    save_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = search.newest_snapshot()
    load_s = time.perf_counter() - t0
    assert loaded is not None and len(loaded) == len(index)
    with services.database.read() as conn:  # type: ignore[attr-defined]
        from sqlalchemy import func, select

        from memoryd.storage.schema import search_snapshots
        blob_bytes = conn.execute(select(func.max(func.length(search_snapshots.c.data)))).scalar_one()
    del loaded
    print("\n| step | s | target | |")
    print("|---|---:|---|---|")
    print(f"| `SearchService.rebuild()` ({len(index):,} memories, log position {index.position:,}; "
          f"RSS +{mb(rss1 - rss0)} MB) | {search_s:.1f} | <= 15 s | {verdict(search_s <= 15)} |")
    print(f"| `Projector.rebuild(memory_table)` | {table_s:.1f} | | |")
    print(f"| ... then `SearchService.rebuild()` again | {search2_s:.1f} | | |")
    print(f"| table + index together | {both:.1f} | <= 60 s | {verdict(both <= 60)} |")
    print(f"| `save_snapshot()` (to_bytes + insert; {mb(blob_bytes)} MB blob at position {position:,}) | {save_s:.1f} | | |")
    print(f"| load the snapshot (`newest_snapshot`: select, write this host's file, map it) | {load_s:.1f} | | |")
    if args.cli:
        env = server_env(shared)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "memoryd", "projections", "rebuild", "all"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600, check=False)
        cli_s = time.perf_counter() - t0
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
        print(f"| `memoryd projections rebuild all` (subprocess: start-up, table, index, snapshot) | {cli_s:.1f} | "
              f"<= 60 s | {verdict(cli_s <= 60 and done.returncode == 0)} |")
        print(f"\nCLI said: `{last}`")
    print(f"\nload {load()}", flush=True)


def server_env(shared: Shared) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    env.update(MEMORYD_DATABASE_URL=shared.database_url, MEMORYD_ADMIN_TOKEN=shared.args.token,
               PYTHONPATH=str(ROOT))
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def part6(shared: Shared) -> None:
    args = shared.args
    print(f"\n## Part 6: HTTP end to end over {args.count:,} memories, load {load()}\n", flush=True)
    services, _ = ensure_database(shared)
    directory = services.directory  # type: ignore[attr-defined]
    token = args.token
    had_tokens = directory.has_tokens()
    if had_tokens:  # the env token is only adopted for a database without tokens
        user = directory.create_user(f"bench-{uuid.uuid4().hex[:8]}")  # user names are unique
        _, token = directory.create_token(user, ["read", "write"], [])
    snapshot = services.search.snapshot_position()  # type: ignore[attr-defined]
    port = free_port()
    assert shared.workdir is not None
    log_path = shared.workdir / f"serve-{port}.log"
    started = time.perf_counter()
    with open(log_path, "w") as log:
        server = subprocess.Popen([sys.executable, "-m", "memoryd", "serve", "--host", "127.0.0.1", "--port", str(port)],
                                  env=server_env(shared), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        listening = None
        while time.perf_counter() - started < 180:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    listening = time.perf_counter() - started
                    conn.close()
                    break
            except OSError:
                time.sleep(0.05)
            if server.poll() is not None:
                break
        if listening is None:
            print(f"server did not come up; log:\n```\n{log_path.read_text()[-2000:]}\n```")
            return
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        queries = shared.queries or make_queries(CorpusSpec(count=args.count, seed=args.seed), args.queries)
        results: list[int] = []
        sizes: list[int] = []

        def post(query: str) -> None:
            conn.request("POST", "/v1/api/memories/search", body=json.dumps({"query": query, "limit": TOP}),
                         headers=headers)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}: {body[:300]!r}")
            results.append(len(json.loads(body)["memories"]))
            sizes.append(len(body))

        t0 = time.perf_counter()
        post(queries[0])
        first_ms = (time.perf_counter() - t0) * 1e3
        server_rss = process_rss(server.pid)
        origin = (f"a snapshot in the database at position {snapshot:,} (the index loads it, then follows the log)"
                  if snapshot else "no snapshot (the index is built from the log)")
        print(f"- `memoryd serve` (waitress, default 8 threads, projections in-process) on the {args.count:,}-memory "
              f"SQLite file; {origin}")
        print(f"- `/healthz` answered {listening:.1f} s after the process started (its search warm-up thread runs "
              f"from start-up); the first search answered in **{first_ms:,.0f} ms** after that; server RSS then "
              f"{mb(server_rss)} MB")
        print(f"- client: one keep-alive `http.client.HTTPConnection`, `POST /v1/api/memories/search` "
              f"{{query, limit: {TOP}}} with the admin token (REST envelope: global + the admin's user scope)")
        where = GLOBAL_CALLER
        search_service = services.search  # type: ignore[attr-defined]
        index = search_service.catch_up()
        database = services.database  # type: ignore[attr-defined]

        def in_process(q: str) -> object:
            with database.read() as c:
                return search_service.memories(c, where, q, TOP)

        for round_ in range(1, args.rounds + 1):
            before = load()
            http_ms = timed_loop(post, queries[:args.queries], args.budget, warm=0)
            service_ms = timed_loop(in_process, queries[:args.queries], args.budget, warm=0)
            index_ms = timed_loop(lambda q: index.search(where, q, TOP), queries[:args.queries], args.budget, warm=0)
            print(f"\nRound {round_} (load average before {before}, after {load()}; {np.mean(results):.1f} results "
                  f"and {np.mean(sizes) / 1e3:.0f} kB per response on average):\n")
            print("| path | requests | p50 ms | p95 ms | target | |")
            print("|---|---:|---:|---:|---|---|")
            print(f"| **HTTP POST /v1/api/memories/search** (keep-alive) | {len(http_ms)} | {pct(http_ms, 50):.2f} | "
                  f"{pct(http_ms, 95):.2f} | p50 <= 10 ms | {verdict(pct(http_ms, 50) <= 10)} |")
            print(f"| in this process: `SearchService.memories` (catch-up read + index + row fetch) | {len(service_ms)} | "
                  f"{pct(service_ms, 50):.2f} | {pct(service_ms, 95):.2f} | | |")
            print(f"| in this process: `SearchIndex.search` only | {len(index_ms)} | {pct(index_ms, 50):.2f} | "
                  f"{pct(index_ms, 95):.2f} | | |")
        conn.close()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(f"\nload {load()}", flush=True)


# --- main ---------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="", help="comma-separated parts 1-7 (default 1,3-7; 2 with --million)")
    parser.add_argument("--million", action="store_true", help="run part 2 (1,000,000 memories)")
    parser.add_argument("--count", type=int, default=100_000, help="memories for parts 1 and 3-6")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--slow-queries", type=int, default=20, help="rank-bm25's queries (and part 2's baselines)")
    parser.add_argument("--fts5-queries", type=int, default=50)
    parser.add_argument("--fidelity-queries", type=int, default=20)
    parser.add_argument("--engines", default="numpy,floor-sum,rank-bm25,bm25s,tantivy,fts5")
    parser.add_argument("--rounds", type=int, default=2, help="repeat each timing loop (shared machine)")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per timing loop at most")
    parser.add_argument("--updates", type=int, default=2_000, help="part 3 operations")
    parser.add_argument("--probe-adds", type=int, default=20_000, help="part 3: adds while background merges run")
    parser.add_argument("--million-count", type=int, default=1_000_000)
    parser.add_argument("--namespaces", type=int, default=1_000)
    parser.add_argument("--million-updates", type=int, default=1_000)
    parser.add_argument("--max-rss-gb", type=float, default=7.0, help="part 2 stops feeding past this RSS")
    parser.add_argument("--max-build-s", type=float, default=600.0, help="part 2 stops feeding past this")
    parser.add_argument("--no-admin-baseline", action="store_true", help="part 2 without the one-CSR prototype")
    parser.add_argument("--db", help="SQLite file for parts 5-6 (reused if it exists, else created and kept)")
    parser.add_argument("--keep", help="keep the work directory (JSONL, database, server log) here")
    parser.add_argument("--cli", action="store_true", help="part 5 also times `memoryd projections rebuild all`")
    parser.add_argument("--token", default="bench-admin-token-0123456789abcdef", help="MEMORYD_ADMIN_TOKEN for part 6")
    parser.add_argument("--parts-count", type=int, default=230_000, help="part 7: memories")
    parser.add_argument("--parts-namespaces", type=int, default=200, help="part 7: user namespaces")
    parser.add_argument("--parts-live", type=int, default=30_000, help="part 7: of them, applied one by one")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    wanted = {int(p) for p in args.part.split(",") if p.strip()} or ({1, 3, 4, 5, 6, 7} | ({2} if args.million else set()))
    parts = [p for p in (1, 2, 4, 3, 5, 6, 7) if p in wanted]  # part 4 measures the fresh index that part 3 mutates
    if 2 in parts and not args.million:
        parser.error("part 2 (1,000,000 memories, ~8 GB peak, ~4 min) needs --million")

    started = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True, check=False).stdout.strip() or "? (not a git checkout)"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=False).stdout.rstrip()
    print(f"# bench_index.py --part {','.join(map(str, parts))}")
    import projections.search.index as measured
    print(f"\n- code measured: `{measured.__file__}`")
    print(f"- machine: nproc {len(os.sched_getaffinity(0))}, load average {load()} (1/5/15 min) at the start; "
          f"{bl.versions()}; git {commit}"
          f"{' + uncommitted changes in ' + ', '.join(line[3:] for line in dirty.splitlines()) if dirty else ''}")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-index-"))
    workdir.mkdir(parents=True, exist_ok=True)
    shared = Shared(args, workdir=workdir)
    try:
        for part in parts:
            t0 = time.perf_counter()
            {1: part1, 2: part2, 3: part3, 4: part4, 5: part5, 6: part6, 7: part7}[part](shared)  # 4 before 3: 3 mutates
            say(f"part {part} took {time.perf_counter() - t0:.0f} s")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at the end {load()}")
    for missed in shared.missed:
        print(f"missed: {missed}")
        say(f"missed: {missed}")
    if shared.missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
