"""Reading every page: the list's ``after`` cursor and the search's ``offset``, on SQLite and PostgreSQL.

A walk of the list pages by keyset (updated newest first, then memory id), so writes during it move what
they touch to the front and leave every other memory where it was: met once, never skipped.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from memoryd.app.services import Services
from tests.helpers import Caller, MakeCaller

MEMORIES = "/v1/api/memories"
SEARCH = "/v1/api/memories/search"


def tied_clock(services: Services, seed: int) -> None:
    """Writes get ``updated`` times that climb a second at a time, most of them shared with their neighbours, so
    pages cut through ties that only the memory id breaks."""
    rng = random.Random(seed)
    seconds = itertools.accumulate(rng.choice([0, 0, 0, 1]) for _ in itertools.count())
    moments = (f"2026-01-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}" for second in seconds)
    services.bus.deps = replace(services.bus.deps, clock=moments.__next__)


def write_batch(caller: Caller, writes: list[dict[str, Any]]) -> None:
    response = caller.post(f"{MEMORIES}/batch", json={"writes": writes})
    assert response.status_code == 200, response.json


def save(name: str, content: str = "content", **fields: Any) -> dict[str, Any]:
    return {"action": "save", "name": name, "content": content, "description": "d", **fields}


def walk(caller: Caller, limit: int, between: Any = None, **filters: str) -> list[dict[str, Any]]:
    """Every page of the list in turn (``between(page)`` runs after each page but the last); the answers' memories."""
    walked: list[dict[str, Any]] = []
    after = ""
    for _ in range(1000):
        answer = caller.get(MEMORIES, query_string={**filters, "limit": limit} | ({"after": after} if after else {}))
        assert answer.status_code == 200, answer.json
        walked += answer.json["memories"]
        if answer.json["next_after"] is None:
            return walked
        assert len(answer.json["memories"]) == limit  # only a full page has a next one
        after = answer.json["next_after"]
        if between is not None:
            between(answer.json["memories"])
    raise AssertionError("the walk did not end")


def ids(memories: list[dict[str, Any]]) -> list[str]:
    return [memory["memory_id"] for memory in memories]


@pytest.fixture
def alice(any_make_caller: MakeCaller) -> Caller:
    return any_make_caller()


def test_a_walk_of_the_list_is_the_whole_list_with_every_filter(any_services: Services, alice: Caller) -> None:
    workstream = any_services.directory.create_workstream(alice.user_id, "alice's")
    tied_clock(any_services, seed=1)
    kinds = ["user", "general", "feedback", "reference"]
    write_batch(alice, [save(f"note_{number}", type=kinds[number % 4],
                             **[{"scope": "global"}, {"scope": "user"}, {"scope": "workstream", "scope_id": workstream}]
                             [number % 3]) for number in range(60)])
    for filters in ({}, {"scope": "user"}, {"scope": "workstream", "scope_id": workstream}, {"type": "feedback"},
                    {"scope": "global", "type": "user"}):
        whole = alice.get(MEMORIES, query_string={**filters, "limit": 200}).json
        assert whole["next_after"] is None and whole["memories"], filters
        for limit in (1, 3, 7, len(whole["memories"])):
            assert ids(walk(alice, limit, **filters)) == ids(whole["memories"]), (filters, limit)


def test_the_last_full_page_says_there_is_no_next_one(alice: Caller) -> None:
    write_batch(alice, [save(f"note_{number}") for number in range(6)])
    first = alice.get(MEMORIES, query_string={"limit": 3}).json
    second = alice.get(MEMORIES, query_string={"limit": 3, "after": first["next_after"]}).json
    assert len(first["memories"]) == len(second["memories"]) == 3 and second["next_after"] is None
    assert set(ids(first["memories"])).isdisjoint(ids(second["memories"]))


def test_a_walk_while_memories_are_written_meets_every_memory_left_alone_once(any_services: Services,
                                                                              alice: Caller) -> None:
    """Between pages: an update of a memory already met, one of a memory not met yet, a new memory and a
    delete. Whatever was written may be met again or not at all; everything else is met exactly once."""
    tied_clock(any_services, seed=2)
    write_batch(alice, [save(f"note_{number}", scope="user") for number in range(40)])
    rng, written, made = random.Random(3), set[str](), itertools.count()
    met: list[dict[str, Any]] = []

    def write_between(page: list[dict[str, Any]]) -> None:
        met.extend(page)
        ahead = [memory for memory in alice.get(MEMORIES, query_string={"scope": "user", "limit": 200}).json["memories"]
                 if memory["memory_id"] not in ids(met)]
        updated, deleted = rng.sample(ahead, 2) if len(ahead) >= 2 else (None, None)
        again = rng.choice(met)
        writes = [save(again["name"], "changed", scope="user"), save(f"new_{next(made)}", scope="user")]
        if updated is not None and deleted is not None:
            writes += [save(updated["name"], "changed", scope="user"),
                       {"action": "delete", "name": deleted["name"], "scope": "user"}]
            written.update({updated["name"], deleted["name"]})
        written.add(again["name"])
        write_batch(alice, writes)

    before = {memory["name"] for memory in alice.get(MEMORIES, query_string={"scope": "user", "limit": 200}).json["memories"]}
    seen = Counter(memory["name"] for memory in walk(alice, 4, write_between, scope="user"))
    assert written and all(seen[name] == 1 for name in before - written), seen
    assert all(count == 1 for name, count in seen.items() if name not in written), seen
    first = alice.get(MEMORIES, query_string={"scope": "user", "limit": 1}).json["memories"][0]
    assert first["name"] in written or first["name"].startswith("new_")  # what was written came to the front


def test_search_pages_by_offset_rank_every_hit_past_the_first_fifty(any_services: Services, alice: Caller) -> None:
    tied_clock(any_services, seed=4)
    write_batch(alice, [save(f"note_{number}", " ".join(["needle"] * (number % 5 + 1) + ["hay"] * (number % 7)))
                        for number in range(130)] + [save("other", "nothing to find")])
    pages = [alice.post(SEARCH, json={"query": "needle", "limit": 50, "offset": offset}).json["memories"]
             for offset in (0, 50, 100, 150)]
    assert [len(page) for page in pages] == [50, 50, 30, 0]
    ranked = [hit for page in pages for hit in page]
    assert len(set(ids(ranked))) == 130 and "other" not in {hit["name"] for hit in ranked}
    assert [hit["score"] for hit in ranked] == sorted((hit["score"] for hit in ranked), reverse=True)
    small = [hit for offset in range(0, 130, 7)
             for hit in alice.post(SEARCH, json={"query": "needle", "limit": 7, "offset": offset}).json["memories"]]
    assert ids(small) == ids(ranked)  # pages of any size cut the same ranking
