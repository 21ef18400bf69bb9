"""The BM25 search index: an in-memory projection of the log, kept per process.

Layout: a log-structured set of parts, like Lucene's segments, laid out so that
a query's cost follows what the caller can see.

* Every indexed memory holds a *slot*: its identity while indexed. Its length,
  type, namespace and liveness live in numpy arrays indexed by slot. Removing a
  memory tombstones its slot; the slot is reused once no part refers to it.
* New memories go to a small mutable *delta* (term id -> the delta's document
  numbers and term frequencies). Once it holds ``FREEZE_POSTINGS`` postings it is frozen and a
  background thread turns it into an immutable *segment*.
* A segment numbers its documents by (namespace, slot), so each namespace
  ``(scope, scope_id)`` is one contiguous range of document numbers, and keeps
  its postings term-major (CSR; document numbers ascend within a term). An admin
  query reads one slice per query term; a caller who sees a few namespaces cuts
  their ranges out of each slice with ``searchsorted``.
* ``FANOUT`` segments of one size tier are merged into one in the background,
  off the lock: the merged segment is built from the inputs as they were, then
  swapped in under the lock, with what was removed meanwhile tombstoned in it.
  A merge drops tombstoned documents and frees their slots; a segment more than
  half dead is merged on its own.
* Statistics (document count, average length, document frequencies) are
  computed per query over exactly the searched set: the visible namespaces, the
  type filter, live documents only. Another user's memories never change the
  caller's scores.
* A query scores its rarest words first. Once the words still to come could not
  lift a document it has not scored into the top, the common words (the longest
  postings) are looked up only for the documents that can still get there
  (MaxScore). The answer stays exact, ties included.

The index keeps the log position it has applied; applying an event at or
below it does nothing, so redelivery is harmless.
"""

from __future__ import annotations

import io
import json
import logging
import math
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from typing import NamedTuple, cast

import numpy as np

from events.types import MEMORY_EVENTS, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.domain import MEMORY_TYPES, Memory
from projections.filters import MemoryFilter
from projections.ranking import K1, B, idf, tokenize

TYPE_CODES = {memory_type: code for code, memory_type in enumerate(MEMORY_TYPES)}
ALL_TYPES = len(MEMORY_TYPES)  # the counters' last column sums every type
FREEZE_POSTINGS = 32_768  # freeze the delta into a segment once it holds this many postings
BULK_FREEZE_POSTINGS = 4_000_000  # inside bulk(): bigger deltas, frozen on the spot
FANOUT = 4  # merge this many segments of one size tier into one
TIER_BASE = 512  # documents in a tier-0 segment (a frozen delta holds about this many)
RUNS_CACHED = 256  # visible sets whose document ranges a segment remembers
SNAPSHOT_FORMAT = 2
PRUNE_FROM = 20_000  # postings a query touches: below this, scoring them all is as cheap as pruning
LOOKUP_COST = 8  # binary-searching a term's postings for one candidate costs about as much as scoring 8 postings
SCAN_COST = 1 / 8  # picking the candidates costs about an eighth of a posting's scoring per document searched
_BOUND_SLACK = 1 + 1e-9  # widens the sum of weights still to come, far beyond float rounding
_PACK_LIMIT = 1 << 47  # below this, (term * documents + document) leaves 16 bits for the term frequency

log = logging.getLogger(__name__)


class SnapshotFormatError(ValueError):
    """A snapshot written by another version of the index: rebuild from the log instead."""


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
    maxima = np.maximum.reduceat(scores, np.arange(0, len(scores), block))
    return float(np.partition(maxima, blocks - limit)[blocks - limit])


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenated ``arange(start, end)`` of each pair, vectorized."""
    lengths = ends - starts
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return cast(np.ndarray, np.arange(int(lengths.sum())) + shift)


@dataclass(frozen=True)
class Hit:
    memory_id: str
    score: float


class _Delta:
    """Recent memories, mutable until frozen: term id -> int32 [document, tf, document, tf, ...].

    A delta's document ``d`` is the memory in slot ``slots[d]``.
    """

    __slots__ = ("number", "postings", "slots", "size")

    def __init__(self, number: int) -> None:
        self.number = number
        self.postings: dict[int, array[int]] = {}
        self.slots: list[int] = []
        self.size = 0  # postings

    @property
    def documents(self) -> int:
        return len(self.slots)


class _Segment:
    """Immutable postings of a set of documents, numbered by (namespace, slot); liveness changes."""

    __slots__ = ("number", "slots", "namespaces", "starts", "lengths", "types", "alive", "removed",
                 "_sorted_removed", "_runs", "terms", "offsets", "docs", "tfs")

    def __init__(self, number: int) -> None:
        self.number = number
        self.slots = np.empty(0, np.int32)  # document -> slot
        self.namespaces = np.empty(0, np.int32)  # the namespaces present, ascending
        self.starts = np.zeros(1, np.int64)  # namespaces[i] holds documents [starts[i], starts[i+1])
        self.lengths = np.empty(0, np.int32)  # per document
        self.types = np.empty(0, np.uint8)
        self.alive = np.empty(0, bool)
        self.removed: list[int] = []  # tombstoned documents
        self._sorted_removed = np.empty(0, np.int32)
        self._runs: dict[bytes, tuple[np.ndarray, np.ndarray] | None] = {}  # by visible set: namespaces never change
        self.terms = np.empty(0, np.int32)  # ascending term ids
        self.offsets = np.zeros(1, np.int64)  # postings of terms[i] are [offsets[i], offsets[i+1])
        self.docs = np.empty(0, np.int32)
        self.tfs = np.empty(0, np.uint16)

    @property
    def documents(self) -> int:
        return len(self.slots)

    @property
    def dead(self) -> int:
        return len(self.removed)

    def removed_documents(self) -> np.ndarray:
        """The tombstoned documents, ascending (sorted again only after a removal)."""
        if len(self._sorted_removed) != len(self.removed):
            self._sorted_removed = np.sort(np.array(self.removed, np.int32))
        return self._sorted_removed

    def slices(self, term_ids: np.ndarray) -> list[tuple[int, int]]:
        """For each term id, its postings' [start, end) (empty when absent)."""
        found = np.minimum(np.searchsorted(self.terms, term_ids), max(len(self.terms) - 1, 0))
        present = (self.terms[found] == term_ids) if len(self.terms) else np.zeros(len(term_ids), bool)
        starts = np.where(present, self.offsets[found], 0)
        ends = np.where(present, self.offsets[found + 1], 0)
        return list(zip(starts.tolist(), ends.tolist()))

    def runs(self, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The visible namespaces' document ranges, adjacent ones joined; None when that is everything."""
        key = visible.tobytes()
        if key not in self._runs:
            if len(self._runs) >= RUNS_CACHED:
                self._runs.clear()
            self._runs[key] = self._find_runs(visible)
        return self._runs[key]

    def _find_runs(self, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        found = np.minimum(np.searchsorted(self.namespaces, visible), max(len(self.namespaces) - 1, 0))
        found = found[self.namespaces[found] == visible] if len(self.namespaces) else found[:0]
        firsts, lasts = self.starts[found], self.starts[found + 1]
        joined = np.flatnonzero(firsts[1:] != lasts[:-1]) + 1
        firsts = firsts[np.concatenate(([0], joined))] if len(firsts) else firsts
        lasts = lasts[np.concatenate((joined - 1, [len(lasts) - 1]))] if len(lasts) else lasts
        if len(firsts) == 1 and firsts[0] == 0 and lasts[0] == self.documents:
            return None
        return firsts.astype(np.int32), lasts.astype(np.int32)


@dataclass
class _Source:
    """One part's documents and postings as a merge reads them; ``alive`` as of the capture."""

    slots: np.ndarray
    namespaces: np.ndarray  # per document
    lengths: np.ndarray
    types: np.ndarray
    alive: np.ndarray
    postings: int
    expand: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]  # postings: (term ids, documents, tfs)


def _segment_source(segment: _Segment) -> _Source:
    def expand() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.repeat(segment.terms, np.diff(segment.offsets)), segment.docs, segment.tfs

    namespaces = np.repeat(segment.namespaces, np.diff(segment.starts))
    return _Source(segment.slots, namespaces, segment.lengths, segment.types, segment.alive.copy(),
                   len(segment.docs), expand)


def _build(number: int, sources: list[_Source], vocabulary_size: int) -> _Segment:
    """One segment holding the live documents of ``sources``: pure, so it runs off the lock.

    Each posting becomes one int64 key ``(term * documents + document) << 16 | tf``; sorting
    the keys orders the postings term-major. A segment's keys arrive sorted (its numbering
    and the merged one agree on (namespace, slot) order) and deltas are small, so the stable
    sort (timsort) mostly merges runs. Keys too large to pack fall back to an argsort.
    """
    segment = _Segment(number)
    live = [np.flatnonzero(source.alive) for source in sources]

    def kept(name: str) -> np.ndarray:
        return np.concatenate([getattr(source, name)[chosen] for source, chosen in zip(sources, live)])

    slots, namespaces = kept("slots").astype(np.int32), kept("namespaces").astype(np.int32)
    order = np.lexsort((slots, namespaces))
    documents = len(order)
    rank = np.empty(documents, np.int32)
    rank[order] = np.arange(documents, dtype=np.int32)
    packed = vocabulary_size * max(documents, 1) < _PACK_LIMIT
    keys = np.empty(sum(source.postings for source in sources), np.int64)
    frequencies = None if packed else np.empty(len(keys), np.uint16)
    filled = done = 0
    for source, chosen in zip(sources, live):
        renumber = np.full(len(source.slots), -1, np.int32)
        renumber[chosen] = rank[done:done + len(chosen)]
        done += len(chosen)
        terms, docs, tfs = source.expand()
        docs = renumber[docs]
        keep = docs >= 0
        count = int(np.count_nonzero(keep))
        part = keys[filled:filled + count]
        np.multiply(terms[keep], documents, out=part, dtype=np.int64)
        part += docs[keep]
        if packed:
            part <<= 16
            part |= tfs[keep]
        else:
            frequencies[filled:filled + count] = tfs[keep]  # type: ignore[index]
        filled += count
    keys = keys[:filled]
    if packed:
        keys.sort(kind="stable")
        frequencies = (keys & 0xFFFF).astype(np.uint16)
        keys >>= 16
    else:
        ordering = np.argsort(keys, kind="stable")
        keys, frequencies = keys[ordering], frequencies[:filled][ordering]  # type: ignore[index]
        del ordering
    segment.docs = (keys % max(documents, 1)).astype(np.int32)
    keys //= max(documents, 1)  # now the term ids, ascending
    offsets = np.searchsorted(keys, np.arange(vocabulary_size + 1))
    present = np.flatnonzero(np.diff(offsets))
    segment.terms = present.astype(np.int32)
    segment.offsets = np.append(offsets[present], filled).astype(np.int64)
    segment.tfs = frequencies
    segment.slots = slots[order]
    namespaces = namespaces[order]
    firsts = np.flatnonzero(np.diff(namespaces, prepend=-1))
    segment.namespaces = namespaces[firsts]
    segment.starts = np.append(firsts, documents).astype(np.int64)
    segment.lengths = kept("lengths")[order]
    segment.types = kept("types")[order]
    segment.alive = np.ones(documents, bool)
    return segment


@dataclass(frozen=True)
class IndexShape:
    """What the index holds, for operators and benchmarks."""

    memories: int
    slots: int  # allocated per-slot entries: live memories, removed ones not merged away yet, free ones
    parts: int  # segments and deltas a query reads
    segments: int
    delta_postings: int  # not yet in a segment
    tombstones: int  # removed memories still in a segment
    merging: bool


class Postings(NamedTuple):
    """One query term's visible postings in one part."""

    positions: np.ndarray  # ascending, in the part's own position space
    documents: np.ndarray  # the part's document numbers
    tfs: np.ndarray
    zero: np.ndarray | None  # which of them are tombstones to score zero, or None


@dataclass
class _Gathered:
    """One part's visible postings of each query term, numbered in a space of its own.

    Lengths are looked up only for the postings that get scored.
    """

    postings: list[Postings]
    lengths: np.ndarray  # by the part's document number
    space: int  # positions are < space
    slots_of: Callable[[np.ndarray], np.ndarray]


_EMPTY = Postings(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint16), None)
_NOTHING = np.empty(0, np.int32)


class SearchIndex:
    """BM25 over memories, exact per caller; thread-safe (one lock, short holds)."""

    def __init__(self, k1: float = K1, b: float = B) -> None:
        self.k1, self.b = k1, b
        self.position = 0
        self._lock = threading.Lock()
        self._vocabulary: dict[str, int] = {}
        self._namespace_numbers: dict[tuple[str, str], int] = {}
        self._by_scope: dict[str, list[int]] = {}
        # live documents and their summed lengths per namespace, by type and in all (the last column);
        # Python lists: an apply updates four counters, and list items are ten times cheaper than numpy's
        self._documents: list[list[int]] = []
        self._lengths: list[list[int]] = []
        self._slot_of: dict[str, int] = {}
        self._memory_ids: list[str | None] = []
        self._updated: list[str] = []
        self._free: list[int] = []  # slots no part refers to
        self._length = np.zeros(1024, np.int32)
        self._type = np.zeros(1024, np.uint8)
        self._namespace = np.zeros(1024, np.int32)
        self._alive = np.zeros(1024, bool)
        self._part_of = np.zeros(1024, np.int32)  # slot -> the number of the part holding it
        self._document_of = np.zeros(1024, np.int32)  # slot -> its document number in that segment
        self._numbers = count()
        self._delta = _Delta(next(self._numbers))
        self._parts: list[_Delta | _Segment] = [self._delta]
        self._segments: dict[int, _Segment] = {}
        self._merging: set[int] = set()
        self._merger: threading.Thread | None = None
        self._merge_wanted = False  # something changed that may make a merge due
        self._bulk = False

    # -- maintenance -----------------------------------------------------------

    def apply(self, recorded: RecordedEvent) -> None:
        """Apply one event from the log, once: positions at or below ours are ignored."""
        with self._lock:
            if recorded.position <= self.position:
                return
            event = recorded.to_domain() if recorded.event_type.startswith(MEMORY_EVENTS) else None
            if isinstance(event, MemoryEvent):
                self._remove(event.memory.memory_id)
                if not isinstance(event, MemoryDeleted):
                    self._add(event.memory)
            self.position = recorded.position
            self._maintain()

    def apply_all(self, recorded: Iterable[RecordedEvent]) -> None:
        for event in recorded:
            self.apply(event)

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Fill without background merges, then merge everything into one segment (a rebuild)."""
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
            self.wait_for_merges()
            with self._lock:
                self._freeze_if_filled()
                parts = [part for part in self._parts if part is not self._delta]
                if len(parts) > 1 or any(isinstance(part, _Delta) for part in parts):
                    self._swap(parts, _build(next(self._numbers), self._capture(parts), len(self._vocabulary)))

    def wait_for_merges(self) -> None:
        """Return once no background merge is running (tests, benchmarks, snapshots)."""
        while (merger := self._merger) is not None:
            merger.join()

    def __len__(self) -> int:
        return len(self._slot_of)

    def shape(self) -> IndexShape:
        with self._lock:
            segments = list(self._segments.values())
            return IndexShape(len(self._slot_of), len(self._memory_ids), len(self._parts),
                              len(segments), sum(part.size for part in self._parts if isinstance(part, _Delta)),
                              sum(segment.dead for segment in segments), self._merger is not None)

    def _add(self, memory: Memory) -> None:
        words = tokenize(f"{memory.name} {memory.description} {memory.content}")
        namespace = self._namespace_number((memory.scope, memory.scope_id))
        type_code = TYPE_CODES.get(memory.type, TYPE_CODES["general"])
        if self._free:
            slot = self._free.pop()
            self._memory_ids[slot], self._updated[slot] = memory.memory_id, memory.updated
        else:
            slot = len(self._memory_ids)
            self._grow(slot + 1)
            self._memory_ids.append(memory.memory_id)
            self._updated.append(memory.updated)
        self._slot_of[memory.memory_id] = slot
        self._length[slot], self._type[slot], self._namespace[slot] = len(words), type_code, namespace
        self._alive[slot], self._part_of[slot] = True, self._delta.number
        vocabulary, delta, document = self._vocabulary, self._delta, self._delta.documents
        frequencies = Counter(words)
        for word, frequency in frequencies.items():
            term_id = vocabulary.setdefault(word, len(vocabulary))
            if (pending := delta.postings.get(term_id)) is None:
                pending = delta.postings[term_id] = array("i")
            pending.fromlist([document, frequency])
        delta.slots.append(slot)
        delta.size += len(frequencies)
        counts, lengths = self._documents[namespace], self._lengths[namespace]
        counts[type_code] += 1
        counts[ALL_TYPES] += 1
        lengths[type_code] += len(words)
        lengths[ALL_TYPES] += len(words)

    def _remove(self, memory_id: str) -> None:
        slot = self._slot_of.pop(memory_id, None)
        if slot is None:
            return
        namespace, type_code, length = int(self._namespace[slot]), int(self._type[slot]), int(self._length[slot])
        counts, lengths = self._documents[namespace], self._lengths[namespace]
        counts[type_code] -= 1
        counts[ALL_TYPES] -= 1
        lengths[type_code] -= length
        lengths[ALL_TYPES] -= length
        self._alive[slot] = False
        self._memory_ids[slot], self._updated[slot] = None, ""
        segment = self._segments.get(int(self._part_of[slot]))
        if segment is not None:
            segment.alive[self._document_of[slot]] = False
            segment.removed.append(int(self._document_of[slot]))
            self._merge_wanted |= segment.dead * 2 > segment.documents

    def _namespace_number(self, key: tuple[str, str]) -> int:
        number = self._namespace_numbers.get(key)
        if number is None:
            number = self._namespace_numbers[key] = len(self._namespace_numbers)
            self._by_scope.setdefault(key[0], []).append(number)
            self._documents.append([0] * (ALL_TYPES + 1))
            self._lengths.append([0] * (ALL_TYPES + 1))
        return number

    def _grow(self, needed: int) -> None:
        if needed <= len(self._alive):
            return
        size = max(needed, 2 * len(self._alive))
        for name in ("_length", "_type", "_namespace", "_part_of", "_document_of"):
            setattr(self, name, np.resize(getattr(self, name), size))
        alive = np.zeros(size, bool)
        alive[: len(self._alive)] = self._alive
        self._alive = alive

    # -- merging ---------------------------------------------------------------

    def _maintain(self) -> None:
        """After an apply (lock held): freeze a full delta and see that merges get done."""
        if self._bulk:
            if self._delta.size >= BULK_FREEZE_POSTINGS:
                frozen = self._freeze()
                self._swap([frozen], _build(next(self._numbers), self._capture([frozen]), len(self._vocabulary)))
            return
        if self._delta.size >= FREEZE_POSTINGS:
            self._freeze()
        if self._merge_wanted and self._merger is None:
            self._merge_wanted = False
            if self._due() is None:
                return
            self._merger = threading.Thread(target=self._merge_while_due, name="memoryd-search-merge", daemon=True)
            self._merger.start()

    def _freeze(self) -> _Delta:
        """Start a new delta; the old one stays searchable until a merge turns it into a segment."""
        frozen, self._delta = self._delta, _Delta(next(self._numbers))
        self._parts.append(self._delta)
        self._merge_wanted = True
        return frozen

    def _freeze_if_filled(self) -> None:
        """(Lock held) freeze the delta unless it is empty, so everything but an empty delta is immutable."""
        if self._delta.documents:
            self._freeze()

    def _due(self) -> list[_Delta | _Segment] | None:
        """The parts to merge next: frozen deltas, else a mostly dead segment, else a full tier."""
        idle = [part for part in self._parts if part is not self._delta and part.number not in self._merging]
        frozen = [part for part in idle if isinstance(part, _Delta)]
        if frozen:
            return frozen  # type: ignore[return-value]
        segments = [part for part in idle if isinstance(part, _Segment)]
        for segment in segments:
            if segment.dead * 2 > segment.documents:
                return [segment]
        tiers: dict[int, list[_Delta | _Segment]] = {}
        for segment in segments:
            tier = max(0, round(math.log(max(segment.documents, 1) / TIER_BASE, FANOUT)))  # ~TIER_BASE * FANOUT**tier
            tiers.setdefault(tier, []).append(segment)
        full = [tier for tier, members in tiers.items() if len(members) >= FANOUT]
        return tiers[min(full)][:FANOUT] if full else None

    def _merge_while_due(self) -> None:
        """The background merger: build each due merge off the lock, swap it in under it."""
        try:
            while True:
                with self._lock:
                    parts = self._due()
                    if parts is None:
                        self._merger = None
                        return
                    self._merging.update(part.number for part in parts)
                    sources, vocabulary_size = self._capture(parts), len(self._vocabulary)
                try:
                    merged = _build(next(self._numbers), sources, vocabulary_size)
                    with self._lock:
                        self._swap(parts, merged)
                finally:
                    with self._lock:
                        self._merging.difference_update(part.number for part in parts)
        except Exception:  # the parts stay searchable as they are; the next apply tries again
            log.exception("search index merge failed")
            with self._lock:
                self._merger = None

    def _capture(self, parts: list[_Delta | _Segment]) -> list[_Source]:
        """(Lock held) what a merge needs of ``parts``: immutable arrays and a copy of what changes."""
        return [_segment_source(part) if isinstance(part, _Segment) else self._delta_source(part) for part in parts]

    def _delta_source(self, delta: _Delta) -> _Source:
        slots = np.array(delta.slots, np.int64)

        def expand() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            items = list(delta.postings.items())
            terms = np.repeat(np.array([term for term, _ in items], np.int64), [len(pairs) // 2 for _, pairs in items])
            pairs = np.frombuffer(b"".join(pairs.tobytes() for _, pairs in items), np.int32).reshape(-1, 2)
            return terms, pairs[:, 0], np.minimum(pairs[:, 1], 65_535).astype(np.uint16)

        return _Source(slots, self._namespace[slots], self._length[slots], self._type[slots], self._alive[slots],
                       delta.size, expand)

    def _swap(self, parts: list[_Delta | _Segment], merged: _Segment) -> None:
        """(Lock held) replace ``parts`` by ``merged``; tombstone what was removed since the capture."""
        merged.alive = self._alive[merged.slots]
        merged.removed = np.flatnonzero(~merged.alive).tolist()
        self._part_of[merged.slots] = merged.number
        self._document_of[merged.slots] = np.arange(merged.documents, dtype=np.int32)
        replaced = {part.number for part in parts}
        for part in parts:
            self._segments.pop(part.number, None)
            held = part.slots if isinstance(part, _Segment) else np.array(part.slots, np.int64)
            self._free.extend(held[self._part_of[held] == part.number].tolist())  # dropped, now free
        self._parts = [part for part in self._parts if part.number not in replaced]
        if merged.documents:
            self._parts.append(merged)
            self._segments[merged.number] = merged

    # -- snapshots -------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The whole index as one ``.npz`` blob (no pickle, one segment), to start other processes fast."""
        with self._lock:
            self._freeze_if_filled()
            parts = [part for part in self._parts if part is not self._delta]
            sources = self._capture(parts)
            position, words = self.position, list(self._vocabulary)
            keys = sorted(self._namespace_numbers, key=self._namespace_numbers.__getitem__)
            memory_ids, updated = list(self._memory_ids), list(self._updated)
        segment = _build(0, sources, len(words))
        slots = segment.slots.tolist()
        arrays = {
            "format": np.array([SNAPSHOT_FORMAT], np.int64),
            "position": np.array([position], np.int64),
            "words": _joined(words),
            "keys": np.frombuffer(json.dumps(keys).encode(), np.uint8),
            "memory_ids": _joined(memory_ids[slot] or "" for slot in slots),
            "updated": _joined(updated[slot] for slot in slots),
            **{name: getattr(segment, name) for name in (
                "namespaces", "starts", "lengths", "types", "terms", "offsets", "docs", "tfs")},
        }
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes, k1: float = K1, b: float = B) -> SearchIndex:
        data = np.load(io.BytesIO(blob), allow_pickle=False)
        if "format" not in data.files or int(data["format"][0]) != SNAPSHOT_FORMAT:
            raise SnapshotFormatError("search snapshot from another index version")
        index = cls(k1, b)
        index.position = int(data["position"][0])
        index._vocabulary = {word: term_id for term_id, word in enumerate(_split(data["words"]))}
        for key in json.loads(data["keys"].tobytes().decode()):
            index._namespace_number((key[0], key[1]))
        segment = _Segment(next(index._numbers))
        for name in ("namespaces", "starts", "lengths", "types", "terms", "offsets", "docs", "tfs"):
            setattr(segment, name, data[name].copy())
        documents = len(segment.lengths)
        segment.slots = np.arange(documents, dtype=np.int32)
        segment.alive = np.ones(documents, bool)
        index._memory_ids = list(_split(data["memory_ids"]))
        index._updated = _split(data["updated"])
        index._slot_of = {memory_id: slot for slot, memory_id in enumerate(index._memory_ids) if memory_id is not None}
        index._grow(documents + 1)
        namespaces = np.repeat(segment.namespaces, np.diff(segment.starts))
        index._length[:documents], index._type[:documents] = segment.lengths, segment.types
        index._namespace[:documents], index._alive[:documents] = namespaces, True
        index._part_of[:documents], index._document_of[:documents] = segment.number, segment.slots
        spaces, by_type = len(index._documents), [segment.types == code for code in range(ALL_TYPES)] + [slice(None)]
        index._documents = np.stack([np.bincount(namespaces[chosen], minlength=spaces)
                                     for chosen in by_type], axis=1).tolist()
        index._lengths = np.stack([np.bincount(namespaces[chosen], segment.lengths[chosen], spaces).astype(np.int64)
                                   for chosen in by_type], axis=1).tolist()
        if documents:
            index._parts.append(segment)
            index._segments[segment.number] = segment
        return index

    # -- queries ---------------------------------------------------------------

    def search(self, where: MemoryFilter, query: str, limit: int) -> list[Hit]:
        """The ``limit`` best memories ``where`` admits: score, then newest, then id."""
        words = Counter(tokenize(query))
        if where.type and where.type not in TYPE_CODES:
            return []  # a type no memory can have (admins filter on any string)
        with self._lock:
            visible = self._visible(where)
            type_code = TYPE_CODES[where.type] if where.type else None
            column = ALL_TYPES if type_code is None else type_code
            counted = range(len(self._documents)) if visible is None else visible.tolist()
            documents = sum(self._documents[number][column] for number in counted)
            known = [(self._vocabulary[word], times) for word, times in words.items() if word in self._vocabulary]
            if not documents or not known or limit <= 0:
                return []
            average_length = sum(self._lengths[number][column] for number in counted) / documents
            term_ids = np.array([term_id for term_id, _ in known], np.int32)  # the segments' dtype: no casts
            gathered = [self._gather(part, term_ids, visible, type_code) for part in self._parts]
            frequencies = [sum(len(where) - (len(zero) if zero is not None else 0)
                               for where, _, _, zero in (part.postings[term] for part in gathered))
                           for term in range(len(known))]
            weights = [times * idf(documents, df) * (self.k1 + 1) if df else 0.0
                       for (_, times), df in zip(known, frequencies)]
            slots, scores = self._score(gathered, weights, average_length, limit)
            return self._top(slots, scores, limit)

    def _visible(self, where: MemoryFilter) -> np.ndarray | None:
        """The namespace numbers ``where`` may see, ascending; None for all of them."""
        if where.scopes is None:
            return None
        numbers: set[int] = set()
        for pattern in where.scopes:
            if pattern.scope_id is None:
                numbers.update(self._by_scope.get(pattern.scope, ()))
            elif (number := self._namespace_numbers.get((pattern.scope, pattern.scope_id))) is not None:
                numbers.add(number)
        if len(numbers) == len(self._namespace_numbers):
            return None
        return np.array(sorted(numbers), np.int32)

    def _gather(self, part: _Delta | _Segment, term_ids: np.ndarray, visible: np.ndarray | None,
                type_code: int | None) -> _Gathered:
        if isinstance(part, _Delta):
            return self._gather_delta(part, term_ids, visible, type_code)
        runs = part.runs(visible) if visible is not None else None
        if runs is not None and not len(runs[0]):
            return _Gathered([_EMPTY] * len(term_ids), _NOTHING, 0, lambda positions: positions)
        filtered = type_code is not None  # else tombstones, if any, score zero (or are filtered when many)
        removed = part.removed_documents() if part.dead and not filtered else None
        if runs is not None:
            firsts, lasts = runs
            run_offsets = np.cumsum(lasts - firsts) - (lasts - firsts)  # where each run starts among the visible
            shifts = firsts - run_offsets
            bounds, single = np.concatenate((firsts, lasts)), len(firsts) == 1
            if single and removed is not None:  # only the tombstones in the visible range matter
                begin, finish = removed.searchsorted(bounds).tolist()
                removed = removed[begin:finish] if finish > begin else None
        postings: list[Postings] = []
        for start, end in part.slices(term_ids):
            if start == end:
                postings.append(_EMPTY)
                continue
            docs, tfs = part.docs[start:end], part.tfs[start:end]
            positions = docs
            if runs is not None:
                found = docs.searchsorted(bounds)
                if single:  # one namespace (or adjacent ones): plain slices, no gathers
                    begin, finish = found.tolist()
                    docs, tfs = docs[begin:finish], tfs[begin:finish]
                    positions = docs - firsts[0]
                else:
                    begins, ends = found[:len(firsts)], found[len(firsts):]
                    chosen = _ranges(begins, ends)
                    docs, tfs = docs[chosen], tfs[chosen]
                    positions = docs - np.repeat(shifts, ends - begins)
            zero = None
            if removed is not None and len(removed) * 16 <= len(docs):  # few tombstones: find them
                found = docs.searchsorted(removed)
                inside = found < len(docs)
                found = found[inside]
                zero = found[docs[found] == removed[inside]]
            elif (filtered or removed is not None) and len(docs):
                keep = part.alive[docs]
                if type_code is not None:
                    keep &= part.types[docs] == type_code
                docs, tfs = docs[keep], tfs[keep]
                positions = docs if runs is None else positions[keep]
            postings.append(Postings(positions, docs, tfs, zero))
        if runs is None:
            return _Gathered(postings, part.lengths, part.documents, lambda positions: part.slots[positions])

        def slots_of(positions: np.ndarray) -> np.ndarray:
            run = np.searchsorted(run_offsets, positions, side="right") - 1
            return cast(np.ndarray, part.slots[positions + shifts[run]])

        return _Gathered(postings, part.lengths, int((lasts - firsts).sum()), slots_of)

    def _gather_delta(self, delta: _Delta, term_ids: np.ndarray, visible: np.ndarray | None,
                      type_code: int | None) -> _Gathered:
        slots = np.array(delta.slots, np.int64)
        admitted = self._alive[slots]  # which of the delta's documents this query may see, decided once
        if visible is not None:
            seen = np.zeros(len(self._namespace_numbers), bool)
            seen[visible] = True
            admitted &= seen[self._namespace[slots]]
        if type_code is not None:
            admitted &= self._type[slots] == type_code
        lengths, everything = self._length[slots], bool(admitted.all())
        postings: list[Postings] = []
        for term_id in term_ids.tolist():
            pending = delta.postings.get(term_id)
            if pending is None:
                postings.append(_EMPTY)
                continue
            pairs = np.array(pending).reshape(-1, 2)  # a copy: the array may grow after this query
            documents, tfs = pairs[:, 0], pairs[:, 1]
            if not everything:
                keep = admitted[documents]
                documents, tfs = documents[keep], tfs[keep]
            postings.append(Postings(documents, documents, tfs, None))
        return _Gathered(postings, lengths, len(slots), lambda positions: slots[positions])

    def _score(self, parts: list[_Gathered], weights: list[float], average_length: float,
               limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The best slots and their scores (ties at the cut kept), each term scored once across parts.

        Each part's positions are shifted into one space for the query (part after part), so a
        term's postings from every part are scored together: the numpy calls grow with the
        query's terms, not with terms times parts.

        Terms are scored heaviest (rarest) first. No term adds as much as its weight to a score,
        so once the weights still to come sum below the ``limit``-th best score so far, only the
        documents within that sum of it can still make the top: the remaining terms, the common
        ones with the longest postings, are looked up for those documents alone (MaxScore). The
        result is exact, ties included.
        """
        bases = np.cumsum([0] + [part.space for part in parts]).tolist()
        postings = [sum(len(part.postings[term][0]) for part in parts) for term in range(len(weights))]
        touched = sum(postings)
        if touched * 8 <= bases[-1]:  # few postings for the space: accumulate sparsely
            return self._score_sparse(parts, bases, weights, average_length, limit)
        totals = np.zeros(bases[-1])
        order = sorted((term for term, weight in enumerate(weights) if weight), key=weights.__getitem__, reverse=True)
        if touched < PRUNE_FROM:  # too little to save for the bookkeeping to pay
            for term in order:
                np.add.at(totals, *self._term_scores(parts, bases, term, weights[term], average_length))
            best = np.flatnonzero(_best(totals, limit))
            return self._slots_of(parts, bases, best), totals[best]
        threshold = 0.0  # at or below the limit-th best final score
        candidates = None  # once known: the only documents that can still make the top, ascending
        to_come = [postings[term] for term in order]
        for done, term in enumerate(order):
            remaining = math.fsum(weights[later] for later in order[done:]) * _BOUND_SLACK
            if candidates is not None:
                candidates = candidates[totals[candidates] >= threshold - remaining]
            elif remaining < threshold and len(totals) * SCAN_COST < sum(to_come[done:]):  # the pass can pay
                candidates = np.flatnonzero(totals >= threshold - remaining)
            if candidates is not None and len(candidates) * LOOKUP_COST < to_come[done]:
                where, contributions = self._look_up(parts, bases, term, candidates, weights[term], average_length)
                totals[where] += contributions  # each candidate at most once per term
                where = candidates
            else:
                where, contributions = self._term_scores(parts, bases, term, weights[term], average_length)
                np.add.at(totals, where, contributions)  # numpy 2's fast path: quicker than a bincount
                where = where if candidates is None else candidates
            later = remaining - weights[term] * _BOUND_SLACK
            if len(where) > limit and 0 < later < math.fsum(weights[earlier] for earlier in order[:done + 1]):
                reached = totals[where]  # distinct documents: their limit-th best bounds the final one's
                if reached.max() > later:  # else no threshold could prune the rest
                    threshold = max(threshold, _cut(reached, limit, block=max(len(reached) // (8 * limit), 1)))
        best = np.flatnonzero(_best(totals, limit)) if candidates is None else \
            candidates[_best(totals[candidates], limit)]
        return self._slots_of(parts, bases, best), totals[best]

    def _score_sparse(self, parts: list[_Gathered], bases: list[int], weights: list[float],
                      average_length: float, limit: int) -> tuple[np.ndarray, np.ndarray]:
        scored = [self._term_scores(parts, bases, term, weight, average_length)
                  for term, weight in enumerate(weights) if weight]
        scored = [(where, contributions) for where, contributions in scored if len(where)]
        if not scored:
            return np.empty(0, np.int64), np.empty(0)
        unique, inverse = np.unique(np.concatenate([where for where, _ in scored]), return_inverse=True)
        sums = np.bincount(inverse, weights=np.concatenate([contributions for _, contributions in scored]))
        keep = _best(sums, limit)
        return self._slots_of(parts, bases, unique[keep]), sums[keep]

    def _term_scores(self, parts: list[_Gathered], bases: list[int], term: int, weight: float,
                     average_length: float) -> tuple[np.ndarray, np.ndarray]:
        """Every visible posting of ``term``: positions in the query's space and what each adds."""
        pieces = [(part, base) for part, base in zip(parts, bases) if len(part.postings[term][0])]
        if not pieces:
            return _NOTHING, np.empty(0)
        if len(pieces) == 1:  # one part (an admin over one segment): no copies
            part, base = pieces[0]
            where, docs, tfs, _ = part.postings[term]
            where, lengths = (where + base if base else where), part.lengths[docs]
        else:
            where = np.concatenate([part.postings[term][0] + base for part, base in pieces])
            lengths = np.concatenate([part.lengths[part.postings[term][1]] for part, _ in pieces])
            tfs = np.concatenate([part.postings[term][2] for part, _ in pieces])
        contributions = self._bm25(tfs, lengths, weight, average_length)
        skipped = 0
        for part, _ in pieces:
            found, _, _, zero = part.postings[term]
            if zero is not None:
                contributions[zero + skipped] = 0.0  # tombstones: no score (and not counted in df)
            skipped += len(found)
        return where, contributions

    def _look_up(self, parts: list[_Gathered], bases: list[int], term: int, candidates: np.ndarray,
                 weight: float, average_length: float) -> tuple[np.ndarray, np.ndarray]:
        """What ``term`` adds to each of ``candidates`` (ascending, live) that it occurs in."""
        cuts = np.searchsorted(candidates, bases).tolist()
        found, tfs, lengths = [], [], []
        for number, part in enumerate(parts):
            positions, docs, frequencies, _ = part.postings[term]
            mine = candidates[cuts[number]:cuts[number + 1]]
            if not len(positions) or not len(mine):
                continue
            mine = (mine - bases[number]).astype(positions.dtype)  # searchsorted would cast the postings
            rows = np.minimum(positions.searchsorted(mine), len(positions) - 1)
            hit = positions[rows] == mine
            rows = rows[hit]
            found.append(mine[hit] + bases[number])
            tfs.append(frequencies[rows])
            lengths.append(part.lengths[docs[rows]])
        if not found:
            return _NOTHING, np.empty(0)
        return np.concatenate(found), self._bm25(np.concatenate(tfs), np.concatenate(lengths), weight, average_length)

    def _bm25(self, tfs: np.ndarray, lengths: np.ndarray, weight: float, average_length: float) -> np.ndarray:
        """``weight * tf / (tf + k1 * (1 - b + b * length / average))``, in place where it can."""
        tf = tfs.astype(np.float64)
        norm = lengths * (self.k1 * self.b / average_length)
        norm += self.k1 * (1 - self.b)
        norm += tf
        np.divide(tf, norm, out=norm)
        norm *= weight
        return norm

    @staticmethod
    def _slots_of(parts: list[_Gathered], bases: list[int], positions: np.ndarray) -> np.ndarray:
        owner = np.searchsorted(bases, positions, side="right") - 1
        slots = np.empty(len(positions), np.int64)
        for number in np.unique(owner).tolist():
            mine = owner == number
            slots[mine] = parts[number].slots_of(positions[mine] - bases[number])
        return slots

    def _top(self, slots: np.ndarray, scores: np.ndarray, limit: int) -> list[Hit]:
        if len(scores) > limit:
            keep = _best(scores, limit)  # ties at the cut stay in; the tie-break decides below
            slots, scores = slots[keep], scores[keep]
        ranked = [(float(score), int(slot)) for score, slot in zip(scores.tolist(), slots.tolist()) if score > 0]
        ranked.sort(key=lambda pair: self._memory_ids[pair[1]] or "")
        ranked.sort(key=lambda pair: self._updated[pair[1]], reverse=True)
        ranked.sort(key=lambda pair: pair[0], reverse=True)
        return [Hit(self._memory_ids[slot] or "", score) for score, slot in ranked[:limit]]
