"""The BM25 search index: an in-memory projection of the log, kept per process.

Layout: a log-structured set of parts, like Lucene's segments, laid out so that
a query's cost follows what the caller can see (``parts``). Every indexed
memory holds a *slot*: its length, type, namespace and liveness live in numpy
arrays indexed by slot. Removing a memory tombstones its slot; the slot is
reused once no part refers to it. Full deltas are frozen, and a background
thread merges parts as ``merging`` decides, building off the lock and swapping
in under it, with what was removed meanwhile tombstoned in the result. The
``reader`` answers queries (``reading``, scored by ``scoring``); snapshots are written and read by ``snapshot``.

The index keeps the log position it has applied; applying an event at or
below it does nothing, so redelivery is harmless.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np

import projections.search.snapshot as snapshot
from events.types import MEMORY_EVENTS, ErasedEvent, MemoriesErased, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.kernel.domain import Memory
from projections.filters import MemoryFilter
from projections.search.analysis import Analyzer
from projections.search.labels import Labels, SlotsById
from projections.search.merging import Merger
from projections.search.parts import Delta, Segment, build
from projections.search.ranking import K1, B
from projections.search.reading import Candidates, Hit, Reader, Statistics
from projections.search.state import ALL_TYPES, SETTLE_TIMES, TYPE_CODES, IndexState
from projections.search.tuning import Tuning


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
    freezes: int  # deltas frozen since the start
    lookups: int  # query terms looked up for candidates only (MaxScore pruning), since the start


class SearchIndex:
    """BM25 over memories, exact per caller; thread-safe (one lock, short holds).

    It applies the log's events to its ``state``; ``merges`` freezes full deltas and merges parts in the
    background; ``reader`` answers queries.
    """

    def __init__(self, k1: float = K1, b: float = B, tuning: Tuning | None = None,
                 merge_built: Callable[[], None] | None = None, first_part: int = 0,
                 analyzer: Analyzer | None = None) -> None:
        """``merge_built`` is called by the merger between building a segment and swapping it in; parts are
        numbered from ``first_part`` (a snapshot's segment is part 0)."""
        self.state = IndexState(k1, b, tuning, first_part, analyzer)
        self.merges = Merger(self.state, merge_built)
        self.reader = Reader(self.state)

    @property
    def position(self) -> int:
        """The log position of the last event applied."""
        return self.state.position

    @property
    def analyzer(self) -> Analyzer:
        return self.state.analyzer

    @property
    def held_erased(self) -> bool:
        """An erasure took out what it had indexed, but the words linger in its parts and vocabulary."""
        return self.state.held_erased

    # -- queries (the reader's) ------------------------------------------------

    def search(self, where: MemoryFilter, query: str, limit: int) -> list[Hit]:
        return self.reader.search(where, query, limit)

    def candidates(self, where: MemoryFilter, query: str, limit: int) -> Candidates:
        return self.reader.candidates(where, query, limit)

    def statistics(self, where: MemoryFilter, query: str) -> Statistics:
        return self.reader.statistics(where, query)

    def search_with(self, where: MemoryFilter, query: str, limit: int, statistics: Statistics) -> list[Hit]:
        return self.reader.search_with(where, query, limit, statistics)

    # -- maintenance -----------------------------------------------------------

    def bulk(self) -> AbstractContextManager[None]:
        """Fill without background merges, then merge everything into one segment (a rebuild)."""
        return self.merges.bulk()

    def wait_for_merges(self) -> None:
        """Return once no background merge is running (tests, benchmarks, snapshots)."""
        self.merges.wait_for_merges()

    def apply(self, recorded: RecordedEvent) -> Memory | None:
        """Apply one event from the log, once: positions at or below ours are ignored. The memory it indexed,
        if it indexed one (its version is the event's position)."""
        state = self.state
        with state.lock:
            if recorded.position <= state.position:
                return None
            event = recorded.to_domain() if recorded.event_type.startswith(MEMORY_EVENTS) else None
            indexed = None
            if isinstance(event, ErasedEvent):
                state.stubbed.add(recorded.position)
            if isinstance(event, MemoriesErased):  # gone; what they indexed lingers until a rebuild
                state.held_erased |= any(position <= state.position and position not in state.stubbed
                                        for position in event.positions)  # a deleted one's words too
                for memory_id in event.memory_ids:
                    self._remove(memory_id)
            if isinstance(event, MemoryEvent):
                self._remove(event.memory.memory_id)
                if not isinstance(event, MemoryDeleted):
                    self._add(event.memory, recorded.position)
                    indexed = event.memory
            state.position = recorded.position
            self.merges.maintain()
            return indexed

    def apply_all(self, recorded: Iterable[RecordedEvent]) -> None:
        for event in recorded:
            self.apply(event)

    def __len__(self) -> int:
        return len(self.state.slot_of)

    def holding(self, memory_ids: Iterable[str]) -> list[str]:
        """Those of ``memory_ids`` the index holds."""
        with self.state.lock:
            return [memory_id for memory_id in memory_ids if memory_id in self.state.slot_of]

    def positions_of(self, memory_ids: Iterable[str]) -> dict[str, int]:
        """The log position each of ``memory_ids`` the index holds was indexed from (its version here)."""
        state = self.state
        with state.lock:
            return {memory_id: int(state.slot_version[slot]) for memory_id in memory_ids
                    if (slot := state.slot_of.get(memory_id)) is not None}

    @property
    def tuning(self) -> Tuning:
        return self.state.tuning

    @tuning.setter
    def tuning(self, tuning: Tuning) -> None:
        """Change the tuning of a live index (benchmarks compare two on one index)."""
        state = self.state
        with state.lock:
            state.tuning = state.scorer.tuning = tuning

    def shape(self) -> IndexShape:
        state = self.state
        with state.lock:
            segments = list(state.segments.values())
            return IndexShape(len(state.slot_of), len(state.memory_ids), len(state.parts),
                              len(segments), sum(part.size for part in state.parts if isinstance(part, Delta)),
                              sum(segment.dead for segment in segments), self.merges.thread is not None,
                              self.merges.freezes, state.scorer.lookups)

    def memory_report(self) -> dict[str, int]:
        """Bytes the index holds, by component: numpy arrays (capacity included) and Python objects."""
        state = self.state
        seen: set[int] = set()

        def size(obj: object) -> int:
            if id(obj) in seen:
                return 0
            seen.add(id(obj))
            return sys.getsizeof(obj)

        def strings(container: object, items: Iterable[object]) -> int:
            return size(container) + sum(size(item) for item in items if item is not None)

        with state.lock:
            state.settle_times()
            segments = [part for part in state.parts if isinstance(part, Segment)]
            deltas = [part for part in state.parts if isinstance(part, Delta)]
            delta = size(state.free)
            for part in deltas:
                delta += size(part.postings) + size(part.slots)
                delta += sum(size(pending) + sum(size(x) for x in pending if x > 256) for pending in part.postings.values())
            return {
                "numpy: postings (docs int32 + tfs uint16)": sum(seg.docs.nbytes + seg.tfs.nbytes for seg in segments),
                "numpy: per-segment terms int32 + offsets int64, namespace ranges": sum(
                    seg.terms.nbytes + seg.offsets.nbytes + seg.namespaces.nbytes + seg.starts.nbytes for seg in segments),
                "numpy: per-document slot, length, type, alive (in segments)": sum(
                    seg.slots.nbytes + seg.lengths.nbytes + seg.types.nbytes + seg.alive.nbytes for seg in segments),
                "numpy: per-slot length, type, namespace, alive, location, version, recency": sum(
                    array.nbytes for array in (state.slot_length, state.slot_type, state.slot_namespace, state.slot_alive,
                                               state.slot_part, state.slot_document, state.slot_version,
                                               state.slot_recency)),
                "numpy: a snapshot's memory ids (by slot, and sorted)": sum(
                    labels.shared_bytes() for labels in (state.memory_ids, state.slot_of)),
                "python: memory ids and id -> slot since the snapshot (or all, without one)":  # one string each
                    state.memory_ids.private_bytes(size) + state.slot_of.private_bytes(size),
                "python: updated times not in the spec's format, and those not settled yet": strings(
                    state.odd_times, state.odd_times.values()) + strings(state.unsettled, state.unsettled.values()),
                "python: vocabulary dict (+ words)": strings(state.vocabulary, state.vocabulary),
                "python: deltas (dict of lists of ints), free slots": delta,
                "python: namespace numbers, keys and counters": size(state.namespace_numbers) + size(state.by_scope)
                + sum(size(v) for v in state.by_scope.values())
                + sum(size(k) + size(k[0]) + size(k[1]) for k in state.namespace_numbers)
                + sum(strings(row, row) for row in (*state.namespace_documents, *state.namespace_lengths)),
            }

    def _add(self, memory: Memory, position: int) -> None:
        state = self.state
        frequencies = state.analyzer.document(memory.name, memory.description, memory.content)
        length = sum(frequencies.values())
        namespace = state.namespace_number((memory.scope, memory.scope_id))
        type_code = TYPE_CODES.get(memory.type, TYPE_CODES["general"])
        if state.free:
            slot = state.free.pop()
            state.memory_ids[slot] = memory.memory_id
        else:
            slot = len(state.memory_ids)
            state.grow(slot + 1)
            state.memory_ids.append(memory.memory_id)
        state.slot_of[memory.memory_id] = slot
        state.slot_length[slot], state.slot_type[slot], state.slot_namespace[slot] = length, type_code, namespace
        state.slot_alive[slot], state.slot_part[slot] = True, state.delta.number
        state.slot_version[slot] = position
        state.unsettled[slot] = memory.updated  # its recency key is computed in numpy with others' (settling)
        if len(state.unsettled) >= SETTLE_TIMES:
            state.settle_times()
        vocabulary, delta, document = state.vocabulary, state.delta, state.delta.documents
        for word, frequency in frequencies.items():
            term_id = vocabulary.setdefault(word, len(vocabulary))
            if (pending := delta.postings.get(term_id)) is None:
                pending = delta.postings[term_id] = array("i")
            pending.fromlist([document, frequency])
        delta.slots.append(slot)
        delta.size += len(frequencies)
        counts, lengths = state.namespace_documents[namespace], state.namespace_lengths[namespace]
        counts[type_code] += 1
        counts[ALL_TYPES] += 1
        lengths[type_code] += length
        lengths[ALL_TYPES] += length

    def _remove(self, memory_id: str) -> None:
        state = self.state
        slot = state.slot_of.pop(memory_id, None)
        if slot is None:
            return
        namespace, type_code, length = int(state.slot_namespace[slot]), int(state.slot_type[slot]), int(state.slot_length[slot])
        counts, lengths = state.namespace_documents[namespace], state.namespace_lengths[namespace]
        counts[type_code] -= 1
        counts[ALL_TYPES] -= 1
        lengths[type_code] -= length
        lengths[ALL_TYPES] -= length
        state.slot_alive[slot] = False
        state.memory_ids[slot] = None
        segment = state.segments.get(int(state.slot_part[slot]))
        if segment is not None:
            segment.alive[state.slot_document[slot]] = False
            segment.removed.append(int(state.slot_document[slot]))
            self.merges.wanted |= segment.dead * 2 > segment.documents

    # -- snapshots -------------------------------------------------------------

    def to_bytes(self, log_hash: str = "") -> bytes:
        """The whole index as one snapshot (one segment), to start other processes fast; ``log_hash`` is the
        hash of the log's event at the index's position (which log the snapshot belongs to)."""
        state = self.state
        with state.lock:
            self.merges.freeze_if_filled()
            state.settle_times()
            parts = [part for part in state.parts if part is not state.delta]
            sources = self.merges.capture(parts)
            position, words = state.position, list(state.vocabulary)
            keys = sorted(state.namespace_numbers, key=state.namespace_numbers.__getitem__)
            memory_ids, odd_times = state.memory_ids.copy(), dict(state.odd_times)  # what changes, not every slot
            versions, recency = state.slot_version.copy(), state.slot_recency.copy()
        segment = build(0, sources, len(words), state.tuning.pack_limit)
        documents, held = segment.documents, segment.slots.tolist()
        capacity = documents + max(1_024, documents // 4)  # room for new memories before the arrays are copied

        def by_slot(values: np.ndarray, dtype: type) -> np.ndarray:
            filled: np.ndarray = np.zeros(capacity, dtype)
            filled[:documents] = values
            return filled

        slot = {"length": by_slot(segment.lengths, np.int32), "type": by_slot(segment.types, np.uint8),
                "namespace": by_slot(np.repeat(segment.namespaces, np.diff(segment.starts)), np.int32),
                "alive": by_slot(np.ones(documents, bool), bool), "part": np.zeros(capacity, np.int32),
                "document": by_slot(np.arange(documents), np.int32), "version": by_slot(versions[segment.slots], np.int64),
                "recency": by_slot(recency[segment.slots], np.int64)}
        ids = _fixed_width([memory_ids[slot] or "" for slot in held])
        order = np.argsort(ids, kind="stable").astype(np.int32)
        if odd_times:  # by the snapshot's slots
            document_of = dict(zip(held, range(documents)))
            odd_times = {document_of[slot]: time for slot, time in odd_times.items() if slot in document_of}
        segment.slots = np.arange(documents, dtype=np.int32)  # a snapshot's document d is its slot d
        return snapshot.dump(snapshot.Snapshot(position, log_hash, state.analyzer.identity, words, keys, segment, slot,
                                               ids, odd_times, ids[order], order))

    @classmethod
    def from_bytes(cls, blob: bytes, k1: float = K1, b: float = B, tuning: Tuning | None = None,
                   analyzer: Analyzer | None = None) -> SearchIndex:
        """An index restored from ``to_bytes``; ``SnapshotFormatError`` if another version wrote it."""
        return cls.from_snapshot(snapshot.load(blob), k1, b, tuning, analyzer)

    @classmethod
    def from_snapshot(cls, loaded: snapshot.Snapshot, k1: float = K1, b: float = B,
                      tuning: Tuning | None = None, analyzer: Analyzer | None = None) -> SearchIndex:
        """An index that starts from ``loaded``'s arrays as they are: nothing per memory is copied, so an index
        from a memory-mapped snapshot shares its pages with every other process mapping that file.
        ``SnapshotFormatError`` if another analyzer built it: its terms are not the ones queries look for."""
        index = cls(k1, b, tuning, first_part=1, analyzer=analyzer)
        state = index.state
        if loaded.analyzer != index.analyzer.identity:
            raise snapshot.SnapshotFormatError(f"it was built with the analyzer {loaded.analyzer}; this index "
                                               f"analyzes with {index.analyzer.identity}")
        state.position = loaded.position
        state.vocabulary = {word: term_id for term_id, word in enumerate(loaded.words)}
        for key in loaded.keys:
            state.namespace_number(key)
        segment, documents = loaded.segment, loaded.documents
        state.memory_ids, state.odd_times = Labels(loaded.memory_ids), dict(loaded.odd_times)
        state.slot_of = SlotsById(loaded.sorted_ids, loaded.sorted_slots)
        for name, values in loaded.slot.items():
            setattr(state, f"slot_{name}", values)
        namespaces = loaded.slot["namespace"][:documents]
        spaces, by_type = len(state.namespace_documents), [segment.types == code for code in range(ALL_TYPES)] + [slice(None)]
        state.namespace_documents = np.stack([np.bincount(namespaces[chosen], minlength=spaces)
                                     for chosen in by_type], axis=1).tolist()
        state.namespace_lengths = np.stack([np.bincount(namespaces[chosen], segment.lengths[chosen], spaces).astype(np.int64)
                                   for chosen in by_type], axis=1).tolist()
        if documents:
            state.parts.append(segment)
            state.segments[segment.number] = segment
        return index


def _fixed_width(strings: list[str]) -> np.ndarray:
    """Strings as one array of fixed-width bytes (numpy ``S``), which maps from a file and sorts by byte."""
    return np.array([string.encode() for string in strings], "S") if strings else np.empty(0, "S1")
