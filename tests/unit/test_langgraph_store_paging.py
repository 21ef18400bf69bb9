"""``MemorydStore`` reads memoryd page by page: the list's pages by cursor, the ranking's by offset.

memoryd ranks at most ``offset`` 10,000 plus a page (10,050 hits). The store reads the ranking's pages only
until its searches are answered, and refuses (``StoreLimitError``) rather than answer a part when they
would need hits past that. A walk of the list's pages that a write overtakes still meets every item. The
server here stands in for ``POST /v1/api/memories/search`` and ``GET /v1/api/memories``, with their rules.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from memoryd_sdk import AsyncMemorydServer, MemorydServer
from memoryd_sdk.integrations.langgraph import MemorydStore, StoreLimitError
from memoryd_sdk.integrations.langgraph._codec import DESCRIPTION, content_of, name_of

DEEPEST_OFFSET = 10_000
HITS = 10_100  # more than memoryd would rank
FIRST_WRITE = datetime(2026, 1, 2)  # of the newest item; each older one a second before the next


def memory(number: int, value: Any = None, updated: str = "") -> dict[str, Any]:
    """Item ``k{number}`` as a memory, written a second before ``k{number - 1}``: items alternate between the
    namespaces ``("a",)`` and ``("b",)``."""
    namespace, key = ("a",) if number % 2 == 0 else ("b",), f"k{number}"
    moment = (FIRST_WRITE - timedelta(seconds=number)).isoformat()
    return {"memory_id": f"m{number:05d}", "name": name_of(namespace, key), "description": DESCRIPTION,
            "content": content_of(namespace, key, {"n": number} if value is None else value),
            "created": "2026-01-01T00:00:00", "updated": updated or moment}


def hit(number: int) -> dict[str, Any]:
    """The ``number``th best hit."""
    return memory(number) | {"score": float(HITS - number)}


class Ranking:
    """The search endpoint over ``HITS`` hits, refusing an offset past memoryd's cap; counts its requests."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        body = json.loads(request.content)
        offset, limit = body.get("offset", 0), body["limit"]
        if offset > DEEPEST_OFFSET:
            return httpx.Response(400, json={"error": f"offset must be between 0 and {DEEPEST_OFFSET}"})
        found = [hit(number) for number in range(offset, min(offset + limit, HITS))]
        return httpx.Response(200, json={"memories": found, "total": len(found)})


class Listing:
    """The list endpoint over ``count`` items, newest ``updated`` first, then id, paged by a cursor on that order;
    ``overtake`` runs once, after the first page is served: a write the walk does not wait for."""

    def __init__(self, count: int, overtake: Callable[[dict[str, dict[str, Any]]], None]) -> None:
        self.rows = {row["memory_id"]: row for row in map(memory, range(count))}
        self.overtake, self.requests = overtake, 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        limit, after = int(request.url.params["limit"]), request.url.params.get("after")
        ordered = sorted(self.rows.values(), key=lambda row: row["memory_id"])
        ordered.sort(key=lambda row: row["updated"], reverse=True)
        if after is not None:
            updated, memory_id = json.loads(after)
            ordered = [row for row in ordered if (row["updated"], memory_id) < (updated, row["memory_id"])]
        page = ordered[:limit]
        answer = {"memories": page, "total": len(page),
                  "next_after": json.dumps([page[-1]["updated"], page[-1]["memory_id"]]) if ordered[limit:] else None}
        if self.requests == 1:
            self.overtake(self.rows)
        return httpx.Response(200, json=answer)


def move_the_last_to_the_front(rows: dict[str, dict[str, Any]]) -> None:
    """An update of the item the walk would meet last (the oldest): it moves to the front, which the walk has
    passed."""
    last = max(rows)
    rows[last] = memory(int(last[1:]), {"n": "moved"}, updated=(FIRST_WRITE + timedelta(seconds=1)).isoformat())


def stores(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[MemorydStore, MemorydStore]:
    """A store over ``handler`` with the sync client, and one with the async client too."""
    sync = MemorydServer("http://memoryd", token="t", httpx_client=httpx.Client(
        transport=httpx.MockTransport(handler), base_url="http://memoryd"))
    asynchronous = AsyncMemorydServer("http://memoryd", token="t", httpx_client=httpx.AsyncClient(
        transport=httpx.MockTransport(handler), base_url="http://memoryd"))
    return MemorydStore(sync), MemorydStore(sync, asynchronous)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_walk_of_many_pages_that_a_write_overtakes_still_meets_every_item_once(kind: str) -> None:
    listing = Listing(450, move_the_last_to_the_front)
    sync, asynchronous = stores(listing)
    found = sync.search((), limit=1000) if kind == "sync" else asyncio.run(asynchronous.asearch((), limit=1000))
    assert sorted(keys(found)) == sorted(f"k{n}" for n in range(450))
    assert [item.value for item in found if item.key == "k449"] == [{"n": "moved"}]
    assert listing.requests == 4  # three pages, and the front again (one page, down to where the walk began)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_list_of_one_page_is_read_once(kind: str) -> None:
    listing = Listing(200, lambda rows: None)
    sync, asynchronous = stores(listing)
    found = sync.list_namespaces() if kind == "sync" else asyncio.run(asynchronous.alist_namespaces())
    assert found == [("a",), ("b",)] and listing.requests == 1


@pytest.fixture
def ranking() -> Ranking:
    return Ranking()


@pytest.fixture
def store(ranking: Ranking) -> MemorydStore:
    client = httpx.Client(transport=httpx.MockTransport(ranking), base_url="http://memoryd")
    return MemorydStore(MemorydServer("http://memoryd", token="t", httpx_client=client))


def keys(items: list[Any]) -> list[str]:
    return [item.key for item in items]


def test_a_shallow_search_reads_one_page(store: MemorydStore, ranking: Ranking) -> None:
    assert keys(store.search((), query="x", limit=10, offset=5)) == [f"k{n}" for n in range(5, 15)]
    assert ranking.requests == 1


def test_a_search_reads_as_many_pages_as_its_namespace_needs(store: MemorydStore, ranking: Ranking) -> None:
    """Half the hits are in another namespace: 30 of ``("a",)`` after 40 need 140 hits, three pages."""
    assert keys(store.search(("a",), query="x", limit=30, offset=40)) == [f"k{n}" for n in range(80, 140, 2)]
    assert ranking.requests == 3


def test_a_search_reaches_the_deepest_hit_memoryd_ranks(store: MemorydStore) -> None:
    assert keys(store.search((), query="x", limit=50, offset=DEEPEST_OFFSET)) == [
        f"k{n}" for n in range(DEEPEST_OFFSET, DEEPEST_OFFSET + 50)]


@pytest.mark.parametrize(("namespace", "offset"), [((), DEEPEST_OFFSET + 1), (("a",), 5_000)])
def test_a_search_that_needs_hits_past_the_deepest_is_refused(store: MemorydStore, namespace: tuple[str, ...],
                                                              offset: int) -> None:
    with pytest.raises(StoreLimitError, match="10,050"):
        store.search(namespace, query="x", limit=50, offset=offset)
