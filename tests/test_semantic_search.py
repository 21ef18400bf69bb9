"""Search with the semantic channel on, on SQLite and PostgreSQL: the REST search, the memory tool, the admin
search (live and ``as_of``) and the turn find a memory that shares no word with the query, only among what the
caller may see; a query that matches nothing finds nothing; an embedder that cannot answer leaves BM25 alone,
and the turn says so.

The embedder is the tests' fake (``tests/fake_embeddings.py``): "guitar" and "violin" share its concept
"instrument", so a query about one is close to a memory about the other, as with a real model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from api.app import create_app
from memoryd.app.services import Services
from memoryd.kernel.config import SearchSettings
from projections.search.fusion import Fusion, fused_ranking
from tests.fake_embeddings import FakeEmbedder
from tests.helpers import AgentSession, Caller, World, caller_factory, make_services, table_rows

VIOLIN = ("violin_evenings", "She plays the violin", "hobby")
# the fake's cosines are lower than a real model's (a shared concept among a few words): a floor of its own
FLOOR = 0.15
TAXES = ("tax_deadline", "The tax return is due in April", "paperwork")


@dataclass
class Channel:
    services: Services
    embedder: FakeEmbedder
    alice: Caller
    bob: Caller
    admin: Caller
    agent: AgentSession  # alice's agent, in a workstream of hers: it sees her user memories

    def embed_all(self) -> None:
        """Bring the vectors to the head of the log, and this process's matrix to them."""
        assert self.services.vectors is not None
        self.services.vectors.catch_up.run()
        self.services.vectors.index.refresh()

    def search(self, caller: Caller, query: str) -> list[str]:
        answer = caller.post("/v1/api/memories/search", json={"query": query, "scope": "user"})
        assert answer.status_code == 200, answer.get_json()
        return [row["name"] for row in answer.get_json()["memories"]]

    def admin_search(self, **params: Any) -> list[str]:
        answer = self.admin.get("/v1/api/admin/memories/search", query_string=params)
        assert answer.status_code == 200, answer.get_json()
        return [row["name"] for row in answer.get_json()["memories"]]


@pytest.fixture
def channel(database_url: str) -> Iterator[Channel]:
    embedder = FakeEmbedder(dimension=256)  # words seldom share a coordinate by chance
    services = make_services(database_url, embedder=embedder, search=SearchSettings(similarity_floor=FLOOR))
    make_caller = caller_factory(create_app(services), services)
    alice, bob, admin = make_caller(), make_caller(), make_caller("read,write", ("admin.memories",))
    world = World(admin, services)
    found = Channel(services, embedder, alice, bob, admin, world.session(world.workstream(alice.user_id), alice.user_id))
    for name, content, description in (VIOLIN, TAXES):
        assert alice.save(name, content, description, scope="user").status_code == 201  # her agent sees them too
    found.embed_all()
    yield found
    services.database.dispose()


def injected(turn: Any) -> list[str]:
    return [item["name"] for item in turn["items"]]


def test_a_serving_process_warms_the_model_in_the_background_at_start(channel: Channel) -> None:
    assert not channel.embedder.warmed.is_set()
    channel.services.search.warm_up().join(30)
    assert channel.embedder.warmed.is_set()


def test_a_memory_sharing_no_word_with_the_query_is_found_by_its_meaning(channel: Channel) -> None:
    assert channel.search(channel.alice, "guitar lessons") == ["violin_evenings"]
    assert channel.search(channel.alice, "tax return") == ["tax_deadline"]  # words still find what they match


def test_the_vectors_find_only_what_the_caller_may_see(channel: Channel) -> None:
    assert channel.search(channel.bob, "guitar lessons") == []
    assert channel.bob.save("bob_drums", "Bob plays the drums", "hobby", scope="user").status_code == 201
    channel.embed_all()
    assert channel.search(channel.bob, "guitar lessons") == ["bob_drums"]
    assert channel.search(channel.alice, "guitar lessons") == ["violin_evenings"]


def test_a_query_that_matches_nothing_finds_nothing_and_a_turn_injects_nothing(channel: Channel) -> None:
    assert channel.search(channel.alice, "quantum chromodynamics") == []
    assert injected(channel.agent.turn("tell me about quantum chromodynamics")) == []


def test_the_memory_tool_and_the_admin_search_fuse_too(channel: Channel) -> None:
    assert [memory["name"] for memory in channel.agent("search", query="guitar")["memories"]] == ["violin_evenings"]
    assert channel.admin_search(q="guitar", scope="user") == ["violin_evenings"]


def test_as_of_fuses_with_the_vectors_of_the_version_it_reads(channel: Channel) -> None:
    position = channel.services.store.head_position()
    assert channel.admin_search(q="guitar", scope="user", as_of_position=position) == ["violin_evenings"]
    assert channel.alice.save(VIOLIN[0], "She sold it and took up chess", "hobby", scope="user").status_code == 200
    channel.embed_all()
    # then, the violin version: its vector is gone with the update, and "guitar" shares no word with it
    assert channel.admin_search(q="guitar", scope="user", as_of_position=position) == []
    assert channel.admin_search(q="tax deadline", scope="user", as_of_position=position) == ["tax_deadline"]


def test_a_turn_injects_what_the_vectors_find(channel: Channel) -> None:
    turn = channel.agent.turn("should I buy a guitar?")
    assert injected(turn) == ["violin_evenings"] and turn["degraded"] is None


def test_an_embedder_that_cannot_answer_leaves_bm25_alone_and_the_turn_says_so(channel: Channel) -> None:
    channel.embedder.unavailable = True
    assert channel.search(channel.alice, "guitar lessons") == []
    assert channel.search(channel.alice, "tax return") == ["tax_deadline"]
    turn = channel.agent.turn("when is the tax return due?")
    assert injected(turn) == ["tax_deadline"] and "BM25 alone" in turn["degraded"]


def test_a_small_page_holds_the_best_of_many_memories_that_pass_the_floor(channel: Channel) -> None:
    for number in range(12):  # all about an instrument: the more practice, the further from "guitar"
        assert channel.alice.save(f"music_{number}", "violin " + "practice " * number, "hobby",
                                  scope="user").status_code == 201
    channel.embed_all()
    vectors = channel.services.vectors
    assert vectors is not None
    mine = {row["memory_id"]: row["name"] for row in table_rows(channel.services) if row["scope_id"] == channel.alice.user_id}
    every = vectors.similarities(vectors.embed_query("guitar"), mine)
    assert sum(similarity >= FLOOR for similarity in every.values()) > 3
    expected = [mine[memory_id] for memory_id in fused_ranking({}, every, Fusion(similarity_floor=FLOOR))[:3]]
    page = channel.alice.post("/v1/api/memories/search", json={"query": "guitar", "scope": "user", "limit": 3})
    assert [row["name"] for row in page.get_json()["memories"]] == expected
