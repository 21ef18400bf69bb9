"""Fusing BM25 and vector similarity: what comes back, in which order, and what never does."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from projections.search.fusion import Fusion, fused_ranking, fused_scores

FLOOR = Fusion().similarity_floor
ids = st.text("abcdefgh", min_size=1, max_size=3)
bm25_scores = st.dictionaries(ids, st.one_of(st.just(0.0), st.floats(0.001, 50)), max_size=12)
similarity_scores = st.dictionaries(ids, st.floats(-1, 1, allow_nan=False), max_size=12)


def shuffled(scores: dict[str, float], seed: int) -> dict[str, float]:
    items = list(scores.items())
    random.Random(seed).shuffle(items)
    return dict(items)


@given(bm25_scores, similarity_scores, st.integers())
def test_the_order_memories_arrive_in_changes_nothing(bm25: dict[str, float], similarities: dict[str, float],
                                                      seed: int) -> None:
    assert fused_ranking(shuffled(bm25, seed), shuffled(similarities, seed + 1)) == fused_ranking(bm25, similarities)


@given(bm25_scores, similarity_scores, st.floats(0.01, 1000))
def test_bm25_counts_relative_to_the_best_match_so_its_scale_changes_nothing(
        bm25: dict[str, float], similarities: dict[str, float], factor: float) -> None:
    scaled = {memory: score * factor for memory, score in bm25.items()}
    assert set(fused_ranking(scaled, similarities)) == set(fused_ranking(bm25, similarities))
    original, rescaled = fused_scores(bm25, similarities), fused_scores(scaled, similarities)
    assert all(abs(original[memory] - rescaled[memory]) < 1e-6 for memory in original)


@given(bm25_scores, similarity_scores, st.floats(-1, 1))
def test_only_a_memory_matching_a_channel_above_its_floor_is_scored(bm25: dict[str, float],
                                                                    similarities: dict[str, float], floor: float) -> None:
    matching = {memory for memory, score in bm25.items() if score > 0}
    matching |= {memory for memory, similarity in similarities.items() if similarity >= floor}
    assert set(fused_scores(bm25, similarities, Fusion(similarity_floor=floor))) == matching


@given(similarity_scores)
def test_nothing_above_either_floor_brings_back_nothing(similarities: dict[str, float]) -> None:
    below = {memory: min(similarity, FLOOR - 0.01) for memory, similarity in similarities.items()}
    assert fused_ranking({memory: 0.0 for memory in below}, below) == []
    assert fused_ranking({}, {}) == []


@given(bm25_scores)
def test_without_vectors_the_ranking_is_bm25s(bm25: dict[str, float]) -> None:
    by_bm25 = sorted((memory for memory, score in bm25.items() if score > 0), key=lambda memory: (-bm25[memory], memory))
    assert fused_ranking(bm25, {}) == by_bm25


def test_a_memory_sharing_no_word_is_found_by_its_meaning_alone() -> None:
    bm25 = {"violin": 0.0, "taxes": 4.0}
    similarities = {"violin": 0.62, "taxes": 0.05, "weather": 0.1, "garden": 0.2}
    assert fused_ranking(bm25, similarities) == ["taxes", "violin"]
    assert fused_ranking({}, similarities) == ["violin"]
