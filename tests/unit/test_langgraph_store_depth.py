"""``MemorydStore``'s query searches read memoryd's ranking page by page, as deep as memoryd ranks and no deeper.

memoryd ranks at most ``offset`` 10,000 plus a page (10,050 hits). The store reads pages only until its
searches are answered, and refuses (``StoreLimitError``) rather than answer a part when they would need
hits past that. The server here is a stand-in for ``POST /v1/api/memories/search`` that keeps the same cap.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from memoryd_sdk import MemorydServer
from memoryd_sdk.integrations.langgraph import MemorydStore, StoreLimitError
from memoryd_sdk.integrations.langgraph._codec import DESCRIPTION, content_of, name_of

DEEPEST_OFFSET = 10_000
HITS = 10_100  # more than memoryd would rank


def hit(number: int) -> dict[str, Any]:
    """The ``number``th best hit: items alternate between the namespaces ``("a",)`` and ``("b",)``."""
    namespace, key = ("a",) if number % 2 == 0 else ("b",), f"k{number}"
    return {"memory_id": f"m{number}", "name": name_of(namespace, key), "description": DESCRIPTION,
            "content": content_of(namespace, key, {"n": number}), "created": "2026-01-01T00:00:00",
            "updated": "2026-01-01T00:00:00", "score": float(HITS - number)}


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
