"""``MemorydStore``: LangGraph's ``BaseStore`` over memoryd, so ``store.put/get/search`` and LangMem run on it.

A batch keeps the reference store's rules: every read in it sees the state before it (the reads run
first), the last put per key wins, a ``None`` value deletes, and its writes are ONE append
(``POST /v1/api/memories/batch``): all of them or none. Namespaces and unranked searches read every page
of the scope's list; a search with a query reads memoryd's ranking page by page until each of its
operations has its ``offset + limit`` items (or the ranking ends).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import takewhile
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from memoryd_sdk._async import AsyncMemorydServer
from memoryd_sdk._calls import SEARCH_OFFSET_CAP
from memoryd_sdk._sync import MemorydServer
from memoryd_sdk.errors import NotFoundError
from memoryd_sdk.integrations.langgraph._codec import DESCRIPTION, admits, content_of, item_of, matches, name_of, plain
from memoryd_sdk.models import MemoryInfo

LIST_PAGE = 200  # the most memories memoryd's list answers at once
SEARCH_PAGE = 50  # the most hits memoryd's search answers at once
DEEPEST_HIT = SEARCH_OFFSET_CAP + SEARCH_PAGE  # memoryd ranks no deeper


class StoreLimitError(RuntimeError):
    """A search with a query needs hits past the deepest memoryd ranks (its offset cap and a page, 10,050):
    this store refuses rather than answer a part."""


@dataclass
class _Plan:
    """A batch, read before anything is written: what to fetch, and the writes (last put per key)."""

    ops: list[Op]
    gets: dict[tuple[tuple[str, ...], str], None] = field(default_factory=dict)
    queries: dict[str, list[SearchOp]] = field(default_factory=dict)  # the searches of each query
    lists: bool = False
    puts: dict[tuple[tuple[str, ...], str], PutOp] = field(default_factory=dict)

    @classmethod
    def of(cls, ops: Iterable[Op]) -> _Plan:
        plan = cls(list(ops))
        for op in plan.ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                plan.gets[(op.namespace, op.key)] = None
            elif isinstance(op, SearchOp) and op.query:  # ranked by memoryd: its hits, no listing
                plan.queries.setdefault(op.query, []).append(op)
            elif isinstance(op, SearchOp):
                plan.lists = True
            elif isinstance(op, ListNamespacesOp):
                plan.lists = True
            elif isinstance(op, PutOp):
                _refuse_unsupported(op)
                plan.puts[(op.namespace, op.key)] = op
            else:
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        return plan

    def answer(self, found: dict[tuple[tuple[str, ...], str], Item | None], listed: list[SearchItem],
               hits: dict[str, list[SearchItem]]) -> list[Result]:
        results: list[Result] = []
        for op in self.ops:
            if isinstance(op, GetOp):
                results.append(found[(op.namespace, op.key)])
            elif isinstance(op, SearchOp):
                results.append(_search(op, hits[op.query] if op.query else listed))
            elif isinstance(op, ListNamespacesOp):
                results.append(_namespaces(op, listed))
            else:
                results.append(None)
        return results


@dataclass
class _Ranked:
    """A query's hits as memoryd's pages give them, best first, each memory once (a write between two pages may
    shift a hit onto the next one: its first place is kept), and how many of them each of its searches keeps."""

    searches: list[SearchOp]
    items: list[SearchItem] = field(default_factory=list)
    read: int = 0
    seen: set[str] = field(default_factory=set)
    kept: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kept = [0] * len(self.searches)

    def add(self, memory: MemoryInfo) -> bool:
        """Take one hit; True at the end of a page once every search is answered (reading may stop there)."""
        self.read += 1
        if memory.memory_id not in self.seen and (item := item_of(memory)) is not None:
            self.seen.add(memory.memory_id)
            self.items.append(item)
            self.kept = [count + _keeps(op, item) for op, count in zip(self.searches, self.kept)]
        return self.read % SEARCH_PAGE == 0 and self.answered()

    def answered(self) -> bool:
        return all(count >= op.offset + op.limit for op, count in zip(self.searches, self.kept))

    def complete(self) -> list[SearchItem]:
        """The hits, unless memoryd stopped ranking before they answer every search."""
        if self.read >= DEEPEST_HIT and not self.answered():
            raise StoreLimitError(f"a search with a query needs hits past the {DEEPEST_HIT:,} best, deeper than "
                                  "memoryd ranks: narrow the query, or lower offset")
        return self.items


def _refuse_unsupported(op: PutOp) -> None:
    """What ``BaseStore.put`` checks, checked for puts given to ``batch`` directly too; and what memoryd cannot keep."""
    if not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if op.namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {op.namespace}')
    if op.ttl is not None:
        raise NotImplementedError("MemorydStore does not expire items: memoryd keeps a memory until it is deleted "
                                  "(put without ttl)")
    if op.index not in (None, False):
        raise NotImplementedError("MemorydStore has no vector index: search ranks the whole value with memoryd's "
                                  "BM25 (put without index, or index=False)")


def _items(memories: list[MemoryInfo]) -> list[SearchItem]:
    """The items of the memories a walk of the list met, newest first, each once (its last copy: the newest)."""
    latest = {memory.memory_id: memory for memory in memories}
    items = [item for item in map(item_of, latest.values()) if item is not None]
    items.sort(key=lambda item: (item.namespace, item.key))
    items.sort(key=lambda item: item.updated_at, reverse=True)  # newest first; ties by namespace and key
    return items


def _keeps(op: SearchOp, item: SearchItem) -> bool:
    prefix = tuple(op.namespace_prefix)
    return item.namespace[:len(prefix)] == prefix and all(
        admits(item.value.get(name), wanted) for name, wanted in (op.filter or {}).items())


def _search(op: SearchOp, candidates: list[SearchItem]) -> list[SearchItem]:
    return [item for item in candidates if _keeps(op, item)][op.offset:op.offset + op.limit]


def _namespaces(op: ListNamespacesOp, listed: list[SearchItem]) -> list[tuple[str, ...]]:
    found = {item.namespace for item in listed
             if all(matches(condition, item.namespace) for condition in op.match_conditions or ())}
    if op.max_depth is not None:
        found = {namespace[:op.max_depth] for namespace in found}
    return sorted(found)[op.offset:op.offset + op.limit]


class MemorydStore(BaseStore):
    """A LangGraph store whose items are memories in one memoryd scope (the token's ``user`` scope by default).

    ``server`` answers ``batch``; ``async_server``, if given, answers ``abatch`` (else ``abatch`` runs
    ``batch`` in a thread). Search with a ``query`` ranks by memoryd's BM25 over the value's text and
    gives each hit its ``score``; without one, items come newest first. No TTL, no vector index: both
    are refused, never dropped."""

    supports_ttl = False

    def __init__(self, server: MemorydServer, async_server: AsyncMemorydServer | None = None, *,
                 scope: str = "user", scope_id: str = "") -> None:
        self.server, self.async_server = server, async_server
        self.scope, self.scope_id = scope, scope_id

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plan = _Plan.of(ops)
        found = {pair: self._get(*pair) for pair in plan.gets}
        listed = self._listed() if plan.lists else []
        hits = {query: self._hits(plan, query) for query in plan.queries}
        results = plan.answer(found, listed, hits)
        if plan.puts:
            self.server.write_memories(self._writes(plan))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        server = self.async_server
        if server is None:
            return await asyncio.to_thread(self.batch, ops)
        plan = _Plan.of(ops)
        pairs = list(plan.gets)
        items, listings, searched = await asyncio.gather(
            asyncio.gather(*(self._aget(server, *pair) for pair in pairs)),
            asyncio.gather(*([self._alisted(server)] if plan.lists else [])),
            asyncio.gather(*(self._ahits(server, plan, query) for query in plan.queries)))
        listed = listings[0] if listings else []
        results = plan.answer(dict(zip(pairs, items)), listed, dict(zip(plan.queries, searched)))
        if plan.puts:
            await server.write_memories(self._writes(plan))
        return results

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        try:
            return self._item(self.server.get_memory(name_of(namespace, key), scope=self.scope, scope_id=self.scope_id))
        except NotFoundError:
            return None

    async def _aget(self, server: AsyncMemorydServer, namespace: tuple[str, ...], key: str) -> Item | None:
        try:
            return self._item(await server.get_memory(name_of(namespace, key), scope=self.scope,
                                                      scope_id=self.scope_id))
        except NotFoundError:
            return None

    @staticmethod
    def _item(memory: MemoryInfo) -> Item | None:
        item = item_of(memory)
        return None if item is None else plain(item)

    def _listed(self) -> list[SearchItem]:
        """The items of every page of the list. A write during a walk of several pages moves what it touches to
        the front, which the walk has passed; so such a walk is followed by a read of the front, down to the
        newest memory the walk began with: every item is met, as it was before the batch or as a write during
        the walk left it. (Memories of that memory's second are read again: a write in the same second sorts
        among them.)"""
        memories = list(self.server.iter_memories(scope=self.scope, scope_id=self.scope_id, page=LIST_PAGE))
        if len(memories) > LIST_PAGE:
            memories += takewhile(lambda memory: memory.updated >= memories[0].updated, self.server.iter_memories(
                scope=self.scope, scope_id=self.scope_id, page=LIST_PAGE))
        return _items(memories)

    async def _alisted(self, server: AsyncMemorydServer) -> list[SearchItem]:
        memories = [memory async for memory in server.iter_memories(scope=self.scope, scope_id=self.scope_id,
                                                                    page=LIST_PAGE)]
        if len(memories) > LIST_PAGE:
            async for memory in server.iter_memories(scope=self.scope, scope_id=self.scope_id, page=LIST_PAGE):
                if memory.updated < memories[0].updated:
                    break
                memories.append(memory)
        return _items(memories)

    def _hits(self, plan: _Plan, query: str) -> list[SearchItem]:
        ranked = _Ranked(plan.queries[query])
        for memory in self.server.iter_search_memories(query, scope=self.scope, scope_id=self.scope_id,
                                                       page=SEARCH_PAGE):
            if ranked.add(memory):
                break
        return ranked.complete()

    async def _ahits(self, server: AsyncMemorydServer, plan: _Plan, query: str) -> list[SearchItem]:
        ranked = _Ranked(plan.queries[query])
        async for memory in server.iter_search_memories(query, scope=self.scope, scope_id=self.scope_id,
                                                        page=SEARCH_PAGE):
            if ranked.add(memory):
                break
        return ranked.complete()

    def _writes(self, plan: _Plan) -> list[dict[str, Any]]:
        scope = {"scope": self.scope} | ({"scope_id": self.scope_id} if self.scope_id else {})
        return [{"action": "delete", "name": name_of(namespace, key), "missing_ok": True} | scope
                if op.value is None else
                {"action": "save", "name": name_of(namespace, key), "content": content_of(namespace, key, op.value),
                 "description": DESCRIPTION} | scope
                for (namespace, key), op in plan.puts.items()]
