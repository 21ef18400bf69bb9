"""BM25 search engines side by side on one synthetic corpus: latency, build time, memory, fidelity.

Engines (all single-threaded, all documents visible, top 20, the queries as they come):

* ``numpy index``: the prototype in this file, an array-based inverted index (per
  term a slice of ``int32`` doc ids and ``uint16`` term frequencies in CSR
  layout, a per-document length norm), our exact scoring (Lucene idf, k1 = 1.5,
  b = 0.75, float64) with one ``np.bincount`` into a dense score array, then the
  top 20 through a block-maxima threshold (see ``top_k``; ties at the cut kept,
  ordered by score desc, doc index asc);
* ``floor: sum postings``: the same slices concatenated and summed per document
  with ``np.bincount`` (weights = tf): no BM25 arithmetic, no top-k;
* ``floor: touch postings``: ``tf[slice].sum()`` per query term: just reading them;
* ``rank-bm25`` ``BM25Okapi`` (our tokenizer; its own idf, see the fidelity table);
* ``bm25s`` (``method="lucene"``, k1 = 1.5, b = 0.75, our tokens, numpy backend,
  ``retrieve(k=20)``): scores precomputed at index time (float32);
* ``tantivy`` (python bindings; one text field with ``freq`` postings, default
  tokenizer, a ``boolean_query`` of ``Should`` term queries, ``search(limit=20,
  count=False)`` so block-WAND can prune; BM25 with k1 = 1.2 fixed);
* ``sqlite fts5`` (stdlib sqlite3, in-memory, contentless, ``unicode61``,
  ``MATCH '"w1" OR "w2" ...' ORDER BY rank LIMIT 20``, i.e. ``bm25()``; optimized
  after the load).

Each search call starts from the raw query string (tokenizing it is part of the
call). Fast engines run every query, slow ones a prefix of the same list; queries
are interleaved across engines in rotating order so background load hits all of
them alike. ``speed-up`` compares p50s over the same first ``--slow-queries``
queries (the ones rank-bm25 runs).

Build time includes tokenizing the raw text (our tokenizer for numpy, rank-bm25,
bm25s; the engine's own for tantivy and FTS5). Index size: exact array bytes
(numpy, bm25s, + vocabulary dict), on-disk bytes (tantivy), page bytes (FTS5);
``RSS +`` is the process's resident-set growth across the build (rough: allocator
reuse, mmap), the only figure for rank-bm25.

Fidelity: the exact reference is ``bm25_scores`` (plain Python, formerly in
``projections.search.ranking``; checked on
``--exact-queries`` queries against the numpy index's float64 scores), then the
numpy index's exact scores on the first ``--slow-queries`` queries. ``top-10 ok`` is
the share of an engine's top 10 whose exact score reaches the exact 10th score
(tie-aware: any valid exact top 10 counts); ``top-10 same`` is plain set overlap.

    .venv/bin/python bench/search/baselines.py                 # 100,000 memories
    .venv/bin/python bench/search/baselines.py --count 20000   # quick
    .venv/bin/python bench/search/baselines.py --engines numpy,tantivy
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.metadata
import math
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from corpus import CorpusSpec, generate, make_queries

from projections.search.analysis import Analyzer
from projections.search.ranking import K1, B, idf

tokenize = Analyzer("none").terms  # the words as written: every engine compared sees the same ones

try:
    from projections.search.ranking import bm25_scores
except ImportError:
    def bm25_scores(documents: Sequence[Sequence[str]], query: Sequence[str], k1: float = K1,
                    b: float = B) -> list[float]:
        """The plain-Python reference that ``projections/ranking.py`` had (commit b62573e): one score per document."""
        scores = [0.0] * len(documents)
        if not documents:
            return scores
        average_length = sum(len(doc) for doc in documents) / len(documents)
        counts = [Counter(doc) for doc in documents]
        for word, repeats in Counter(query).items():
            holders = [index for index, count in enumerate(counts) if word in count]
            if not holders:
                continue
            weight = repeats * idf(len(documents), len(holders))
            for index in holders:
                frequency = counts[index][word]
                norm = k1 * (1 - b + b * len(documents[index]) / average_length)
                scores[index] += weight * frequency * (k1 + 1) / (frequency + norm)
        return scores

TOP = 20
ALL_ENGINES = ("numpy", "floor-sum", "floor-touch", "rank-bm25", "bm25s", "tantivy", "fts5")


# --- the prototype ----------------------------------------------------------------------------

class ArrayIndex:
    """Immutable CSR inverted index over token lists; exact BM25 (Lucene idf) over all documents."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = K1, b: float = B,
                 analyze: Callable[[str], list[str]] = tokenize) -> None:
        self.k1, self.b = k1, b
        self.analyze = analyze  # a query's terms: the analyzer that made ``documents``
        n = len(documents)
        lengths = np.fromiter((len(d) for d in documents), dtype=np.int64, count=n)
        vocab: dict[str, int] = {}
        add = vocab.setdefault
        term_ids = np.fromiter((add(w, len(vocab)) for d in documents for w in d), dtype=np.int64,
                               count=int(lengths.sum()))
        doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys, tf = np.unique(term_ids * n + doc_of, return_counts=True)  # sorted by (term, doc)
        del term_ids, doc_of
        terms = keys // n
        self.vocab = vocab
        self.docs = (keys % n).astype(np.int32)
        self.tfs = np.minimum(tf, np.iinfo(np.uint16).max).astype(np.uint16)
        self.indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=len(vocab)), out=self.indptr[1:])
        self.doc_len = lengths.astype(np.int32)
        self.n = n
        self.total_len = int(lengths.sum())
        # Per-document BM25 length norm k1 * (1 - b + b * len / avgdl): depends on avgdl, so a live
        # index recomputes it (O(visible documents), ~0.1 ms at 100,000) when the statistics change.
        self.norm = k1 * (1 - b) + (k1 * b / (self.total_len / n)) * self.doc_len

    def nbytes(self) -> int:
        arrays = self.docs.nbytes + self.tfs.nbytes + self.indptr.nbytes + self.doc_len.nbytes + self.norm.nbytes
        return arrays + _dict_bytes(self.vocab)

    def _terms(self, words: Sequence[str]) -> list[tuple[int, int]]:
        counts = Counter(words)
        return [(self.vocab[w], r) for w, r in counts.items() if w in self.vocab]

    def dense_scores(self, words: Sequence[str]) -> np.ndarray:
        """Exact BM25 of every document (float64), zero where no query word occurs."""
        terms = self._terms(words)
        if not terms:
            return np.zeros(self.n)
        n, k1 = self.n, self.k1
        docs_parts, score_parts = [], []
        for term, repeats in terms:
            lo, hi = self.indptr[term], self.indptr[term + 1]
            weight = repeats * idf(n, int(hi - lo)) * (k1 + 1)
            d = self.docs[lo:hi]
            tf = self.tfs[lo:hi].astype(np.float64)
            part = self.norm[d]
            part += tf
            np.divide(tf, part, out=part)
            part *= weight  # weight * tf / (tf + norm)
            score_parts.append(part)
            docs_parts.append(d)
        if len(docs_parts) == 1:
            scores = np.zeros(n)
            scores[docs_parts[0]] = score_parts[0]
            return scores
        return np.bincount(np.concatenate(docs_parts), weights=np.concatenate(score_parts), minlength=n)

    def variant_scores(self, words: Sequence[str], k1: float, idf_fn: Callable[[int, int], float],
                       lengths: np.ndarray | None = None) -> np.ndarray:
        """Dense scores under another engine's parameters (b kept; ``lengths`` replaces each
        document's length in the norm, avgdl stays the true mean), to explain where it differs."""
        n = self.n
        doc_len = self.doc_len if lengths is None else lengths
        norm = k1 * (1 - self.b) + (k1 * self.b / (self.total_len / n)) * doc_len
        scores = np.zeros(n)
        for term, repeats in self._terms(words):
            lo, hi = self.indptr[term], self.indptr[term + 1]
            d = self.docs[lo:hi]
            tf = self.tfs[lo:hi].astype(np.float64)
            scores[d] += repeats * idf_fn(n, int(hi - lo)) * (k1 + 1) * tf / (tf + norm[d])
        return scores

    def search(self, query: str, k: int = TOP) -> tuple[np.ndarray, np.ndarray]:
        return top_k(self.dense_scores(self.analyze(query)), k)

    def floor_sum(self, query: str) -> np.ndarray:
        terms = self._terms(self.analyze(query))
        if not terms:
            return np.zeros(0)
        parts = [(self.indptr[t], self.indptr[t + 1]) for t, _ in terms]
        docs = np.concatenate([self.docs[lo:hi] for lo, hi in parts])
        tfs = np.concatenate([self.tfs[lo:hi] for lo, hi in parts])
        return np.bincount(docs, weights=tfs, minlength=self.n)

    def floor_touch(self, query: str) -> int:
        total = 0
        for t, _ in self._terms(self.analyze(query)):
            total += int(self.tfs[self.indptr[t]:self.indptr[t + 1]].sum(dtype=np.int64))
        return total

    def touched(self, words: Sequence[str]) -> int:
        return sum(int(self.indptr[t + 1] - self.indptr[t]) for t, _ in self._terms(words))


def top_k(scores: np.ndarray, k: int, block: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """The k best positive scores: score desc, then index asc; everything tied at the cut considered.

    ``np.argpartition`` over 100,000 floats costs ~1 ms (and up to ~15 ms on some score
    distributions). Instead: the k-th largest of the per-block maxima is a lower bound
    on the k-th largest score (k blocks each hold a score at least that high), so only
    scores reaching it can be in the top k; ~0.15 ms at 100,000.
    """
    full = len(scores) - len(scores) % block
    threshold = 0.0
    if full // block > k:
        maxima = scores[:full].reshape(-1, block).max(axis=1)
        threshold = float(np.partition(maxima, len(maxima) - k)[len(maxima) - k])
    candidates = np.flatnonzero(scores >= threshold) if threshold > 0 else np.flatnonzero(scores > 0)
    chosen = scores[candidates]
    order = np.lexsort((candidates, -chosen))[:k]
    return candidates[order], chosen[order]


def _tantivy_fieldnorm(lengths: np.ndarray) -> np.ndarray:
    """Document lengths as tantivy stores them: one byte, decoded through FIELD_NORMS_TABLE
    (identity below 24, then 3-bit mantissa steps; src/fieldnorm/code.rs)."""
    def decode(byte: int) -> int:
        if byte < 24:
            return byte
        b = byte - 24
        bits, shift = b & 0b111, b >> 3
        return 24 + (bits if shift == 0 else (bits | 8) << (shift - 1))
    table = np.array([decode(i) for i in range(256)], dtype=np.int64)
    return table[np.searchsorted(table, lengths, side="right") - 1]


def _fts5_idf(n: int, df: int) -> float:
    return max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)


def _rank_idf(bm: object) -> Callable[[int, int], float]:
    eps = bm.epsilon * bm.average_idf  # type: ignore[attr-defined]

    def rank_idf(n: int, df: int) -> float:
        value = math.log(n - df + 0.5) - math.log(df + 0.5)
        return eps if value < 0 else value
    return rank_idf


def _dict_bytes(vocab: dict[str, int]) -> int:
    return sys.getsizeof(vocab) + sum(sys.getsizeof(w) for w in vocab) + 28 * len(vocab)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _dir_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# --- engines ----------------------------------------------------------------------------------

class Engine:
    name = ""
    queries = 0
    index_bytes: int | None = None
    index_note = ""
    build_s = 0.0
    rss_bytes = 0
    exact_scores = False  # its scores are ours (up to a constant factor)

    def search(self, query: str) -> object:
        raise NotImplementedError

    def results(self, query: str) -> tuple[list[int], list[float]]:
        """Doc indices (best first) and scores, for fidelity; untimed."""
        raise NotImplementedError


class NumpyEngine(Engine):
    name = "numpy index (prototype)"

    def __init__(self, index: ArrayIndex) -> None:
        self.index = index
        self.index_bytes = index.nbytes()
        self.index_note = "arrays + vocab"
        self.exact_scores = True

    def search(self, query: str) -> object:
        return self.index.search(query)

    def results(self, query: str) -> tuple[list[int], list[float]]:
        docs, scores = self.index.search(query)
        return docs.tolist(), scores.tolist()


class FloorSum(NumpyEngine):
    name = "floor: sum postings (bincount)"

    def search(self, query: str) -> object:
        return self.index.floor_sum(query)


class FloorTouch(NumpyEngine):
    name = "floor: touch postings (tf.sum)"

    def search(self, query: str) -> object:
        return self.index.floor_touch(query)


class RankBM25(Engine):
    name = "rank-bm25 BM25Okapi"

    def __init__(self, documents: Sequence[Sequence[str]], analyze: Callable[[str], list[str]] = tokenize) -> None:
        from rank_bm25 import BM25Okapi

        self.bm = BM25Okapi(documents, k1=K1, b=B)
        self.analyze = analyze
        self.index_note = "RSS growth"

    def search(self, query: str) -> object:
        return top_k(self.bm.get_scores(self.analyze(query)), TOP)

    def results(self, query: str) -> tuple[list[int], list[float]]:
        docs, scores = self.search(query)
        return docs.tolist(), scores.tolist()

    def with_lucene_idf(self, index: ArrayIndex) -> RankBM25:
        """A copy whose idf is ours (the issue's oracle set-up); shares the postings dicts."""
        other = copy.copy(self)
        other.bm = copy.copy(self.bm)
        other.bm.idf = {w: idf(index.n, int(index.indptr[t + 1] - index.indptr[t])) for w, t in index.vocab.items()}
        other.name = "rank-bm25 (idf := Lucene)"
        other.exact_scores = True
        return other


class BM25S(Engine):
    name = "bm25s (lucene, numpy)"

    def __init__(self, documents: Sequence[Sequence[str]], analyze: Callable[[str], list[str]] = tokenize) -> None:
        import bm25s

        self.analyze = analyze
        self.retriever = bm25s.BM25(k1=K1, b=B, method="lucene")
        self.retriever.index([list(d) for d in documents], show_progress=False)
        s = self.retriever.scores
        self.index_bytes = s["data"].nbytes + s["indices"].nbytes + s["indptr"].nbytes + _dict_bytes(self.retriever.vocab_dict)
        self.index_note = "sparse matrix + vocab"
        self.exact_scores = True  # ours / (k1 + 1), float32

    def search(self, query: str) -> object:
        return self.retriever.retrieve([self.analyze(query)], k=TOP, show_progress=False, n_threads=0)

    def results(self, query: str) -> tuple[list[int], list[float]]:
        docs, scores = self.search(query)
        keep = scores[0] > 0
        return docs[0][keep].tolist(), (scores[0][keep] * (K1 + 1)).astype(np.float64).tolist()


class Tantivy(Engine):
    name = "tantivy"

    def __init__(self, texts: Sequence[str]) -> None:
        import tantivy

        self.tantivy = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_unsigned_field("id", stored=True)
        builder.add_text_field("body", stored=False, tokenizer_name="default", index_option="freq")
        self.schema = builder.build()
        self.path = tempfile.mkdtemp(prefix="bench-tantivy-")
        self.index = tantivy.Index(self.schema, path=self.path)
        writer = self.index.writer(heap_size=256_000_000, num_threads=1)
        for i, text in enumerate(texts):
            doc = tantivy.Document()
            doc.add_unsigned("id", i)
            doc.add_text("body", text)
            writer.add_document(doc)
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.index_bytes = _dir_bytes(self.path)
        self.index_note = f"on disk, {self.searcher.num_segments} segment(s)"
        self.should = tantivy.Occur.Should

    def _query(self, query: str):
        q = self.tantivy.Query
        return q.boolean_query([(self.should, q.term_query(self.schema, "body", w, index_option="freq"))
                                for w in tokenize(query)])

    def search(self, query: str) -> object:
        return self.searcher.search(self._query(query), TOP, count=False).hits

    def results(self, query: str) -> tuple[list[int], list[float]]:
        hits = self.search(query)
        return [self.searcher.doc(a)["id"][0] for _, a in hits], [s for s, _ in hits]

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class FTS5(Engine):
    name = "sqlite fts5 bm25()"

    def __init__(self, texts: Sequence[str]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, content='', tokenize='unicode61')")
        with self.db:
            self.db.executemany("INSERT INTO docs(rowid, body) VALUES (?, ?)", ((i + 1, t) for i, t in enumerate(texts)))
        with self.db:
            self.db.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        self.index_bytes = pages * self.db.execute("PRAGMA page_size").fetchone()[0]
        self.index_note = "pages, contentless"

    def search(self, query: str) -> object:
        words = tokenize(query)
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        return self.db.execute("SELECT rowid, rank FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?",
                               (match, TOP)).fetchall()

    def results(self, query: str) -> tuple[list[int], list[float]]:
        rows = self.search(query)
        return [r - 1 for r, _ in rows], [-s for _, s in rows]


# --- measurement ------------------------------------------------------------------------------

def measure_build(label: str, make: Callable[[], Engine], extra_s: float = 0.0) -> Engine:
    gc.collect()
    before = _rss()
    started = time.perf_counter()
    engine = make()
    engine.build_s = time.perf_counter() - started + extra_s
    gc.collect()
    engine.rss_bytes = _rss() - before
    print(f"  built {label} in {engine.build_s:.1f} s", file=sys.stderr, flush=True)
    return engine


def run_queries(engines: list[Engine], queries: list[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {e.name: [] for e in engines}
    for engine in engines:  # warm-up
        for q in queries[-3:]:
            engine.search(q)
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        for qi, q in enumerate(queries):
            shift = qi % len(engines)
            for engine in engines[shift:] + engines[:shift]:
                if qi >= engine.queries:
                    continue
                t0 = time.perf_counter_ns()
                engine.search(q)
                times[engine.name].append((time.perf_counter_ns() - t0) / 1e6)
            if qi % 20 == 19:
                print(f"\r  queries {qi + 1}/{len(queries)}", end="", file=sys.stderr, flush=True)
    finally:
        gc.enable()
        gc.unfreeze()
    print(file=sys.stderr)
    return times


def pct(values: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def fidelity(engine: Engine, queries: list[str], exact: list[np.ndarray]) -> dict[str, float]:
    ok = same = 0
    slots = 0
    max_diff = 0.0
    for q, scores in zip(queries, exact):
        docs, got = engine.results(q)
        docs, got = docs[:10], got[:10]
        want_docs, want = top_k(scores, 10)
        if len(want) == 0:
            continue
        cut = want[-1] - 1e-9
        slots += len(want)
        ok += sum(1 for d in docs if scores[d] >= cut)
        same += len(set(docs) & set(want_docs.tolist()))
        if engine.exact_scores:
            max_diff = max(max_diff, max((abs(scores[d] - s) for d, s in zip(docs, got)), default=0.0))
    return {"ok": ok / slots if slots else float("nan"), "same": same / slots if slots else float("nan"),
            "max_diff": max_diff if engine.exact_scores else float("nan")}


def versions() -> str:
    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}", f"sqlite {sqlite3.sqlite_version}"]
    for pkg in ("rank-bm25", "bm25s", "tantivy"):
        try:
            parts.append(f"{pkg} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{pkg} missing")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="memories (all visible)")
    parser.add_argument("--queries", type=int, default=200, help="queries for the fast engines")
    parser.add_argument("--slow-queries", type=int, default=20, help="queries for rank-bm25 (and the fidelity check)")
    parser.add_argument("--fts5-queries", type=int, default=50)
    parser.add_argument("--exact-queries", type=int, default=3, help="queries checked against projections.search.ranking")
    parser.add_argument("--engines", default=",".join(ALL_ENGINES), help=f"comma-separated subset of {ALL_ENGINES}")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    chosen = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(chosen) - set(ALL_ENGINES)
    if unknown:
        parser.error(f"unknown engines: {sorted(unknown)}")

    load_before = os.getloadavg()
    started = time.perf_counter()
    spec = CorpusSpec(count=args.count, seed=args.seed)
    corpus = generate(spec)
    texts = [corpus.text(i) for i in range(corpus.count)]
    raw = sum(len(t.encode()) for t in texts)
    queries = make_queries(spec, max(args.queries, args.slow_queries, args.fts5_queries))
    print(f"corpus: {corpus.count:,} memories, {raw / 1e6:.1f} MB text, generated in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)

    t0 = time.perf_counter()
    documents = [tokenize(t) for t in texts]
    tokenize_s = time.perf_counter() - t0
    gc.collect()
    gc.freeze()  # the token lists are long-lived: keep them out of collections

    index = measure_build("numpy", lambda: ArrayIndex(documents), tokenize_s)
    engines: list[Engine] = []
    n_slow = min(args.slow_queries, len(queries))
    if "numpy" in chosen:
        engines.append(NumpyEngine(index))
        engines[-1].build_s, engines[-1].rss_bytes = index.build_s, index.rss_bytes
    for key, cls in (("floor-sum", FloorSum), ("floor-touch", FloorTouch)):
        if key in chosen:
            engines.append(cls(index))
            engines[-1].build_s, engines[-1].rss_bytes = index.build_s, index.rss_bytes
    rank = None
    if "rank-bm25" in chosen:
        rank = measure_build("rank-bm25", lambda: RankBM25(documents), tokenize_s)
        engines.append(rank)
    if "bm25s" in chosen:
        engines.append(measure_build("bm25s", lambda: BM25S(documents), tokenize_s))
    if "tantivy" in chosen:
        engines.append(measure_build("tantivy", lambda: Tantivy(texts)))
    if "fts5" in chosen:
        engines.append(measure_build("fts5", lambda: FTS5(texts)))
    for engine in engines:
        engine.queries = args.queries
    if rank:
        rank.queries = n_slow
    for engine in engines:
        if isinstance(engine, FTS5):
            engine.queries = args.fts5_queries

    times = run_queries(engines, queries[:max(e.queries for e in engines)])

    # Fidelity: exact scores on the first n_slow queries, checked against projections.search.ranking.
    exact = [index.dense_scores(tokenize(q)) for q in queries[:n_slow]]
    oracle_diff = 0.0
    for q, mine in list(zip(queries, exact))[:args.exact_queries]:
        print("  oracle: plain-Python bm25_scores ...", file=sys.stderr, flush=True)
        reference = np.asarray(bm25_scores(documents, tokenize(q)))
        oracle_diff = max(oracle_diff, float(np.abs(reference - mine).max()))
    checked = list(engines)
    if rank:
        checked.insert(checked.index(rank) + 1, rank.with_lucene_idf(index))
    fid = {e.name: fidelity(e, queries[:n_slow], exact)
           for e in checked if not isinstance(e, (FloorSum, FloorTouch))}
    # Where an engine differs, score the same postings with its parameters: what is left is its own doing.
    explained: dict[str, tuple[str, dict[str, float]]] = {}
    for e in checked:
        if isinstance(e, Tantivy):
            why = "k1 1.2 (tantivy's fixed k1), Lucene idf"
            ref = [index.variant_scores(tokenize(q), 1.2, idf) for q in queries[:n_slow]]
            explained[e.name] = (why, fidelity(e, queries[:n_slow], ref))
            why = "... and lengths rounded down to tantivy's 1-byte fieldnorms (exact to 40 tokens)"
            quantized = _tantivy_fieldnorm(index.doc_len)
            ref = [index.variant_scores(tokenize(q), 1.2, idf, quantized) for q in queries[:n_slow]]
            explained[e.name + " "] = (why, fidelity(e, queries[:n_slow], ref))
            continue
        elif isinstance(e, FTS5):
            why = "k1 1.2, idf ln((N-df+0.5)/(df+0.5)) floored at 1e-6 (FTS5's bm25())"
            ref = [index.variant_scores(tokenize(q), 1.2, _fts5_idf) for q in queries[:n_slow]]
        elif isinstance(e, RankBM25) and not e.exact_scores:
            why = "rank-bm25's idf ln((N-df+0.5)/(df+0.5)), negatives := 0.25 x mean idf"
            ref = [index.variant_scores(tokenize(q), K1, _rank_idf(e.bm)) for q in queries[:n_slow]]
        else:
            continue
        explained[e.name] = (why, fidelity(e, queries[:n_slow], ref))
    load_after = os.getloadavg()

    touched = [index.touched(tokenize(q)) for q in queries[:args.queries]]
    words = [len(tokenize(q)) for q in queries[:args.queries]]
    base = pct(times[rank.name], 50) if rank else float("nan")
    print()
    print(f"## BM25 engines, {corpus.count:,} memories all visible, top {TOP}")
    print()
    print(f"- corpus: {raw / 1e6:.1f} MB raw text (name + description + content), {index.total_len:,} tokens, "
          f"{len(index.vocab):,} distinct, {len(index.docs):,} postings; avg {index.total_len / index.n:.1f} tokens/memory")
    print(f"- queries: {args.queries} (rank-bm25 {n_slow}, FTS5 {min(args.fts5_queries, args.queries)}), "
          f"{np.mean(words):.1f} words avg; postings touched per query p50 {pct(touched, 50):,.0f}, "
          f"p95 {pct(touched, 95):,.0f}")
    print(f"- tokenizing all text with projections.search.ranking.tokenize: {tokenize_s:.1f} s "
          "(included in the builds that use it)")
    print(f"- machine: {os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {versions()}")
    print()
    print(f"| engine | build s | index MB | index / raw text | RSS + MB | queries | p50 ms | p95 ms | "
          f"p50 ms, first {n_slow} q | speed-up vs rank-bm25 (p50, same {n_slow} q) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for engine in engines:
        t = times[engine.name]
        p50_common = pct(t[:n_slow], 50)
        size = engine.index_bytes if engine.index_bytes is not None else engine.rss_bytes
        note = f" ({engine.index_note})" if engine.index_note else ""
        print(f"| {engine.name} | {engine.build_s:.1f} | {size / 1e6:.1f}{note} | {size / raw:.2f} | "
              f"{engine.rss_bytes / 1e6:.0f} | {len(t)} | {pct(t, 50):.2f} | {pct(t, 95):.2f} | {p50_common:.2f} | "
              f"{base / p50_common:.0f}× |")
    print()
    print(f"## Fidelity vs exact BM25 (Lucene idf, k1 {K1}, b {B}) on the first {n_slow} queries")
    print()
    print(f"Exact reference: the numpy index's float64 scores, equal to the plain-Python bm25_scores on "
          f"{args.exact_queries} queries (max |score diff| "
          f"{oracle_diff:.1e} over all {corpus.count:,} documents) and to rank-bm25 with its idf replaced by ours.")
    print()
    print("| engine | top-10 ok (tie-aware) | top-10 same set | max score diff (engines scoring like us) |")
    print("|---|---:|---:|---:|")
    for name, f in fid.items():
        diff = "" if math.isnan(f["max_diff"]) else f"{f['max_diff']:.1e}"
        print(f"| {name} | {f['ok']:.1%} | {f['same']:.1%} | {diff} |")
    if explained:
        print()
        print("Against a reference scored with the engine's own parameters on our postings:")
        print()
        print("| engine | reference | top-10 ok (tie-aware) | top-10 same set |")
        print("|---|---|---:|---:|")
        for name, (why, f) in explained.items():
            print(f"| {name} | {why} | {f['ok']:.1%} | {f['same']:.1%} |")
    print()
    print(f"total run {time.perf_counter() - started:.0f} s")
    for engine in engines:
        if isinstance(engine, Tantivy):
            engine.close()


if __name__ == "__main__":
    main()
