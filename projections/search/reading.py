"""Queries over the index's state: BM25 exact per caller, or the newest memories a filter admits.

The reader takes the state's lock for each query and reads one consistent moment: the parts, the
per-slot arrays and the namespace counters. Postings are gathered part by part (``parts``) and
scored by ``scoring``.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

from projections.filters import MemoryFilter, admitted_namespaces
from projections.search.gathered import Flat, Gathered
from projections.search.parts import Delta, Segment
from projections.search.ranking import idf
from projections.search.scoring import top_mask
from projections.search.state import ALL_TYPES, TYPE_CODES, IndexState

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


class Reader:
    """The queries of one index, over its state."""

    def __init__(self, state: IndexState) -> None:
        self.state = state

    def search(self, where: MemoryFilter, query: str, limit: int) -> list[Hit]:
        """The ``limit`` best memories ``where`` admits: score, then newest, then id."""
        with self.state.lock:
            return self._search(where, Counter(self.state.analyzer.terms(query)), limit)

    def candidates(self, where: MemoryFilter, query: str, limit: int) -> Candidates:
        """The ``limit`` best matches of ``query``, all at one position: none if no word of it is a term
        (stopwords alone match nothing); for a blank query (no context) the newest."""
        state = self.state
        words = Counter(state.analyzer.terms(query))
        with state.lock:
            if query.strip():
                ranked = [Candidate(hit.memory_id, hit.score, int(state.slot_version[state.slot_of[hit.memory_id]]))
                          for hit in self._search(where, words, limit)]
            else:
                ranked = [Candidate(state.memory_ids[slot] or "", None, int(state.slot_version[slot]))
                          for slot in self._newest(where, limit)]
            return Candidates(state.position, self._count(where), ranked)

    def statistics(self, where: MemoryFilter, query: str) -> Statistics:
        """What BM25 counts over the memories ``where`` admits here: one shard's share of a fan-out's."""
        with self.state.lock:
            words = Counter(self.state.analyzer.terms(query))
            if (gathering := self._gathering(where, words)) is None:
                documents, length = self._sizes(where)
                return Statistics(documents, length, dict.fromkeys(words, 0))
            found = dict.fromkeys(words, 0) | dict(zip(gathering.words, gathering.frequencies))
            return Statistics(gathering.documents, gathering.length, found)

    def search_with(self, where: MemoryFilter, query: str, limit: int, statistics: Statistics) -> list[Hit]:
        """``search``, scored with ``statistics`` (every shard's, added up) in place of this index's own."""
        with self.state.lock:
            return self._search(where, Counter(self.state.analyzer.terms(query)), limit, statistics)

    def _search(self, where: MemoryFilter, words: Counter[str], limit: int,
                given: Statistics | None = None) -> list[Hit]:
        """(Lock held) ``search``; with ``given``, scored with those statistics."""
        if limit <= 0 or (gathering := self._gathering(where, words)) is None:
            return []
        documents, length = (given.documents, given.length) if given else (gathering.documents, gathering.length)
        if not documents:  # statistics of another moment than this index's: nothing to score against
            return []
        frequencies = [given.frequencies.get(word, 0) for word in gathering.words] if given else gathering.frequencies
        weights = [times * idf(documents, df) * (self.state.k1 + 1) if df else 0.0
                   for times, df in zip(gathering.times, frequencies)]
        slots, scores = self.state.scorer.score(gathering.parts, weights, gathering.places, length / documents, limit)
        return self._top(slots, scores, limit)

    def _gathering(self, where: MemoryFilter, words: Counter[str]) -> _Gathering | None:
        """(Lock held) The visible postings of ``words`` and what BM25 counts of them; None if none can score."""
        state = self.state
        if (admitted := self._admitted(where)) is None:
            return None
        visible, column, counted = admitted
        type_code = TYPE_CODES[where.type] if where.type else None
        documents = sum(state.namespace_documents[number][column] for number in counted)
        known = [(word, state.vocabulary[word], times) for word, times in words.items() if word in state.vocabulary]
        if not documents or not known:
            return None
        length = sum(state.namespace_lengths[number][column] for number in counted)
        term_ids = np.array([term_id for _, term_id, _ in known], np.int32)  # the segments' dtype: no casts
        parts = [part for part in state.parts if part.documents]  # not the live delta when just frozen
        slices = [part.slices(term_ids) if isinstance(part, Segment) else None for part in parts]
        places = list(range(len(known)))
        if state.scorer.part_by_part(len(known), len(parts)) and \
                (heaviest := self._heaviest_first(parts, known, documents, slices)) is not None:  # part by part
            places = heaviest
            known, term_ids = [known[term] for term in places], term_ids[places]
            slices = [None if cut is None else (cut[0][places], cut[1][places]) for cut in slices]
        gathered = [state.scorer.gather(part, cut, visible, type_code) if isinstance(part, Segment) and cut is not None
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
        return (sum(self.state.namespace_documents[number][column] for number in counted),
                sum(self.state.namespace_lengths[number][column] for number in counted))

    def _admitted(self, where: MemoryFilter) -> tuple[np.ndarray | None, int, Sequence[int]] | None:
        """(Lock held) ``where``'s visible namespaces (None: all), the counters' column and the namespace numbers
        to add up; None for a type no memory can have (admins filter on any string)."""
        if where.type and where.type not in TYPE_CODES:
            return None
        visible = self._visible(where)
        column = TYPE_CODES[where.type] if where.type else ALL_TYPES
        return visible, column, range(len(self.state.namespace_documents)) if visible is None else visible.tolist()

    def _newest(self, where: MemoryFilter, limit: int) -> list[int]:
        """(Lock held) The slots of the ``limit`` newest memories ``where`` admits: updated, then the later event."""
        state = self.state
        if limit <= 0 or (where.type and where.type not in TYPE_CODES):
            return []
        state.settle_times()
        used = len(state.memory_ids)
        admitted = state.slot_alive[:used].copy()
        visible = self._visible(where)
        if visible is not None:
            seen = np.zeros(len(state.namespace_numbers), bool)
            seen[visible] = True
            admitted &= seen[state.slot_namespace[:used]]
        if where.type:
            admitted &= state.slot_type[:used] == TYPE_CODES[where.type]
        slots = np.flatnonzero(admitted)
        if len(slots) > limit:  # keep the newest, with every tie at the cut (the log decides below)
            times = state.slot_recency[slots]
            slots = slots[times >= np.partition(times, len(times) - limit)[len(times) - limit]]
        ordered = sorted(slots.tolist(), key=lambda slot: (int(state.slot_recency[slot]), int(state.slot_version[slot])),
                         reverse=True)
        return ordered[:limit]

    def _visible(self, where: MemoryFilter) -> np.ndarray | None:
        """The namespace numbers ``where`` may see, ascending; None for all of them."""
        state = self.state
        numbers = admitted_namespaces(where, state.namespace_numbers, state.by_scope)
        if numbers is None or len(numbers) == len(state.namespace_numbers):
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
        likely = int(held.sum()) * documents // max(len(self.state.slot_of), 1)  # the postings the caller is likely to see
        if not ORDER_FROM <= likely or not self.state.scorer.scores_all(likely, len(known), len(parts)):
            return None  # few, or pruned: the order would not pay
        frequencies = held.tolist()
        return sorted(range(len(known)), key=lambda term: known[term][2] * idf(documents, frequencies[term]),
                      reverse=True)

    def _gather_delta(self, delta: Delta, term_ids: np.ndarray, visible: np.ndarray | None,
                      type_code: int | None) -> Gathered:
        state = self.state
        if not delta.slots:  # just frozen
            return Gathered.nothing(len(term_ids))
        slots = np.array(delta.slots, np.int64)
        admitted = state.slot_alive[slots]  # which of the delta's documents this query may see, decided once
        if visible is not None:
            seen = np.zeros(len(state.namespace_numbers), bool)
            seen[visible] = True
            admitted &= seen[state.slot_namespace[slots]]
        if type_code is not None:
            admitted &= state.slot_type[slots] == type_code
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
        return Gathered(state.slot_length[slots], len(slots), lambda positions: slots[positions],
                        flat=Flat(documents, documents, tfs, bounds))

    def _top(self, slots: np.ndarray, scores: np.ndarray, limit: int) -> list[Hit]:
        """The ``limit`` best by score, then newest ``updated``, then memory id: the tie-break's keys are read only
        for equal scores within the top."""
        state = self.state
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
                state.settle_times()
                tied.sort(key=lambda slot: state.memory_ids[slot] or "")
                tied.sort(key=state.updated_of, reverse=True)
            top += tied
            start = end
        return [Hit(state.memory_ids[slot] or "", score) for slot, score in zip(top[:limit], (
            score for score, _ in ranked))]
