"""The parts an index is made of: the mutable delta, immutable segments, and building a segment.

* Every indexed memory holds a *slot*. New memories go to a small mutable
  *delta* (term id -> the delta's document numbers and term frequencies).
* A *segment* numbers its documents by (namespace, slot), so each namespace
  ``(scope, scope_id)`` is one contiguous range of document numbers, and keeps
  its postings term-major (CSR; document numbers ascend within a term).
* ``build`` turns captured parts (``Source``) into one segment holding their
  live documents: pure, so merges run it off the index's lock.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np


def joined(strings: Iterable[str]) -> np.ndarray:
    return np.frombuffer("\n".join(strings).encode(), np.uint8)


def split(array: np.ndarray) -> list[str]:
    text = array.tobytes().decode()
    return text.split("\n") if text else []


class Delta:
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


class Segment:
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

    def slices(self, term_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each term id, its postings' start and end (equal when absent)."""
        found = np.minimum(np.searchsorted(self.terms, term_ids), max(len(self.terms) - 1, 0))
        present = (self.terms[found] == term_ids) if len(self.terms) else np.zeros(len(term_ids), bool)
        starts = np.where(present, self.offsets[found], 0)
        ends = np.where(present, self.offsets[found + 1], 0)
        return starts, ends

    def runs(self, visible: np.ndarray, cached: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The visible namespaces' document ranges, adjacent ones joined; None when that is everything.

        The answers for up to ``cached`` visible sets are remembered (namespaces never change).
        """
        key = visible.tobytes()
        if key not in self._runs:
            if len(self._runs) >= cached:
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
class Source:
    """One part's documents and postings as a merge reads them; ``alive`` as of the capture."""

    slots: np.ndarray
    namespaces: np.ndarray  # per document
    lengths: np.ndarray
    types: np.ndarray
    alive: np.ndarray
    postings: int
    expand: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]  # postings: (term ids, documents, tfs)


def segment_source(segment: Segment) -> Source:
    def expand() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.repeat(segment.terms, np.diff(segment.offsets)), segment.docs, segment.tfs

    namespaces = np.repeat(segment.namespaces, np.diff(segment.starts))
    return Source(segment.slots, namespaces, segment.lengths, segment.types, segment.alive.copy(),
                   len(segment.docs), expand)


def build(number: int, sources: list[Source], vocabulary_size: int, pack_limit: int) -> Segment:
    """One segment holding the live documents of ``sources``: pure, so it runs off the lock.

    Each posting becomes one int64 key ``(term * documents + document) << 16 | tf``; sorting
    the keys orders the postings term-major. A segment's keys arrive sorted (its numbering
    and the merged one agree on (namespace, slot) order) and deltas are small, so the stable
    sort (timsort) mostly merges runs. Keys too large to pack fall back to an argsort.
    """
    segment = Segment(number)
    if not sources:  # an index that never held a memory
        return segment
    live = [np.flatnonzero(source.alive) for source in sources]

    def kept(name: str) -> np.ndarray:
        return np.concatenate([getattr(source, name)[chosen] for source, chosen in zip(sources, live)])

    slots, namespaces = kept("slots").astype(np.int32), kept("namespaces").astype(np.int32)
    order = np.lexsort((slots, namespaces))
    documents = len(order)
    rank = np.empty(documents, np.int32)
    rank[order] = np.arange(documents, dtype=np.int32)
    packed = vocabulary_size * max(documents, 1) < pack_limit
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
