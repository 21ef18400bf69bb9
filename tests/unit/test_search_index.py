"""The BM25 index: exact against rank-bm25, per-caller statistics, updates, rebuilds."""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from events.types import (
    MemoryDeleted,
    MemorySaved,
    MemoryUpdated,
)
from memoryd.kernel.domain import Memory
from projections.filters import MemoryFilter, ScopePattern
from projections.search import Analyzer, SearchIndex
from projections.search.ranking import K1, B, idf
from tests.helpers import CALLERS, GLOBAL_FILTER, SPACES, TINY, WORDS, answers, index_of, memory, recorded, tiny_segments


def oracle(memories: list[Memory], query: str, analyzer: Analyzer | None = None) -> dict[str, float]:
    """rank-bm25's BM25Okapi over the analyzer's terms (the summary's counted as often as it weighs them), with
    its idf replaced by Lucene's (the one the issue specifies)."""
    analyzer = analyzer or Analyzer()
    corpus = [list(analyzer.document(m.name, m.description, m.content).elements()) for m in memories]
    model = BM25Okapi(corpus, k1=K1, b=B)
    frequencies: dict[str, int] = {}
    for document in model.doc_freqs:
        for word in document:
            frequencies[word] = frequencies.get(word, 0) + 1
    model.idf = {word: idf(len(corpus), df) for word, df in frequencies.items()}
    scores = model.get_scores(analyzer.terms(query))
    return {m.memory_id: float(score) for m, score in zip(memories, scores) if score > 0}


def answer_with(index: SearchIndex, where: MemoryFilter, query: str, limit: int,
                **settings: Any) -> list[tuple[str, float]]:
    """The answer with the index's pruning tuned by ``settings`` for this search."""
    saved = index.tuning
    index.tuning = dataclasses.replace(saved, **settings)
    try:
        return [(h.memory_id, h.score) for h in index.search(where, query, limit)]
    finally:
        index.tuning = saved


UNPRUNED = {"prune_from": math.inf}  # no query touches that many postings: every posting gets scored
EAGER = {"prune_from": 0, "scan_cost": 0, "lookup_cost": 0}  # prune whenever the bound allows, by lookups
PRUNING = {"prune_from": 0}  # prune as the cost model decides, however small the query
TERM_BY_TERM = {"flat_postings": 0}  # every segment gathered term by term, as big ones are (a delta is always flat)
FLAT = {"flat_postings": 10**9}  # every segment gathered flat, as small ones are


corpora = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=30).map(" ".join), min_size=1, max_size=40)
queries = st.lists(st.sampled_from(WORDS + ["absent"]), min_size=1, max_size=12).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(corpus=corpora, query=queries, limit=st.integers(1, 50))
def test_scores_and_top_k_equal_rank_bm25_with_lucene_idf(corpus: Any, query: Any, limit: Any) -> None:
    memories = [memory(f"m{i}", text) for i, text in enumerate(corpus)]
    expected = oracle(memories, query)
    index = index_of(memories)
    hits = index.search(GLOBAL_FILTER, query, limit)
    assert answer_with(index, GLOBAL_FILTER, query, limit, **EAGER) == [(h.memory_id, h.score) for h in hits]
    assert len(hits) == min(limit, len(expected))
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.memory_id], abs=1e-6)
    # the top-k is the oracle's top-k: nothing left out scores higher than what came back
    if hits:
        assert max((s for mid, s in expected.items() if mid not in {h.memory_id for h in hits}), default=0) <= \
            hits[-1].score + 1e-9


@settings(max_examples=60, deadline=None)
@given(mine=corpora, others=corpora, query=queries)
def test_memories_the_caller_cannot_see_change_none_of_the_callers_scores(mine: Any, others: Any, query: Any) -> None:
    own = [memory(f"m{i}", text, "user", "alice") for i, text in enumerate(mine)]
    foreign = [memory(f"o{i}", text, "user", "bob") for i, text in enumerate(others)]
    alone, crowded = index_of(own), index_of(own + foreign)
    visible = MemoryFilter(scopes=(ScopePattern("user", "alice"),))
    assert [(h.memory_id, h.score) for h in alone.search(visible, query, 50)] == \
        [(h.memory_id, h.score) for h in crowded.search(visible, query, 50)]


def test_words_of_equal_weight_add_up_in_the_querys_order_whatever_else_the_index_holds() -> None:
    # w1 and w4 weigh the same for alice; bob's memories make w1 commoner index-wide. Summed in
    # another order, m0's score differed in its last bit between the two indexes.
    own = [memory(f"m{i}", text, "user", "alice") for i, text in enumerate(["w2 w3 w4 w3 w1 w4 w0", "w3 w0", "w4 w2"])]
    foreign = [memory(f"o{i}", text, "user", "bob")
               for i, text in enumerate(["w5 w5 w1 w1 w2 w3", "w3 w1 w5 w3 w2 w4", "w5 w5 w2 w5 w1", "w0"])]
    visible = MemoryFilter(scopes=(ScopePattern("user", "alice"),))
    alone, crowded = index_of(own), index_of(own + foreign)
    assert [(h.memory_id, h.score) for h in alone.search(visible, "w5 w2 w1 w4 w0", 50)] == \
        [(h.memory_id, h.score) for h in crowded.search(visible, "w5 w2 w1 w4 w0", 50)]


def test_a_query_none_of_whose_words_occur_returns_nothing() -> None:
    assert index_of([memory("a", "alpha beta")]).search(GLOBAL_FILTER, "gamma delta", 10) == []


def test_equal_scores_are_ordered_newest_first_then_by_memory_id() -> None:
    memories = [memory("b1", "shared words", updated="2026-01-01T00:00:01"), memory("a1", "shared words"),
                memory("c1", "shared words"), memory("d1", "shared words", updated="2026-01-01T00:00:02")]
    assert [h.memory_id for h in index_of(memories).search(GLOBAL_FILTER, "shared", 10)] == [
        "id-global--d1", "id-global--b1", "id-global--a1", "id-global--c1"]


def test_updates_and_deletes_are_seen_by_the_next_query_and_match_a_fresh_index() -> None:
    rng = random.Random(5)
    index, live = SearchIndex(), dict[str, Memory]()
    for step in range(3_000):  # enough to merge deltas into segments many times
        name = f"m{rng.randrange(400)}"
        action = rng.random()
        if action < 0.15 and name in live:
            index.apply(recorded(MemoryDeleted(live.pop(name))))
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25)))
            changed = memory(name, text, memory_type=rng.choice(["user", "general", "feedback"]))
            index.apply(recorded(MemoryUpdated(changed) if name in live else MemorySaved(changed)))
            live[name] = changed
        if step % 500 == 0:
            query = " ".join(rng.sample(WORDS, 4))
            fresh = index_of(list(live.values()))
            assert [(h.memory_id, round(h.score, 9)) for h in index.search(GLOBAL_FILTER, query, 20)] == \
                [(h.memory_id, round(h.score, 9)) for h in fresh.search(GLOBAL_FILTER, query, 20)]
    assert len(index) == len(live)


def test_the_type_filter_searches_and_scores_only_that_type() -> None:
    memories = [memory("a", "alpha", memory_type="feedback"), memory("b", "alpha alpha", memory_type="user"),
                memory("c", "beta", memory_type="feedback")]
    hits = index_of(memories).search(MemoryFilter(type="feedback", scopes=None), "alpha", 10)
    feedback = [m for m in memories if m.type == "feedback"]
    approximately: list[tuple[str, Any]] = [(h.memory_id, pytest.approx(h.score)) for h in hits]
    assert approximately == list(oracle(feedback, "alpha").items())


def test_an_event_applied_twice_changes_nothing() -> None:
    index = SearchIndex()
    event = recorded(MemorySaved(memory("a", "alpha")))
    index.apply(event)
    index.apply(event)
    assert len(index) == 1 and index.position == event.position


# -- the segment machinery: tiny thresholds so a short run freezes and merges many times -----------

@pytest.mark.parametrize("pack_limit", [1 << 47, 0], ids=["packed-sort", "argsort"])
def test_background_merges_with_writes_landing_mid_merge_match_a_fresh_index(pack_limit: Any) -> None:
    rng = random.Random(11)
    index, live = tiny_segments(pack_limit), dict[tuple[str, str, str], Memory]()
    for step in range(2_500):
        scope, scope_id = rng.choice(SPACES)
        name = f"m{rng.randrange(120)}"
        key = (scope, scope_id, name)
        if rng.random() < 0.2 and key in live:
            index.apply(recorded(MemoryDeleted(live.pop(key))))
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25)))
            changed = memory(name, text, scope, scope_id, rng.choice(["user", "general", "feedback"]),
                             updated=f"2026-01-01T00:{step // 60 % 60:02d}:{step % 60:02d}")
            index.apply(recorded(MemoryUpdated(changed) if key in live else MemorySaved(changed)))
            live[key] = changed
        if step % 250 == 0:  # mid-stream: merges may be running
            query = " ".join(rng.sample(WORDS, 5))
            assert answers(index, query) == answers(index_of(list(live.values())), query)
    index.wait_for_merges()
    query = " ".join(WORDS[:8])
    assert answers(index, query) == answers(index_of(list(live.values())), query)
    assert len(index) == len(live)
    restored = SearchIndex.from_bytes(index.to_bytes())
    assert answers(restored, query) == answers(index, query) and restored.position == index.position


def test_merges_keep_the_parts_few_and_reuse_the_slots_of_removed_memories() -> None:
    index = tiny_segments()
    for version in range(60):  # 40 memories, each replaced 60 times: 2,400 versions
        for number in range(40):
            index.apply(recorded(MemoryUpdated(memory(f"m{number}", f"w{version} w{number} common")) if version
                                 else MemorySaved(memory(f"m{number}", f"w{version} w{number} common"))))
        index.wait_for_merges()
    shape = index.shape()
    assert shape.memories == 40
    assert shape.slots <= 160, shape  # replaced versions' slots are reused once a merge drops them
    assert shape.parts <= 12, shape  # tiers of FANOUT segments, not one part per freeze
    assert [h.memory_id for h in index.search(GLOBAL_FILTER, "w59 w7", 1)] == ["id-global--m7"]


@pytest.mark.parametrize("gathering", [FLAT, TERM_BY_TERM], ids=["flat", "term-by-term"])
@pytest.mark.parametrize("removals", [6, 900], ids=["few-tombstones-score-zero", "many-tombstones-filtered"])
def test_tombstones_in_a_big_segment_score_exactly_as_a_fresh_index(removals: int, gathering: Any) -> None:
    rng = random.Random(removals)
    live = {}
    for number in range(2_000):
        scope, scope_id = SPACES[number % len(SPACES)]
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 30)))
        live[number] = memory(f"m{number}", text, scope, scope_id, rng.choice(["user", "general", "feedback"]))
    index = SearchIndex()
    with index.bulk():  # one segment
        index.apply_all(recorded(MemorySaved(m)) for m in live.values())
    for number in rng.sample(sorted(live), removals):
        if number % 2:
            index.apply(recorded(MemoryDeleted(live.pop(number))))
        else:
            old = live[number]
            live[number] = memory(old.name, "w1 w2 fresh", old.scope, old.scope_id, old.type)
            index.apply(recorded(MemoryUpdated(live[number])))
    assert index.shape().tombstones == removals
    index.tuning = dataclasses.replace(index.tuning, **gathering)
    for query in ("w1 w2 w3", "w7 w7 w30 fresh", " ".join(WORDS[::3])):
        assert answers(index, query) == answers(index_of(list(live.values())), query)


# -- pruning: the common words are looked up only for documents that can still make the top -------

ZIPF = [f"z{rank}" for rank in range(60)]


def zipf_word(uniform: float) -> str:
    """A word whose rank is log-uniform: a few words occur everywhere, most rarely (as in chat)."""
    return ZIPF[int(len(ZIPF) ** uniform) - 1]


zipf_words = st.floats(0, 1, exclude_max=True).map(zipf_word)


@settings(max_examples=120, deadline=None)
@given(texts=st.lists(st.lists(st.tuples(zipf_words, st.sampled_from([1, 1, 1, 2, 40])), min_size=1, max_size=30)
                      .map(lambda runs: " ".join(" ".join([word] * times) for word, times in runs)),  # high tfs too
                      min_size=20, max_size=120),
       query=st.lists(zipf_words, min_size=1, max_size=10).map(" ".join), limit=st.integers(1, 12),
       caller=st.sampled_from(CALLERS), seed=st.integers(0, 1_000))
def test_pruned_search_answers_exactly_as_scoring_every_posting(texts: Any, query: Any, limit: Any, caller: Any,
                                                                seed: Any) -> None:
    rng = random.Random(seed)
    memories = [memory(f"m{number}", text, *rng.choice(SPACES), rng.choice(["user", "general", "feedback"]),
                       updated=f"2026-01-01T00:00:0{rng.randrange(3)}")  # many ties at the cut
                for number, text in enumerate(texts)]
    index = SearchIndex()
    with index.bulk():
        index.apply_all(recorded(MemorySaved(m)) for m in memories)
    for gone in rng.sample(memories, len(memories) // 10):  # tombstones, and a delta
        index.apply(recorded(MemoryDeleted(gone)))
    expected = answer_with(index, caller, query, limit, **UNPRUNED)
    for tuned in (PRUNING, EAGER):
        assert answer_with(index, caller, query, limit, **tuned) == expected
        assert answer_with(index, caller, query, limit, **tuned, **TERM_BY_TERM) == expected
    assert answer_with(index, caller, query, limit, **UNPRUNED, **TERM_BY_TERM) == expected


def test_pruning_runs_across_many_parts_and_changes_no_answer() -> None:
    rng = random.Random(3)
    index, live = SearchIndex(tuning=TINY), dict[tuple[str, str, str], Memory]()
    for step in range(3_000):
        index.wait_for_merges()  # each write after the merges before it: the parts come out the same every run
        scope, scope_id = rng.choice(SPACES)
        key = (scope, scope_id, f"m{rng.randrange(400)}")
        if rng.random() < 0.1 and key in live:
            index.apply(recorded(MemoryDeleted(live.pop(key))))
        else:
            text = " ".join(zipf_word(rng.random()) for _ in range(rng.randrange(2, 40)))
            changed = memory(key[2], text, scope, scope_id, rng.choice(["user", "general", "feedback"]),
                             updated=f"2026-01-01T00:00:0{step % 3}")
            index.apply(recorded(MemoryUpdated(changed) if key in live else MemorySaved(changed)))
            live[key] = changed
    index.wait_for_merges()
    assert index.shape().parts > 2
    for _ in range(40):
        query = " ".join(zipf_word(rng.random()) for _ in range(rng.randrange(2, 10)))
        for where in CALLERS:
            for limit in (1, 5, 20):
                expected = answer_with(index, where, query, limit, **UNPRUNED)
                assert answer_with(index, where, query, limit, **PRUNING) == expected
                assert answer_with(index, where, query, limit, **EAGER) == expected
                assert answer_with(index, where, query, limit, **EAGER, **TERM_BY_TERM) == expected
    assert index.shape().lookups  # the common words were looked up for candidates only, not scored everywhere


def test_the_memory_report_counts_each_memory_id_once() -> None:
    """The id -> slot map's keys are the very strings the index keeps by slot: reported once, not twice."""
    memories = [memory(f"n{number}", "alpha beta") for number in range(2_000)]
    index = index_of(memories)
    ids = index.memory_report()["python: memory ids and id -> slot since the snapshot (or all, without one)"]
    strings = sum(sys.getsizeof(m.memory_id) for m in memories)
    labels, slots = index.state.memory_ids, index.state.slot_of
    containers = sum(map(sys.getsizeof, (labels._changed, labels._added, slots._added, slots._gone)))
    assert ids == containers + strings


def test_updated_times_in_another_format_break_ties_as_written_and_survive_a_snapshot() -> None:
    """``updated`` is kept as its recency key; a time the key cannot give back is kept as it is."""
    memories = [memory("x1", "alpha", updated="2026-01-01T00:00:00"), memory("x2", "alpha", updated="2026-01-01T00:00:00.5"),
                memory("x3", "alpha", updated="2025-12-31T23:59:59"), memory("x4", "alpha", updated="2026-01-01T00:00:00")]
    index = index_of(memories)
    expected = ["id-global--x2", "id-global--x1", "id-global--x4", "id-global--x3"]
    assert [h.memory_id for h in index.search(GLOBAL_FILTER, "alpha", 10)] == expected
    restored = SearchIndex.from_bytes(index.to_bytes())
    assert [h.memory_id for h in restored.search(GLOBAL_FILTER, "alpha", 10)] == expected
    assert restored.state.updated_of(restored.state.slot_of["id-global--x2"]) == "2026-01-01T00:00:00.5"
    assert restored.state.updated_of(restored.state.slot_of["id-global--x3"]) == "2025-12-31T23:59:59"
