"""Search split by namespace over four indexes, queried through a fan-out, answers as one index does.

The simulation of docs/architecture.md's "Past one machine": each namespace lives in one shard
(a hash of ``(scope, scope_id)``), a caller's envelope of up to four namespaces reaches at most
four shards, and BM25's statistics (documents, their length, each word's document frequency)
are added up across the shards before any of them scores. The same memories in one index give
the same top k, with the same scores to the last bit.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from events.types import DomainEvent, MemoryDeleted, MemorySaved, MemoryUpdated
from memoryd.kernel.domain import Memory
from projections.filters import MemoryFilter, ScopePattern
from projections.search import Hit, SearchIndex, Statistics, Tuning
from tests.helpers import memory, recorded

SHARDS = 4
USERS = [f"u{number}" for number in range(8)]
WORKSTREAMS = [f"w{number}" for number in range(6)]
PROJECTS = ["p0", "p1"]
NAMESPACES = ([("global", "")] + [("user", user) for user in USERS] + [("workstream", ws) for ws in WORKSTREAMS]
              + [("project", project) for project in PROJECTS])
WORDS = [f"t{rank}" for rank in range(30)]
MANY_PARTS = Tuning(freeze_postings=80, fanout=1_000)  # frozen often, never merged: many segments and a delta
PRUNING = dataclasses.replace(MANY_PARTS, prune_from=0)  # the common words looked up for candidates only


def shard_of(scope: str, scope_id: str) -> int:
    return zlib.crc32(f"{scope}\0{scope_id}".encode()) % SHARDS


def fan_out(shards: Sequence[SearchIndex], where: MemoryFilter, query: str, limit: int,
            updated: dict[str, str]) -> list[Hit]:
    """Add up every shard's statistics, let each score its own memories with them, merge as one index orders."""
    statistics = sum((shard.statistics(where, query) for shard in shards), Statistics(0, 0, {}))
    if not statistics.documents:
        return []
    hits = [hit for shard in shards for hit in shard.search_with(where, query, limit, statistics)]
    hits.sort(key=lambda hit: hit.memory_id)
    hits.sort(key=lambda hit: updated[hit.memory_id], reverse=True)
    hits.sort(key=lambda hit: hit.score, reverse=True)
    return hits[:limit]


def envelope(rng: random.Random) -> MemoryFilter:
    """A session's envelope (global, its workstream, its user, maybe a project) or an admin's everything."""
    if rng.random() < 0.2:
        return MemoryFilter()
    scopes = [ScopePattern("global"), ScopePattern("workstream", rng.choice(WORKSTREAMS)),
              ScopePattern("user", rng.choice(USERS))]
    if rng.random() < 0.5:
        scopes.append(ScopePattern("project", rng.choice(PROJECTS)))
    return MemoryFilter(type=rng.choice(["", "", "", "feedback"]), scopes=tuple(scopes))


def zipf_text(rng: random.Random, words: int) -> str:
    return " ".join(WORDS[int(len(WORDS) ** rng.random()) - 1] for _ in range(words))


def corpus(seed: int) -> tuple[SearchIndex, list[SearchIndex], dict[str, str]]:
    """One index and four shards fed the same log (saves, updates, deletes), each shard only its namespaces."""
    rng = random.Random(seed)
    whole = SearchIndex(tuning=MANY_PARTS)
    shards = [SearchIndex(tuning=MANY_PARTS) for _ in range(SHARDS)]
    live: dict[str, Memory] = {}
    updated: dict[str, str] = {}
    for step in range(600):
        scope, scope_id = rng.choice(NAMESPACES)
        name = f"m{rng.randrange(120)}"
        key = f"id-{scope}-{scope_id}-{name}"
        event: DomainEvent
        if key in live and rng.random() < 0.15:
            event = MemoryDeleted(live.pop(key))
        else:
            saved = memory(name, zipf_text(rng, rng.randrange(1, 25)), scope, scope_id,
                           rng.choice(["user", "general", "feedback"]), updated=f"2026-01-01T00:00:{step % 7:02d}")
            event = MemoryUpdated(saved) if key in live else MemorySaved(saved)
            live[key], updated[key] = saved, saved.updated
        entry = recorded(event)
        whole.apply(entry)
        shards[shard_of(scope, scope_id)].apply(entry)
    for index in [whole, *shards]:
        index.wait_for_merges()
    return whole, shards, updated


def test_every_shard_holds_some_of_the_namespaces() -> None:
    assert {shard_of(scope, scope_id) for scope, scope_id in NAMESPACES} == set(range(SHARDS))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_four_shards_through_the_fan_out_give_one_indexs_top_k_and_scores(seed: Any) -> None:
    whole, shards, updated = corpus(seed)
    assert all(shard.shape().segments >= 2 for shard in shards if len(shard))
    rng = random.Random(seed)
    for _ in range(30):
        where, query, limit = envelope(rng), zipf_text(rng, rng.randrange(1, 12)), rng.choice([1, 5, 20])
        for tuning in (MANY_PARTS, PRUNING):
            for index in [whole, *shards]:
                index.tuning = tuning
            assert fan_out(shards, where, query, limit, updated) == whole.search(where, query, limit)


def test_a_shard_holding_none_of_the_callers_namespaces_adds_nothing_and_returns_nothing() -> None:
    whole, shards, _ = corpus(7)
    where = MemoryFilter(scopes=(ScopePattern("user", "u3"),))
    strangers = [shard for number, shard in enumerate(shards) if number != shard_of("user", "u3")]
    assert all(shard.statistics(where, "t0 t1") == Statistics(0, 0, {"t0": 0, "t1": 0}) for shard in strangers)
    totals = whole.statistics(where, "t0 t1")
    assert all(shard.search_with(where, "t0 t1", 5, totals) == [] for shard in strangers)
