"""The BM25 search index: an in-memory projection of the log, kept per process.

Layout: a log-structured set of parts, like Lucene's segments, laid out so that
a query's cost follows what the caller can see (``parts``). Every indexed
memory holds a *slot*: its length, type, namespace and liveness live in numpy
arrays indexed by slot. Removing a memory tombstones its slot; the slot is
reused once no part refers to it. Full deltas are frozen, and a background
thread merges parts as ``merging`` decides, building off the lock and swapping
in under it, with what was removed meanwhile tombstoned in the result. Queries
are evaluated by ``scoring``; snapshots are written and read by ``snapshot``.

The index keeps the log position it has applied; applying an event at or
below it does nothing, so redelivery is harmless.
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

import projections.search.snapshot as snapshot
from events.types import MEMORY_EVENTS, ErasedEvent, MemoriesErased, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.domain import Memory
from projections.filters import MemoryFilter
from projections.search.analysis import Analyzer
from projections.search.gathered import Flat, Gathered
from projections.search.labels import Labels, SlotsById
from projections.search.merging import Merges
from projections.search.parts import Delta, Segment, build
from projections.search.ranking import K1, B, idf
from projections.search.scoring import top_mask
from projections.search.state import ALL_TYPES, SETTLE_TIMES, TYPE_CODES
from projections.search.tuning import Tuning

ORDER_FROM = 4_096  # visible postings from which gathering heaviest first saves more than it costs (measured)


class Hit(NamedTuple):  # a tuple: twenty are made per search, at a third of a frozen dataclass's cost
    memory_id: str
    score: float


@dataclass(frozen=True)
class Candidate:
    memory_id: str
    score: float | None  # None: chosen by recency, with no words to rank by
    position: int  # the log position of the event this version of the memory was indexed from


@dataclass(frozen=True)
class Statistics:
    """What BM25 counts over a caller's visible memories. Split by namespace over several indexes (shards),
    their statistics add up to the whole's, so each shard scores exactly as one index would, provided every
    shard answers both calls at the same log position."""

    documents: int
    length: int  # their length in tokens
    frequencies: dict[str, int]  # per query word: how many of them hold it

    def __add__(self, other: Statistics) -> Statistics:
        words = self.frequencies.keys() | other.frequencies.keys()
        return Statistics(self.documents + other.documents, self.length + other.length,
                          {word: self.frequencies.get(word, 0) + other.frequencies.get(word, 0) for word in words})


class _Gathering(NamedTuple):
    documents: int
    length: int
    words: list[str]  # the query's words the index knows, in the order gathered
    times: list[int]  # how often the query holds each
    frequencies: list[int]  # how many visible memories hold each
    places: list[int]  # each one's place in the query
    parts: list[Gathered]


@dataclass(frozen=True)
class Candidates:
    """One consistent read: the best (or newest) memories a filter admits, and how many it admits."""

    position: int  # the log position the index had applied
    in_scope: int  # live memories the filter admits
    ranked: list[Candidate]


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


class SearchIndex(Merges):
    """BM25 over memories, exact per caller; thread-safe (one lock, short holds)."""

    # -- maintenance -----------------------------------------------------------

    def apply(self, recorded: RecordedEvent) -> Memory | None:
        """Apply one event from the log, once: positions at or below ours are ignored. The memory it indexed,
        if it indexed one (its version is the event's position)."""
        with self._lock:
            if recorded.position <= self.position:
                return None
            event = recorded.to_domain() if recorded.event_type.startswith(MEMORY_EVENTS) else None
            indexed = None
            if isinstance(event, ErasedEvent):
                self._stubbed.add(recorded.position)
            if isinstance(event, MemoriesErased):  # gone; what they indexed lingers until a rebuild
                self.held_erased |= any(position <= self.position and position not in self._stubbed
                                        for position in event.positions)  # a deleted one's words too
                for memory_id in event.memory_ids:
                    self._remove(memory_id)
            if isinstance(event, MemoryEvent):
                self._remove(event.memory.memory_id)
                if not isinstance(event, MemoryDeleted):
                    self._add(event.memory, recorded.position)
                    indexed = event.memory
            self.position = recorded.position
            self._maintain()
            return indexed

    def apply_all(self, recorded: Iterable[RecordedEvent]) -> None:
        for event in recorded:
            self.apply(event)

    def __len__(self) -> int:
        return len(self._slot_of)

    def holding(self, memory_ids: Iterable[str]) -> list[str]:
        """Those of ``memory_ids`` the index holds."""
        with self._lock:
            return [memory_id for memory_id in memory_ids if memory_id in self._slot_of]

    @property
    def tuning(self) -> Tuning:
        return self._tuning

    @tuning.setter
    def tuning(self, tuning: Tuning) -> None:
        """Change the tuning of a live index (benchmarks compare two on one index)."""
        with self._lock:
            self._tuning = self._scorer.tuning = tuning

    def shape(self) -> IndexShape:
        with self._lock:
            segments = list(self._segments.values())
            return IndexShape(len(self._slot_of), len(self._memory_ids), len(self._parts),
                              len(segments), sum(part.size for part in self._parts if isinstance(part, Delta)),
                              sum(segment.dead for segment in segments), self._merger is not None,
                              self._freezes, self._scorer.lookups)

    def memory_report(self) -> dict[str, int]:
        """Bytes the index holds, by component: numpy arrays (capacity included) and Python objects."""
        seen: set[int] = set()

        def size(obj: object) -> int:
            if id(obj) in seen:
                return 0
            seen.add(id(obj))
            return sys.getsizeof(obj)

        def strings(container: object, items: Iterable[object]) -> int:
            return size(container) + sum(size(item) for item in items if item is not None)

        with self._lock:
            self._settle_times()
            segments = [part for part in self._parts if isinstance(part, Segment)]
            deltas = [part for part in self._parts if isinstance(part, Delta)]
            delta = size(self._free)
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
                    array.nbytes for array in (self._length, self._type, self._namespace, self._alive, self._part_of,
                                               self._document_of, self._version, self._recency)),
                "numpy: a snapshot's memory ids (by slot, and sorted)": sum(
                    labels.shared_bytes() for labels in (self._memory_ids, self._slot_of)),
                "python: memory ids and id -> slot since the snapshot (or all, without one)":  # one string each
                    self._memory_ids.private_bytes(size) + self._slot_of.private_bytes(size),
                "python: updated times not in the spec's format, and those not settled yet": strings(
                    self._odd_times, self._odd_times.values()) + strings(self._unsettled, self._unsettled.values()),
                "python: vocabulary dict (+ words)": strings(self._vocabulary, self._vocabulary),
                "python: deltas (dict of lists of ints), free slots": delta,
                "python: namespace numbers, keys and counters": size(self._namespace_numbers) + size(self._by_scope)
                + sum(size(v) for v in self._by_scope.values())
                + sum(size(k) + size(k[0]) + size(k[1]) for k in self._namespace_numbers)
                + sum(strings(row, row) for row in (*self._documents, *self._lengths)),
            }

    def _add(self, memory: Memory, position: int) -> None:
        frequencies = self.analyzer.document(memory.name, memory.description, memory.content)
        length = sum(frequencies.values())
        namespace = self._namespace_number((memory.scope, memory.scope_id))
        type_code = TYPE_CODES.get(memory.type, TYPE_CODES["general"])
        if self._free:
            slot = self._free.pop()
            self._memory_ids[slot] = memory.memory_id
        else:
            slot = len(self._memory_ids)
            self._grow(slot + 1)
            self._memory_ids.append(memory.memory_id)
        self._slot_of[memory.memory_id] = slot
        self._length[slot], self._type[slot], self._namespace[slot] = length, type_code, namespace
        self._alive[slot], self._part_of[slot] = True, self._delta.number
        self._version[slot] = position
        self._unsettled[slot] = memory.updated  # its recency key is computed in numpy with others' (settling)
        if len(self._unsettled) >= SETTLE_TIMES:
            self._settle_times()
        vocabulary, delta, document = self._vocabulary, self._delta, self._delta.documents
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
        lengths[type_code] += length
        lengths[ALL_TYPES] += length

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
        self._memory_ids[slot] = None
        segment = self._segments.get(int(self._part_of[slot]))
        if segment is not None:
            segment.alive[self._document_of[slot]] = False
            segment.removed.append(int(self._document_of[slot]))
            self._merge_wanted |= segment.dead * 2 > segment.documents

    # -- snapshots -------------------------------------------------------------

    def to_bytes(self, log_hash: str = "") -> bytes:
        """The whole index as one snapshot (one segment), to start other processes fast; ``log_hash`` is the
        hash of the log's event at the index's position (which log the snapshot belongs to)."""
        with self._lock:
            self._freeze_if_filled()
            self._settle_times()
            parts = [part for part in self._parts if part is not self._delta]
            sources = self._capture(parts)
            position, words = self.position, list(self._vocabulary)
            keys = sorted(self._namespace_numbers, key=self._namespace_numbers.__getitem__)
            memory_ids, odd_times = self._memory_ids.copy(), dict(self._odd_times)  # what changes, not every slot
            versions, recency = self._version.copy(), self._recency.copy()
        segment = build(0, sources, len(words), self._tuning.pack_limit)
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
        return snapshot.dump(snapshot.Snapshot(position, log_hash, self.analyzer.identity, words, keys, segment, slot,
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
        if loaded.analyzer != index.analyzer.identity:
            raise snapshot.SnapshotFormatError(f"it was built with the analyzer {loaded.analyzer}; this index "
                                               f"analyzes with {index.analyzer.identity}")
        index.position = loaded.position
        index._vocabulary = {word: term_id for term_id, word in enumerate(loaded.words)}
        for key in loaded.keys:
            index._namespace_number(key)
        segment, documents = loaded.segment, loaded.documents
        index._memory_ids, index._odd_times = Labels(loaded.memory_ids), dict(loaded.odd_times)
        index._slot_of = SlotsById(loaded.sorted_ids, loaded.sorted_slots)
        for name, values in loaded.slot.items():
            setattr(index, f"_{name}" if name not in ("part", "document") else f"_{name}_of", values)
        namespaces = loaded.slot["namespace"][:documents]
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
        with self._lock:
            return self._search(where, Counter(self.analyzer.terms(query)), limit)

    def candidates(self, where: MemoryFilter, query: str, limit: int) -> Candidates:
        """The ``limit`` best matches of ``query``, all at one position: none if no word of it is a term
        (stopwords alone match nothing); for a blank query (no context) the newest."""
        words = Counter(self.analyzer.terms(query))
        with self._lock:
            if query.strip():
                ranked = [Candidate(hit.memory_id, hit.score, int(self._version[self._slot_of[hit.memory_id]]))
                          for hit in self._search(where, words, limit)]
            else:
                ranked = [Candidate(self._memory_ids[slot] or "", None, int(self._version[slot]))
                          for slot in self._newest(where, limit)]
            return Candidates(self.position, self._count(where), ranked)

    def statistics(self, where: MemoryFilter, query: str) -> Statistics:
        """What BM25 counts over the memories ``where`` admits here: one shard's share of a fan-out's."""
        with self._lock:
            words = Counter(self.analyzer.terms(query))
            if (gathering := self._gathering(where, words)) is None:
                documents, length = self._sizes(where)
                return Statistics(documents, length, dict.fromkeys(words, 0))
            found = dict.fromkeys(words, 0) | dict(zip(gathering.words, gathering.frequencies))
            return Statistics(gathering.documents, gathering.length, found)

    def search_with(self, where: MemoryFilter, query: str, limit: int, statistics: Statistics) -> list[Hit]:
        """``search``, scored with ``statistics`` (every shard's, added up) in place of this index's own."""
        with self._lock:
            return self._search(where, Counter(self.analyzer.terms(query)), limit, statistics)

    def _search(self, where: MemoryFilter, words: Counter[str], limit: int,
                given: Statistics | None = None) -> list[Hit]:
        """(Lock held) ``search``; with ``given``, scored with those statistics."""
        if limit <= 0 or (gathering := self._gathering(where, words)) is None:
            return []
        documents, length = (given.documents, given.length) if given else (gathering.documents, gathering.length)
        if not documents:  # statistics of another moment than this index's: nothing to score against
            return []
        frequencies = [given.frequencies.get(word, 0) for word in gathering.words] if given else gathering.frequencies
        weights = [times * idf(documents, df) * (self.k1 + 1) if df else 0.0
                   for times, df in zip(gathering.times, frequencies)]
        slots, scores = self._scorer.score(gathering.parts, weights, gathering.places, length / documents, limit)
        return self._top(slots, scores, limit)

    def _gathering(self, where: MemoryFilter, words: Counter[str]) -> _Gathering | None:
        """(Lock held) The visible postings of ``words`` and what BM25 counts of them; None if none can score."""
        if (admitted := self._admitted(where)) is None:
            return None
        visible, column, counted = admitted
        type_code = TYPE_CODES[where.type] if where.type else None
        documents = sum(self._documents[number][column] for number in counted)
        known = [(word, self._vocabulary[word], times) for word, times in words.items() if word in self._vocabulary]
        if not documents or not known:
            return None
        length = sum(self._lengths[number][column] for number in counted)
        term_ids = np.array([term_id for _, term_id, _ in known], np.int32)  # the segments' dtype: no casts
        parts = [part for part in self._parts if part.documents]  # not the live delta when just frozen
        slices = [part.slices(term_ids) if isinstance(part, Segment) else None for part in parts]
        places = list(range(len(known)))
        if self._scorer.part_by_part(len(known), len(parts)) and \
                (heaviest := self._heaviest_first(parts, known, documents, slices)) is not None:  # part by part
            places = heaviest
            known, term_ids = [known[term] for term in places], term_ids[places]
            slices = [None if cut is None else (cut[0][places], cut[1][places]) for cut in slices]
        gathered = [self._scorer.gather(part, cut, visible, type_code) if isinstance(part, Segment) and cut is not None
                    else self._gather_delta(cast(Delta, part), term_ids, visible, type_code)
                    for part, cut in zip(parts, slices)]
        frequencies = [sum(found) for found in zip(*(part.frequencies() for part in gathered))]
        return _Gathering(documents, length, [word for word, _, _ in known], [times for _, _, times in known],
                          frequencies, places, gathered)

    def _count(self, where: MemoryFilter) -> int:
        """(Lock held) How many live memories ``where`` admits."""
        return self._sizes(where)[0]

    def _sizes(self, where: MemoryFilter) -> tuple[int, int]:
        """(Lock held) How many live memories ``where`` admits, and their length in tokens."""
        if (admitted := self._admitted(where)) is None:
            return 0, 0
        _, column, counted = admitted
        return (sum(self._documents[number][column] for number in counted),
                sum(self._lengths[number][column] for number in counted))

    def _admitted(self, where: MemoryFilter) -> tuple[np.ndarray | None, int, Sequence[int]] | None:
        """(Lock held) ``where``'s visible namespaces (None: all), the counters' column and the namespace numbers
        to add up; None for a type no memory can have (admins filter on any string)."""
        if where.type and where.type not in TYPE_CODES:
            return None
        visible = self._visible(where)
        column = TYPE_CODES[where.type] if where.type else ALL_TYPES
        return visible, column, range(len(self._documents)) if visible is None else visible.tolist()

    def _newest(self, where: MemoryFilter, limit: int) -> list[int]:
        """(Lock held) The slots of the ``limit`` newest memories ``where`` admits: updated, then the later event."""
        if limit <= 0 or (where.type and where.type not in TYPE_CODES):
            return []
        self._settle_times()
        used = len(self._memory_ids)
        admitted = self._alive[:used].copy()
        visible = self._visible(where)
        if visible is not None:
            seen = np.zeros(len(self._namespace_numbers), bool)
            seen[visible] = True
            admitted &= seen[self._namespace[:used]]
        if where.type:
            admitted &= self._type[:used] == TYPE_CODES[where.type]
        slots = np.flatnonzero(admitted)
        if len(slots) > limit:  # keep the newest, with every tie at the cut (the log decides below)
            times = self._recency[slots]
            slots = slots[times >= np.partition(times, len(times) - limit)[len(times) - limit]]
        ordered = sorted(slots.tolist(), key=lambda slot: (int(self._recency[slot]), int(self._version[slot])),
                         reverse=True)
        return ordered[:limit]

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

    def _heaviest_first(self, parts: list[Delta | Segment], known: list[tuple[str, int, int]], documents: int,
                        slices: list[tuple[np.ndarray, np.ndarray] | None]) -> list[int] | None:
        """(Lock held) The query's terms in the order of their weights over everything indexed; None when the
        caller is likely to see too few of their postings for the order to pay, or so many that it prunes.

        A caller's own weights count only what it sees, yet most often order the terms the
        same way; gathered in that order, a scorer going part by part seldom has to reorder
        postings to add each document's terms heaviest first.
        """
        held = np.zeros(len(known), np.int64)  # postings, tombstones included
        for part, cut in zip(parts, slices):
            if cut is not None:
                held += cut[1] - cut[0]
            else:
                held += [len(cast(Delta, part).postings.get(term_id, ())) // 2 for _, term_id, _ in known]
        likely = int(held.sum()) * documents // max(len(self), 1)  # the postings the caller is likely to see
        if not ORDER_FROM <= likely or not self._scorer.scores_all(likely, len(known), len(parts)):
            return None  # few, or pruned: the order would not pay
        frequencies = held.tolist()
        return sorted(range(len(known)), key=lambda term: known[term][2] * idf(documents, frequencies[term]),
                      reverse=True)

    def _gather_delta(self, delta: Delta, term_ids: np.ndarray, visible: np.ndarray | None,
                      type_code: int | None) -> Gathered:
        if not delta.slots:  # just frozen
            return Gathered.nothing(len(term_ids))
        slots = np.array(delta.slots, np.int64)
        admitted = self._alive[slots]  # which of the delta's documents this query may see, decided once
        if visible is not None:
            seen = np.zeros(len(self._namespace_numbers), bool)
            seen[visible] = True
            admitted &= seen[self._namespace[slots]]
        if type_code is not None:
            admitted &= self._type[slots] == type_code
        pending = [delta.postings.get(term_id) for term_id in term_ids.tolist()]
        joined = array("i")  # a copy: the delta's arrays may grow after this query
        for term_postings in pending:
            if term_postings is not None:
                joined.extend(term_postings)
        pairs = np.frombuffer(joined, np.int32).reshape(-1, 2)
        documents, tfs = pairs[:, 0], pairs[:, 1]
        found = np.array([len(term_postings) // 2 if term_postings is not None else 0 for term_postings in pending],
                         np.int64)
        if not admitted.all():
            keep = admitted[documents]
            documents, tfs = documents[keep], tfs[keep]
            found = np.bincount(np.repeat(np.arange(len(found)), found)[keep], minlength=len(found))
        bounds = np.concatenate(([0], np.cumsum(found))).astype(np.int64)
        return Gathered(self._length[slots], len(slots), lambda positions: slots[positions],
                        flat=Flat(documents, documents, tfs, bounds))

    def _top(self, slots: np.ndarray, scores: np.ndarray, limit: int) -> list[Hit]:
        """The ``limit`` best by score, then newest ``updated``, then memory id: the tie-break's keys are read only
        for equal scores within the top."""
        if len(scores) > limit:
            keep = top_mask(scores, limit)  # ties at the cut stay in; the tie-break decides below
            slots, scores = slots[keep], scores[keep]
        ranked = sorted(((score, slot) for score, slot in zip(scores.tolist(), slots.tolist()) if score > 0),
                        reverse=True)
        top: list[int] = []
        start = 0
        while start < len(ranked) and len(top) < limit:
            end = start + 1
            while end < len(ranked) and ranked[end][0] == ranked[start][0]:
                end += 1
            tied = [slot for _, slot in ranked[start:end]]
            if len(tied) > 1:
                self._settle_times()
                tied.sort(key=lambda slot: self._memory_ids[slot] or "")
                tied.sort(key=self._updated_of, reverse=True)
            top += tied
            start = end
        return [Hit(self._memory_ids[slot] or "", score) for slot, score in zip(top[:limit], (
            score for score, _ in ranked))]


def _fixed_width(strings: list[str]) -> np.ndarray:
    """Strings as one array of fixed-width bytes (numpy ``S``), which maps from a file and sorts by byte."""
    return np.array([string.encode() for string in strings], "S") if strings else np.empty(0, "S1")
