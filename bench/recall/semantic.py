"""The semantic channel's rankers for bench_recall.py, run in-process on one user's memories.

* **BM25 scores**: memoryd's own analyzer (stems, stopwords, summary counted twice) and Okapi BM25 with
  memoryd's k1 and b, every memory of the user scored: the exact figures the index answers with.
* **vectors**: each memory embedded as the vectors projection embeds it (``memory_text``), the question as
  a turn's query is; cosine similarity is a dot product of unit vectors.
* **BM25 alone** (the fusion without vectors: memoryd search's ranking, as a check of the BM25 here),
  **fused** (``projections.search.fusion``, what memoryd ranks by with ``semantic`` on) and **RRF** (plain
  reciprocal-rank fusion of the two channels' top 100, k = 60: the baseline the issue names).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's memoryd, not an installed one

from memoryd.embeddings.embedder import Embedder, memory_text
from projections.search.analysis import Analyzer
from projections.search.fusion import Fusion, fused_ranking
from projections.search.ranking import K1, B, idf

RRF_K = 60  # the constant of Cormack et al. (2009), as every RRF baseline uses it
RRF_DEPTH = 100  # each channel's list that RRF fuses
Ranker = Callable[[str], list[str]]


class Channels:
    """One user's memories, scored by BM25 and by vector similarity for any question."""

    def __init__(self, memories: Sequence[Any], embedder: Embedder, analyzer: Analyzer, cached: dict[str, np.ndarray],
                 k1: float = K1, b: float = B) -> None:
        self.names = [memory.name for memory in memories]
        self.analyzer, self.embedder, self.cached, self.k1, self.b = analyzer, embedder, cached, k1, b
        documents = [analyzer.document(m.name, m.description, m.content) for m in memories]
        self.lengths = np.array([sum(counts.values()) for counts in documents], dtype=np.float64)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for at, counts in enumerate(documents):
            for term, frequency in counts.items():
                postings.setdefault(term, ([], []))[0].append(at)
                postings[term][1].append(frequency)
        self.postings = {term: (np.array(where), np.array(tfs, dtype=np.float64)) for term, (where, tfs) in postings.items()}
        self.vectors = self.embedded([memory_text(m.description, m.content) for m in memories])

    def embedded(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, each text embedded once per run (questions repeat across kinds)."""
        missing = list(dict.fromkeys(text for text in texts if text not in self.cached))
        if missing:
            self.cached.update(zip(missing, self.embedder.embed(missing)))
        return np.array([self.cached[text] for text in texts]).reshape(len(texts), self.embedder.dimension)

    def bm25(self, question: str) -> np.ndarray:
        """Every memory's Okapi BM25 score for ``question`` (0: no word in common)."""
        scores = np.zeros(len(self.lengths))
        average = self.lengths.mean() if len(self.lengths) else 1.0
        norms = self.k1 * (1 - self.b + self.b * self.lengths / average)
        for term, times in Counter(self.analyzer.terms(question)).items():
            if term in self.postings:
                where, tfs = self.postings[term]
                scores[where] += times * idf(len(scores), len(where)) * (self.k1 + 1) * tfs / (tfs + norms[where])
        return scores

    def similarities(self, question: str) -> np.ndarray:
        return self.vectors @ self.embedded([question])[0]


def bm25_ranker(channels: Channels, top: int) -> Ranker:
    """BM25 alone, as the fusion ranks without vectors: memoryd search's ranking, computed in-process."""
    def rank(question: str) -> list[str]:
        return fused_ranking(dict(zip(channels.names, channels.bm25(question))), {})[:top]

    return rank


def fused_ranker(channels: Channels, fusion: Fusion, top: int) -> Ranker:
    def rank(question: str) -> list[str]:
        ranking = fused_ranking(dict(zip(channels.names, channels.bm25(question))),
                                dict(zip(channels.names, channels.similarities(question))), fusion)
        return ranking[:top]

    return rank


def rrf_ranker(channels: Channels, top: int) -> Ranker:
    """Reciprocal-rank fusion: 1 / (k + rank) summed over the lists a memory is in (BM25: positive scores only)."""
    def rank(question: str) -> list[str]:
        fused: dict[str, float] = {}
        bm25, similarities = channels.bm25(question), channels.similarities(question)
        lexical = [at for at in np.argsort(-bm25, kind="stable")[:RRF_DEPTH] if bm25[at] > 0]
        semantic = np.argsort(-similarities, kind="stable")[:RRF_DEPTH]
        for ranked in (lexical, semantic):
            for place, at in enumerate(ranked, 1):
                fused[channels.names[at]] = fused.get(channels.names[at], 0.0) + 1 / (RRF_K + place)
        return sorted(fused, key=lambda name: -fused[name])[:top]

    return rank
