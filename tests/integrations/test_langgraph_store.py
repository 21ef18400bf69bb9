"""``MemorydStore`` against a live memoryd: the same answers as LangGraph's own ``InMemoryStore``.

LangGraph has no conformance suite for stores; its docs say to test a custom store against
``InMemoryStore``. Random sequences of batches run on both, and every read must agree; then the
checks of langgraph's own store tests that apply (namespace validation, batch order, odd
characters in keys, labels and filter values). Two differences are the reference's, not the
contract's: ``InMemoryStore`` keeps a namespace listed after its last item is gone (or after a mere
``get``), and orders unranked results by insertion; so namespaces are compared where items are, and
pages by their size and membership.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, ListNamespacesOp, MatchCondition, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from memoryd_sdk import AsyncMemorydServer, MemorydConsole, MemorydServer
from memoryd_sdk.integrations.langgraph import MemorydStore

from tests.helpers import LiveServer, present

LABELS = ["a", "A", "b", "x y", "*", "%", "_", "日本", "é", "'; drop table", "line\n"]
KEYS = ["k", "K", "k-1", "k 1", "k_1", "ключ", "%_", "*", "a/b", " padded ", "k\n", "quote'\""]
TAGS = ["red", "RED", "x'y", "%", "_", "ünï", ""]
WORKSTREAMS = itertools.count()


@pytest.fixture(scope="module")
def user(live_server: LiveServer) -> dict[str, str]:
    return live_server.caller("langgraph")


@pytest.fixture(scope="module")
def server(live_server: LiveServer, user: dict[str, str]) -> Iterator[MemorydServer]:
    with MemorydServer(live_server.base_url, token=user["token"]) as client:
        yield client


@pytest.fixture
def fresh_store(live_server: LiveServer, user: dict[str, str], server: MemorydServer) -> Any:
    """A store per call, in a workstream of its own: every example starts empty."""

    def make() -> MemorydStore:
        with MemorydConsole(live_server.base_url, token=live_server.admin_token) as console:
            workstream = console.create_workstream(f"lg-{next(WORKSTREAMS)}", owner=user["user_id"])
        return MemorydStore(server, scope="workstream", scope_id=workstream.workstream_id)

    return make


namespaces = st.lists(st.sampled_from(LABELS), min_size=1, max_size=3).map(tuple)
values = st.fixed_dictionaries({"n": st.integers(0, 3), "tag": st.sampled_from(TAGS)},
                               optional={"nested": st.fixed_dictionaries({"tag": st.sampled_from(TAGS)}),
                                         "words": st.lists(st.sampled_from(TAGS), max_size=2)})
filters = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
    "tag": st.sampled_from(TAGS),
    "n": st.one_of(st.integers(0, 3), st.sampled_from([{"$gt": 1}, {"$lte": 2}, {"$ne": 0}, {"$eq": 3}])),
    "nested": st.fixed_dictionaries({"tag": st.sampled_from(TAGS)}),
}))
puts = st.tuples(namespaces, st.sampled_from(KEYS), st.one_of(st.none(), values, values)).map(lambda op: PutOp(*op))
gets = st.tuples(namespaces, st.sampled_from(KEYS)).map(lambda op: GetOp(*op))
searches = st.tuples(st.lists(st.sampled_from(LABELS), max_size=2).map(tuple), filters, st.integers(1, 5),
                     st.integers(0, 3), st.one_of(st.none(), st.none(), st.sampled_from(["red", "ünï", "x"]))
                     ).map(lambda op: SearchOp(*op))
conditions = st.lists(st.tuples(st.sampled_from(["prefix", "suffix"]),
                                st.lists(st.sampled_from(LABELS + ["*"]), min_size=1, max_size=2).map(tuple)
                                ).map(lambda condition: MatchCondition(*cast(Any, condition))), max_size=2)
listings = st.tuples(conditions.map(tuple), st.one_of(st.none(), st.integers(1, 3)), st.integers(1, 6),
                     st.integers(0, 2)).map(lambda op: ListNamespacesOp(*op))
batches = st.lists(st.lists(st.one_of(puts, puts, gets, searches, listings), min_size=1, max_size=5),
                   min_size=1, max_size=6)


def seen(result: Any) -> Any:
    """What a read answered, without the timestamps (each store keeps its own clock)."""
    if result is None:
        return None
    if isinstance(result, list):
        return [seen(each) for each in result]
    if isinstance(result, tuple):
        return result
    return (result.namespace, result.key, result.value)


def canonical(seen_item: Any) -> str:
    return json.dumps(seen_item, sort_keys=True)


def expected(reference: InMemoryStore, op: Any) -> Any:
    """The reference's answer to a read, as the contract has it (see the module's docstring); asked before the
    batch runs on the reference, since every read in a batch sees the state before it."""
    if isinstance(op, SearchOp):
        return sorted(map(canonical, seen(reference.batch([op._replace(limit=10_000, offset=0)])[0])))
    if isinstance(op, ListNamespacesOp):
        matching = cast(list[tuple[str, ...]], reference.batch([op._replace(max_depth=None, limit=10_000, offset=0)])[0])
        holding = {item.namespace for item in reference.search((), limit=10_000)}
        held = sorted({namespace[:op.max_depth] for namespace in matching if namespace in holding})
        return held[op.offset:op.offset + op.limit]
    return seen(reference.batch([op])[0]) if isinstance(op, GetOp) else None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches)
def test_random_batches_read_what_the_reference_store_reads(fresh_store: Any, batches: list[list[Any]]) -> None:
    store, reference = fresh_store(), InMemoryStore()
    for batch in batches:
        wanted = [expected(reference, op) for op in batch]
        assert [seen(result) for result, op in zip(reference.batch(batch), batch) if isinstance(op, GetOp)] == [
            want for want, op in zip(wanted, batch) if isinstance(op, GetOp)]  # the reference's own rule
        for op, mine, want in zip(batch, store.batch(batch), wanted):
            if isinstance(op, SearchOp) and op.query:  # ranked by BM25 (the reference has no ranking): the right items
                assert all(canonical(each) in want for each in seen(mine)) and len(mine) <= op.limit, op
                assert [hit.score for hit in mine] == sorted((hit.score for hit in mine), reverse=True), op
            elif isinstance(op, SearchOp):  # unranked: a page of the right size, from the right items
                assert len(mine) == min(op.limit, max(len(want) - op.offset, 0)), op
                assert all(canonical(each) in want for each in seen(mine)) and all(hit.score is None for hit in mine), op
            else:
                assert seen(mine) == want, op


def test_reads_in_a_batch_see_the_state_before_it_and_the_last_put_wins(fresh_store: Any) -> None:
    store = fresh_store()
    store.put(("docs",), "k", {"v": 1})
    got, _, searched, _, listed = store.batch([
        GetOp(("docs",), "k"), PutOp(("docs",), "k", {"v": 2}), SearchOp(("docs",)), PutOp(("docs",), "k", {"v": 3}),
        ListNamespacesOp()])
    assert got.value == {"v": 1} and [item.value for item in searched] == [{"v": 1}] and listed == [("docs",)]
    assert store.get(("docs",), "k").value == {"v": 3}


def test_a_batch_answers_in_the_order_of_its_operations(fresh_store: Any) -> None:
    store = fresh_store()
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch([GetOp(("test", "foo"), "key1"), PutOp(("test", "bar"), "key3", {"data": "value3"}),
                           SearchOp(("test",), {"data": "value1"}), ListNamespacesOp(max_depth=2),
                           GetOp(("test",), "missing")])
    assert results[0].key == "key1" and results[1] is None and [item.key for item in results[2]] == ["key1"]
    assert results[3] == [("test", "bar"), ("test", "foo")] and results[4] is None
    assert store.get(("test", "bar"), "key3").value == {"data": "value3"}


def test_one_batch_is_one_append(live_server: LiveServer, fresh_store: Any) -> None:
    store = fresh_store()
    store.put(("docs",), "gone", {"v": 0})
    with MemorydConsole(live_server.base_url, token=live_server.admin_token) as console:
        head = max((event.position for event in console.iter_events()), default=0)
        store.batch([PutOp(("docs",), f"k{n}", {"v": n}) for n in range(5)] + [PutOp(("docs",), "gone", None),
                                                                                PutOp(("docs",), "never", None)])
        appended = list(console.iter_events(after=head))
    assert len(appended) == 6
    assert len({event.metadata["request_id"] for event in appended}) == 1


def test_keys_labels_and_values_round_trip_exactly(fresh_store: Any) -> None:
    store = fresh_store()
    for namespace, key in [(("Users", "ÅSA"), "Key-1"), (("users", "åsa"), "key_1"), (("a b",), " padded\n"),
                           (("%", "_"), "50%_off"), (("日本",), "ключ"), (("quote'\"",), "'; DROP TABLE store; --")]:
        value = {"text": f"{key} in {namespace}", "nested": {"list": [1, "two", None, True]}}
        store.put(namespace, key, value)
        item = store.get(namespace, key)
        assert (item.namespace, item.key, item.value) == (namespace, key, value)
    assert store.get(("users", "åsa"), "Key-1") is None  # case is kept: a different key
    assert len(store.list_namespaces()) == 6


def test_filters_with_metacharacters_match_literally(fresh_store: Any) -> None:
    store = fresh_store()
    store.put(("docs",), "a", {"tag": "50%_off", "n": 1})
    store.put(("docs",), "b", {"tag": "50xyoff", "n": 2})
    store.put(("docs",), "c", {"tag": "it's", "n": 3})
    assert [item.key for item in store.search(("docs",), filter={"tag": "50%_off"})] == ["a"]
    assert [item.key for item in store.search(("docs",), filter={"tag": "it's"})] == ["c"]
    assert sorted(item.key for item in store.search(("docs",), filter={"n": {"$gte": 2}})) == ["b", "c"]


def test_namespace_prefixes_match_whole_labels_and_wildcards_only_in_conditions(fresh_store: Any) -> None:
    store = fresh_store()
    for namespace in [("a", "b"), ("a", "bc"), ("ab",), ("*", "b")]:
        store.put(namespace, "k", {"v": 1})
    assert [item.namespace for item in store.search(("a",))] != []
    assert {item.namespace for item in store.search(("a",))} == {("a", "b"), ("a", "bc")}
    assert [item.namespace for item in store.search(("*",))] == [("*", "b")]  # a literal star in a search prefix
    assert store.list_namespaces(prefix=("*", "b")) == [("*", "b"), ("a", "b")]  # a wildcard in a condition
    assert store.list_namespaces(suffix=("bc",)) == [("a", "bc")]
    assert store.list_namespaces(max_depth=1) == [("*",), ("a",), ("ab",)]


@pytest.mark.parametrize("namespace", [(), ("",), ("a.b",), ("langgraph", "x"), ("nul\x00",)])
def test_invalid_namespaces_are_refused_before_anything_is_sent(fresh_store: Any, namespace: tuple[str, ...]) -> None:
    store = fresh_store()
    with pytest.raises(InvalidNamespaceError):
        store.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(namespace, "k", {"v": 1})])


def test_a_ttl_or_a_vector_index_is_refused_not_dropped(fresh_store: Any) -> None:
    store = fresh_store()
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(("docs",), "k", {"v": 1}, ttl=5)
    with pytest.raises(NotImplementedError, match="vector index"):
        store.put(("docs",), "k", {"text": "hi"}, index=["text"])
    store.put(("docs",), "k", {"v": 1}, index=False)
    assert store.get(("docs",), "k").value == {"v": 1}


def test_a_query_ranks_with_memoryds_bm25_and_gives_each_hit_its_score(fresh_store: Any) -> None:
    store = fresh_store()
    store.put(("notes",), "deploy", {"text": "we deploy with buildkite, deploy on fridays"})
    store.put(("notes",), "lunch", {"text": "lunch at noon, after the deploy"})
    store.put(("notes",), "style", {"text": "tabs, not spaces"})
    store.put(("elsewhere",), "deploy", {"text": "deploy deploy deploy"})
    hits = store.search(("notes",), query="deploy")
    assert [hit.key for hit in hits] == ["deploy", "lunch"]
    assert hits[0].score > hits[1].score > 0
    assert [hit.key for hit in store.search(("notes",), query="deploy", offset=1)] == ["lunch"]
    assert store.search(("notes",), query="deploy", filter={"text": "tabs, not spaces"}) == []


def test_abatch_over_the_async_client_answers_as_batch(live_server: LiveServer, user: dict[str, str],
                                                       fresh_store: Any) -> None:
    sync = fresh_store()

    async def scenario() -> None:
        async with AsyncMemorydServer(live_server.base_url, token=user["token"]) as client:
            store = MemorydStore(sync.server, client, scope=sync.scope, scope_id=sync.scope_id)
            await store.aput(("docs",), "k", {"text": "first words"})
            got, _, searched = await store.abatch([GetOp(("docs",), "k"), PutOp(("docs",), "k", {"text": "second"}),
                                                   SearchOp(("docs",), query="first")])
            assert isinstance(got, Item) and isinstance(searched, list)
            assert got.value == {"text": "first words"} and [cast(Item, hit).key for hit in searched] == ["k"]
            assert present(await store.aget(("docs",), "k")).value == {"text": "second"}
            assert await store.alist_namespaces() == [("docs",)]
            assert present(await MemorydStore(sync.server, scope=sync.scope, scope_id=sync.scope_id).aget(
                ("docs",), "k")).value == {"text": "second"}  # without an async client: batch, in a thread

    asyncio.run(scenario())


def test_a_scope_of_many_pages_reads_as_the_reference_store_reads_it(live_server: LiveServer, user: dict[str, str],
                                                                     fresh_store: Any) -> None:
    """More memories than one list page (200) or one search page (50): every read still sees all of them."""
    store, reference = fresh_store(), InMemoryStore()
    puts = [PutOp(("bulk", str(n % 3)), f"k{n}", {"text": "needle " + "hay " * (n % 7), "n": n % 4}) for n in range(260)]
    puts += [PutOp(("other",), f"k{n}", {"text": "needle elsewhere", "n": n % 4}) for n in range(5)]
    store.batch(puts)  # one append
    reference.batch(puts)
    for op in (ListNamespacesOp(), ListNamespacesOp(max_depth=1), ListNamespacesOp(limit=2, offset=1),
               ListNamespacesOp((MatchCondition("prefix", ("bulk", "*")),))):
        assert store.batch([op]) == reference.batch([op]), op

    def walk(namespace: tuple[str, ...], **options: Any) -> list[Any]:
        """Every page of a search, 60 items a page, by offset."""
        return [each for offset in range(0, 300, 60) for each in seen(store.search(namespace, limit=60, offset=offset,
                                                                                   **options))]

    everything = sorted(map(canonical, seen(reference.search(("bulk",), limit=1000))))
    assert len(everything) == 260 and sorted(map(canonical, walk(("bulk",)))) == everything
    assert sorted(map(canonical, walk(("bulk",), filter={"n": 2}))) == sorted(
        map(canonical, seen(reference.search(("bulk",), filter={"n": 2}, limit=1000))))
    assert sorted(map(canonical, walk(("bulk",), query="needle"))) == everything  # past memoryd's first 50 hits
    deep = store.search(("bulk",), query="needle", limit=30, offset=200)
    assert len(deep) == 30 and all(hit.namespace[0] == "bulk" for hit in deep)
    assert [hit.score for hit in deep] == sorted((hit.score for hit in deep), reverse=True)
    assert store.search(("bulk",), query="needle", offset=260) == []

    async def listed_async() -> list[tuple[str, ...]]:
        async with AsyncMemorydServer(live_server.base_url, token=user["token"]) as client:
            paged = MemorydStore(store.server, client, scope=store.scope, scope_id=store.scope_id)
            return await paged.alist_namespaces()

    assert asyncio.run(listed_async()) == reference.list_namespaces()
