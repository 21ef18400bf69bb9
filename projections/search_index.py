"""The BM25 search index: an in-memory projection of the log, kept per process.

Layout, chosen for "cost follows what the caller can see":

* Every document (memory) gets a *slot*: its length, type, namespace and
  liveness live in numpy arrays indexed by slot. A slot is never reused;
  replacing a memory tombstones its old slot and takes a new one.
* Postings are partitioned by *namespace* ``(scope, scope_id)``. Each
  namespace holds an immutable CSR segment (sorted term ids, offsets, slots,
  term frequencies) plus a small mutable delta for recent additions, merged
  into the segment when it grows past a fraction of it. So an add costs time
  proportional to the memory's length, a delete is a tombstone, and a query
  touches only the namespaces it may see.
* Statistics (document count, average length, document frequencies) are
  computed per query over exactly the searched set: the visible namespaces,
  the type filter, live documents only. Another user's memories never change
  the caller's scores.

The index keeps the log position it has applied; applying an event at or
below it does nothing, so redelivery is harmless.
"""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from events.types import MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.domain import MEMORY_TYPES, Memory
from projections.queries import MemoryFilter
from projections.ranking import K1, B, idf, tokenize

TYPE_CODES = {memory_type: code for code, memory_type in enumerate(MEMORY_TYPES)}
ALL_TYPES = len(MEMORY_TYPES)  # the counters' last column sums every type
MERGE_FRACTION = 0.10  # merge a namespace's delta once it holds this share of its postings
MERGE_MINIMUM = 4_096


def _joined(strings: Iterable[str]) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode(), np.uint8)


def _split(array: np.ndarray) -> list[str]:
    text = array.tobytes().decode()
    return text.split("\n") if text else []


def _best(scores: np.ndarray, limit: int) -> np.ndarray:
    """A mask of the positive scores at or above the cut for the ``limit`` best."""
    if len(scores) <= limit:
        return scores > 0
    cut = _cut(scores, limit)
    return scores >= cut if cut > 0 else scores > 0


def _cut(scores: np.ndarray, limit: int, block: int = 512) -> float:
    """A score at or below the ``limit``-th best: the ``limit``-th best of the blocks' maxima.

    Those maxima are ``limit`` distinct scores, so at least ``limit`` scores reach
    the cut; keeping everything at or above it keeps every tie. Cheaper than a
    partition of all scores, and it leaves few candidates to sort exactly.
    """
    blocks = -(-len(scores) // block)
    if blocks <= limit:  # few scores: the exact cut among the positive ones
        positive = scores[scores > 0]
        return float(np.partition(positive, len(positive) - limit)[len(positive) - limit]) if len(positive) > limit else 0.0
    padded = np.zeros(blocks * block)
    padded[: len(scores)] = scores
    maxima = padded.reshape(blocks, block).max(axis=1)
    return float(np.partition(maxima, blocks - limit)[blocks - limit])


def _frequencies(counts: np.ndarray) -> np.ndarray:
    """Term frequencies as stored: uint16, saturating (only a giant description could exceed it)."""
    return np.minimum(counts, 65_535).astype(np.uint16)


def _concatenated(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype)


@dataclass(frozen=True)
class Hit:
    memory_id: str
    score: float


class _Namespace:
    """The postings of one ``(scope, scope_id)``: a CSR segment plus a delta."""

    __slots__ = ("terms", "offsets", "slots", "freqs", "delta", "delta_size", "documents", "lengths", "tombstones")

    def __init__(self) -> None:
        self.terms = np.empty(0, np.int64)  # sorted term ids in the segment
        self.offsets = np.zeros(1, np.int64)  # postings of terms[i] are [offsets[i], offsets[i+1])
        self.slots = np.empty(0, np.int32)
        self.freqs = np.empty(0, np.uint16)
        self.delta: dict[int, list[int]] = {}  # term id -> [slot, freq, slot, freq, ...]
        self.delta_size = 0
        self.documents = np.zeros(ALL_TYPES + 1, np.int64)  # live documents per type, and in all
        self.lengths = np.zeros(ALL_TYPES + 1, np.int64)  # their summed lengths
        self.tombstones = 0  # removed documents whose postings are still stored

    def postings(self, term_ids: np.ndarray) -> list[tuple[np.ndarray, np.ndarray] | None]:
        """For each term id: (slots, freqs) in this namespace, or None."""
        found = np.searchsorted(self.terms, term_ids)
        result: list[tuple[np.ndarray, np.ndarray] | None] = []
        for term_id, index in zip(term_ids.tolist(), found.tolist()):
            parts = []
            if index < len(self.terms) and self.terms[index] == term_id:
                start, end = self.offsets[index], self.offsets[index + 1]
                parts.append((self.slots[start:end], self.freqs[start:end]))
            if (pending := self.delta.get(term_id)) is not None:
                pairs = np.asarray(pending, np.int64).reshape(-1, 2)
                parts.append((pairs[:, 0].astype(np.int32), _frequencies(pairs[:, 1])))
            if not parts:
                result.append(None)
            elif len(parts) == 1:
                result.append(parts[0])
            else:
                result.append((np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])))
        return result

    def merge(self, alive: np.ndarray) -> None:
        """Fold the delta into a new segment, dropping tombstoned slots.

        A linear merge, not a sort: the segment is ordered by (term, slot), and
        slots only grow, so each term's delta postings belong right after its
        segment postings; only the (small) delta needs sorting by term.
        """
        pending_terms = np.fromiter(
            chain.from_iterable(repeat(term_id, len(pending) // 2) for term_id, pending in self.delta.items()), np.int32)
        pairs = np.fromiter(chain.from_iterable(self.delta.values()), np.int64).reshape(-1, 2)
        order = np.argsort(pending_terms, kind="stable")
        pending_terms = pending_terms[order]
        segment_terms = np.repeat(self.terms.astype(np.int32), np.diff(self.offsets))
        at = np.searchsorted(segment_terms, pending_terms, side="right")
        all_terms = np.insert(segment_terms, at, pending_terms)
        all_slots = np.insert(self.slots, at, pairs[order, 0].astype(np.int32))
        all_freqs = np.insert(self.freqs, at, _frequencies(pairs[order, 1]))
        if self.tombstones:
            live = alive[all_slots]
            all_terms, all_slots, all_freqs = all_terms[live], all_slots[live], all_freqs[live]
        starts = np.flatnonzero(np.diff(all_terms, prepend=-1))
        self.terms = all_terms[starts].astype(np.int64)
        self.offsets = np.append(starts, len(all_terms)).astype(np.int64)
        self.slots, self.freqs = all_slots, all_freqs
        self.delta, self.delta_size, self.tombstones = {}, 0, 0


class SearchIndex:
    """BM25 over memories, exact per caller; thread-safe (one lock, short holds)."""

    def __init__(self, k1: float = K1, b: float = B) -> None:
        self.k1, self.b = k1, b
        self.position = 0
        self._lock = threading.Lock()
        self._vocabulary: dict[str, int] = {}
        self._namespaces: dict[tuple[str, str], _Namespace] = {}
        self._by_scope: dict[str, list[_Namespace]] = {}
        self._slot_of: dict[str, int] = {}
        self._memory_ids: list[str | None] = []
        self._updated: list[str] = []
        self._length = np.zeros(1024, np.int32)
        self._type = np.zeros(1024, np.uint8)
        self._alive = np.zeros(1024, bool)
        self._namespace_of: list[_Namespace | None] = []
        self._bulk = False

    # -- maintenance -----------------------------------------------------------

    def apply(self, recorded: RecordedEvent) -> None:
        """Apply one event from the log, once: positions at or below ours are ignored."""
        with self._lock:
            if recorded.position <= self.position:
                return
            event = recorded.to_domain()
            if isinstance(event, MemoryEvent):
                self._remove(event.memory.memory_id)
                if not isinstance(event, MemoryDeleted):
                    self._add(event.memory)
            self.position = recorded.position

    def apply_all(self, recorded: Iterable[RecordedEvent]) -> None:
        for event in recorded:
            self.apply(event)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Defer merging deltas until the end (a rebuild: one merge instead of dozens)."""
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
            with self._lock:
                for namespace in self._namespaces.values():
                    namespace.merge(self._alive)

    def __len__(self) -> int:
        return len(self._slot_of)

    def _add(self, memory: Memory) -> None:
        words = tokenize(f"{memory.name} {memory.description} {memory.content}")
        slot = len(self._memory_ids)
        self._grow(slot + 1)
        key = (memory.scope, memory.scope_id)
        namespace = self._namespaces.get(key)
        if namespace is None:
            namespace = self._namespaces[key] = _Namespace()
            self._by_scope.setdefault(memory.scope, []).append(namespace)
        type_code = TYPE_CODES.get(memory.type, TYPE_CODES["general"])
        self._memory_ids.append(memory.memory_id)
        self._updated.append(memory.updated)
        self._namespace_of.append(namespace)
        self._slot_of[memory.memory_id] = slot
        self._length[slot], self._type[slot], self._alive[slot] = len(words), type_code, True
        vocabulary, delta = self._vocabulary, namespace.delta
        for word, frequency in Counter(words).items():
            term_id = vocabulary.setdefault(word, len(vocabulary))
            delta.setdefault(term_id, []).extend((slot, frequency))
        namespace.delta_size += len(words)
        for column in (type_code, ALL_TYPES):
            namespace.documents[column] += 1
            namespace.lengths[column] += len(words)
        if not self._bulk and namespace.delta_size > max(MERGE_MINIMUM, MERGE_FRACTION * len(namespace.slots)):
            namespace.merge(self._alive)

    def _remove(self, memory_id: str) -> None:
        slot = self._slot_of.pop(memory_id, None)
        if slot is None:
            return
        namespace = self._namespace_of[slot]
        assert namespace is not None
        for column in (int(self._type[slot]), ALL_TYPES):
            namespace.documents[column] -= 1
            namespace.lengths[column] -= int(self._length[slot])
        namespace.tombstones += 1
        self._alive[slot] = False
        self._memory_ids[slot] = None
        self._namespace_of[slot] = None

    def _grow(self, needed: int) -> None:
        if needed <= len(self._alive):
            return
        size = max(needed, 2 * len(self._alive))
        self._length = np.resize(self._length, size)
        self._type = np.resize(self._type, size)
        alive = np.zeros(size, bool)
        alive[: len(self._alive)] = self._alive
        self._alive = alive

    # -- snapshots -------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The whole index as one ``.npz`` blob (no pickle), to start other processes fast."""
        with self._lock:
            namespaces = list(self._namespaces.items())
            for _, namespace in namespaces:
                namespace.merge(self._alive)
            number = {id(namespace): index for index, (_, namespace) in enumerate(namespaces)}
            slots = len(self._memory_ids)
            arrays = {
                "position": np.array([self.position], np.int64),
                "words": _joined(self._vocabulary),
                "memory_ids": _joined(memory_id or "" for memory_id in self._memory_ids),
                "updated": _joined(self._updated),
                "length": self._length[:slots], "type": self._type[:slots], "alive": self._alive[:slots],
                "namespace_of": np.array([number[id(ns)] if ns is not None else -1 for ns in self._namespace_of], np.int32),
                "keys": np.frombuffer(json.dumps([key for key, _ in namespaces]).encode(), np.uint8),
                "term_counts": np.array([len(ns.terms) for _, ns in namespaces], np.int64),
                "posting_counts": np.array([len(ns.slots) for _, ns in namespaces], np.int64),
                "terms": _concatenated([ns.terms for _, ns in namespaces], np.int64),
                "term_postings": _concatenated([np.diff(ns.offsets) for _, ns in namespaces], np.int64),
                "slots": _concatenated([ns.slots for _, ns in namespaces], np.int32),
                "freqs": _concatenated([ns.freqs for _, ns in namespaces], np.uint16),
                "documents": np.array([ns.documents for _, ns in namespaces], np.int64).reshape(-1, ALL_TYPES + 1),
                "lengths": np.array([ns.lengths for _, ns in namespaces], np.int64).reshape(-1, ALL_TYPES + 1),
            }
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes, k1: float = K1, b: float = B) -> SearchIndex:
        data = np.load(io.BytesIO(blob), allow_pickle=False)
        index = cls(k1, b)
        index.position = int(data["position"][0])
        words = _split(data["words"])
        index._vocabulary = {word: term_id for term_id, word in enumerate(words)}
        memory_ids = _split(data["memory_ids"])
        index._memory_ids = [memory_id or None for memory_id in memory_ids]
        index._updated = _split(data["updated"])
        index._length, index._type, index._alive = data["length"].copy(), data["type"].copy(), data["alive"].copy()
        index._grow(len(memory_ids) + 1)
        keys = [tuple(key) for key in json.loads(data["keys"].tobytes().decode())]
        term_ends, posting_ends = np.cumsum(data["term_counts"]), np.cumsum(data["posting_counts"])
        namespaces = []
        for number, key in enumerate(keys):
            namespace = _Namespace()
            t0, t1 = (term_ends[number - 1] if number else 0), term_ends[number]
            p0, p1 = (posting_ends[number - 1] if number else 0), posting_ends[number]
            namespace.terms = data["terms"][t0:t1].copy()
            namespace.offsets = np.concatenate([[0], np.cumsum(data["term_postings"][t0:t1])]).astype(np.int64)
            namespace.slots, namespace.freqs = data["slots"][p0:p1].copy(), data["freqs"][p0:p1].copy()
            namespace.documents, namespace.lengths = data["documents"][number].copy(), data["lengths"][number].copy()
            index._namespaces[key] = namespace  # type: ignore[index]
            index._by_scope.setdefault(key[0], []).append(namespace)
            namespaces.append(namespace)
        index._namespace_of = [namespaces[n] if n >= 0 else None for n in data["namespace_of"].tolist()]
        index._slot_of = {memory_id: slot for slot, memory_id in enumerate(index._memory_ids) if memory_id}
        return index

    # -- queries ---------------------------------------------------------------

    def search(self, where: MemoryFilter, query: str, limit: int) -> list[Hit]:
        """The ``limit`` best memories ``where`` admits: score, then newest, then id."""
        words = Counter(tokenize(query))
        with self._lock:
            namespaces = self._select(where)
            column = TYPE_CODES[where.type] if where.type else ALL_TYPES
            documents = sum(int(ns.documents[column]) for ns in namespaces)
            term_ids = [self._vocabulary[word] for word in words if word in self._vocabulary]
            if not documents or not term_ids or limit <= 0:
                return []
            average_length = sum(int(ns.lengths[column]) for ns in namespaces) / documents
            repeats = np.array([words[word] for word in words if word in self._vocabulary], np.float64)
            slots, scores = self._score(namespaces, np.array(term_ids, np.int64), repeats, where.type,
                                        documents, average_length, limit)
            return self._top(slots, scores, limit)

    def _select(self, where: MemoryFilter) -> list[_Namespace]:
        if where.scopes is None:
            return list(self._namespaces.values())
        chosen: dict[int, _Namespace] = {}
        for pattern in where.scopes:
            if pattern.scope_id is None:
                matches = self._by_scope.get(pattern.scope, [])
            else:
                found = self._namespaces.get((pattern.scope, pattern.scope_id))
                matches = [found] if found is not None else []
            chosen.update((id(namespace), namespace) for namespace in matches)
        return list(chosen.values())

    def _score(self, namespaces: Sequence[_Namespace], term_ids: np.ndarray, repeats: np.ndarray,
               memory_type: str, documents: int, average_length: float, limit: int) -> tuple[np.ndarray, np.ndarray]:
        per_term: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in term_ids]
        for namespace in namespaces:
            for bucket, found in zip(per_term, namespace.postings(term_ids)):
                if found is not None:
                    bucket.append(found)
        k1, b = self.k1, self.b
        clean = not memory_type and not any(namespace.tombstones for namespace in namespaces)
        touched = sum(len(part[0]) for bucket in per_term for part in bucket)
        slot_count = len(self._memory_ids)
        dense = touched * 8 > slot_count  # many postings: accumulate into one array over all slots
        totals = np.zeros(slot_count) if dense else None
        norms = k1 * (1 - b) + (k1 * b / average_length) * self._length[:slot_count] if dense else None
        slot_parts, score_parts = [], []
        for times, bucket in zip(repeats.tolist(), per_term):
            if not bucket:
                continue
            slots = np.concatenate([part[0] for part in bucket]) if len(bucket) > 1 else bucket[0][0]
            freqs = np.concatenate([part[1] for part in bucket]) if len(bucket) > 1 else bucket[0][1]
            if not clean:  # drop tombstoned slots and other types
                keep = self._alive[slots]
                if memory_type:
                    keep &= self._type[slots] == TYPE_CODES[memory_type]
                slots, freqs = slots[keep], freqs[keep]
            if not len(slots):
                continue
            weight = times * idf(documents, len(slots)) * (k1 + 1)
            tf = freqs.astype(np.float64)
            if norms is not None:
                norm = np.take(norms, slots)
            else:
                norm = k1 * (1 - b) + (k1 * b / average_length) * np.take(self._length, slots)
            np.add(norm, tf, out=norm)  # in place: tf * weight / (tf + norm), no temporaries
            contribution = np.divide(tf, norm, out=tf)
            contribution *= weight
            if totals is not None:
                np.add.at(totals, slots, contribution)
            else:
                slot_parts.append(slots)
                score_parts.append(contribution)
        if totals is not None:
            hit = np.flatnonzero(_best(totals, limit))
            return hit, totals[hit]
        if not slot_parts:
            return np.empty(0, np.int32), np.empty(0, np.float64)
        unique, inverse = np.unique(np.concatenate(slot_parts), return_inverse=True)
        return unique, np.bincount(inverse, weights=np.concatenate(score_parts))

    def _top(self, slots: np.ndarray, scores: np.ndarray, limit: int) -> list[Hit]:
        if len(scores) > limit:
            keep = _best(scores, limit)  # ties at the cut stay in; the tie-break decides below
            slots, scores = slots[keep], scores[keep]
        ranked = [(float(score), int(slot)) for score, slot in zip(scores.tolist(), slots.tolist()) if score > 0]
        ranked.sort(key=lambda pair: self._memory_ids[pair[1]] or "")
        ranked.sort(key=lambda pair: self._updated[pair[1]], reverse=True)
        ranked.sort(key=lambda pair: pair[0], reverse=True)
        return [Hit(self._memory_ids[slot] or "", score) for score, slot in ranked[:limit]]
