"""A search with the semantic channel on: BM25's best matches and the vectors' closest memories, fused
(``fusion``), over exactly the memories the caller may see.

The index ranks BM25 as it always does (its exact per-caller statistics) to ``BM25_DEPTH``; the vectors
score every memory the filter admits that has a vector. A memory either channel finds must still be in the
index, which gives the version it ranks (a vector may outlive its memory until the vectors' next look, or
be of an older version while its embedding lags: the index's version is the one shown). A query that cannot
be embedded now (``EmbeddingUnavailable``: an endpoint down or slow) is ranked by BM25 alone, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from memoryd.embeddings.embedder import EmbeddingUnavailable
from projections.filters import MemoryFilter
from projections.search.fusion import BM25_DEPTH, Fusion, Spread, fused_scores
from projections.search.index import SearchIndex
from projections.search.reading import Candidate, Candidates
from projections.semantic import VectorChannel


class FusedSearch:
    def __init__(self, channel: VectorChannel, fusion: Fusion) -> None:
        self.channel, self.fusion = channel, fusion

    def candidates(self, index: SearchIndex, where: MemoryFilter, query: str, limit: int
                   ) -> tuple[Candidates, str | None]:
        """The ``limit`` best of both channels, and why it is BM25's alone when the vectors could not answer
        (None when they did). A blank query is the newest memories, as without the channel."""
        if not query.strip():
            return index.candidates(where, query, limit), None
        found = index.candidates(where, query, max(limit, BM25_DEPTH))
        try:
            vector = self.channel.embed_query(query)
        except EmbeddingUnavailable as error:
            return Candidates(found.position, found.in_scope, found.ranked[:limit]), \
                f"semantic search is unavailable ({error.message}): BM25 alone"
        close, spread = self.channel.index.similar(vector, where, self.fusion.similarity_floor, limit,
                                                   [candidate.memory_id for candidate in found.ranked])
        return Candidates(found.position, found.in_scope, self._fused(index, found.ranked, close, spread, limit)), None

    def among_versions(self, index: SearchIndex, query: str, limit: int, versions: Mapping[str, int]
                       ) -> list[Candidate]:
        """The ``limit`` best of both channels among exactly what ``index`` holds, a memory's version each in
        ``versions`` (its position: an ``as_of`` read). The vectors count only for a memory whose vector is of
        that version; a version the channel no longer holds is ranked by BM25 alone. BM25 alone when the
        query cannot be embedded now."""
        found = index.candidates(MemoryFilter(), query, max(limit, BM25_DEPTH))
        if not query.strip():
            return found.ranked[:limit]
        try:
            vector = self.channel.embed_query(query)
        except EmbeddingUnavailable:
            return found.ranked[:limit]
        similarities = self.channel.index.similarities_of_versions(vector, versions)
        return self._fused(index, found.ranked, similarities, Spread.of(similarities), limit)

    def _fused(self, index: SearchIndex, by_bm25: list[Candidate], close: Mapping[str, float], spread: Spread,
               limit: int) -> list[Candidate]:
        bm25 = {candidate.memory_id: candidate.score or 0.0 for candidate in by_bm25}
        scores = fused_scores(bm25, close, self.fusion, spread)
        ranked = sorted(scores, key=lambda memory: (-scores[memory], -bm25.get(memory, 0.0), memory))
        positions = index.positions_of(ranked[:limit + len(close)])  # enough to fill the page if some are gone
        return [Candidate(memory, scores[memory], positions[memory]) for memory in ranked if memory in positions][:limit]
