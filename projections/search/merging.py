"""The merge policy: which parts a background merge should turn into one segment next.

Frozen deltas first (they become segments), then a segment more than half
dead (merged on its own, dropping its tombstones), then ``fanout`` segments
of one size tier (about ``tier_base * fanout ** tier`` documents). The
merges themselves run off the index's lock (``SearchIndex``).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from projections.search.parts import Delta, Segment, Source, build, segment_source
from projections.search.state import IndexState
from projections.search.tuning import Tuning

log = logging.getLogger(__name__)


def due(idle: list[Delta | Segment], tuning: Tuning) -> list[Delta | Segment] | None:
    """The parts to merge next among the ``idle`` ones (not the live delta, not merging now); None if none."""
    frozen: list[Delta | Segment] = [part for part in idle if isinstance(part, Delta)]
    if frozen:
        return frozen
    segments = [part for part in idle if isinstance(part, Segment)]
    for segment in segments:
        if segment.dead * 2 > segment.documents:
            return [segment]
    tiers: dict[int, list[Delta | Segment]] = {}
    for segment in segments:
        tier = max(0, round(math.log(max(segment.documents, 1) / tuning.tier_base, tuning.fanout)))
        tiers.setdefault(tier, []).append(segment)
    full = [tier for tier, members in tiers.items() if len(members) >= tuning.fanout]
    return tiers[min(full)][:tuning.fanout] if full else None


class Merges(IndexState):
    """Freezing full deltas, and merging parts in a background thread: built off the lock, swapped in under it."""

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
                if len(parts) > 1 or any(isinstance(part, Delta) for part in parts):
                    self._swap(parts, self._merged(parts))

    def wait_for_merges(self) -> None:
        """Return once no background merge is running (tests, benchmarks, snapshots)."""
        while (merger := self._merger) is not None:
            merger.join()

    def _maintain(self) -> None:
        """After an apply (lock held): freeze a full delta and see that merges get done."""
        if self._bulk:
            if self._delta.size >= self._tuning.bulk_freeze_postings:
                frozen = self._freeze()
                self._swap([frozen], self._merged([frozen]))
            return
        if self._delta.size >= self._tuning.freeze_postings:
            self._freeze()
        if self._merge_wanted and self._merger is None:
            self._merge_wanted = False
            if self._due() is None:
                return
            self._merger = threading.Thread(target=self._merge_while_due, name="memoryd-search-merge", daemon=True)
            self._merger.start()

    def _freeze(self) -> Delta:
        """Start a new delta; the old one stays searchable until a merge turns it into a segment."""
        self._freezes += 1
        frozen, self._delta = self._delta, Delta(next(self._numbers))
        self._parts.append(self._delta)
        self._merge_wanted = True
        return frozen

    def _freeze_if_filled(self) -> None:
        """(Lock held) freeze the delta unless it is empty, so everything but an empty delta is immutable."""
        if self._delta.documents:
            self._freeze()

    def _due(self) -> list[Delta | Segment] | None:
        idle = [part for part in self._parts if part is not self._delta and part.number not in self._merging]
        return due(idle, self._tuning)

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
                    merged = build(next(self._numbers), sources, vocabulary_size, self._tuning.pack_limit)
                    if self._merge_built is not None:
                        self._merge_built()
                    with self._lock:
                        self._swap(parts, merged)
                finally:
                    with self._lock:
                        self._merging.difference_update(part.number for part in parts)
        except Exception:  # the parts stay searchable as they are; the next apply tries again
            log.exception("search index merge failed")
            with self._lock:
                self._merger = None

    def _merged(self, parts: list[Delta | Segment]) -> Segment:
        """(Lock held) ``parts`` built into one segment on the spot (bulk loads)."""
        return build(next(self._numbers), self._capture(parts), len(self._vocabulary), self._tuning.pack_limit)

    def _capture(self, parts: list[Delta | Segment]) -> list[Source]:
        """(Lock held) what a merge needs of ``parts``: immutable arrays and a copy of what changes."""
        return [segment_source(part) if isinstance(part, Segment) else self._delta_source(part) for part in parts]

    def _delta_source(self, delta: Delta) -> Source:
        slots = np.array(delta.slots, np.int64)

        def expand() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            items = list(delta.postings.items())
            terms = np.repeat(np.array([term for term, _ in items], np.int64), [len(pairs) // 2 for _, pairs in items])
            pairs = np.frombuffer(b"".join(pairs.tobytes() for _, pairs in items), np.int32).reshape(-1, 2)
            return terms, pairs[:, 0], np.minimum(pairs[:, 1], 65_535).astype(np.uint16)

        return Source(slots, self._namespace[slots], self._length[slots], self._type[slots], self._alive[slots],
                       delta.size, expand)

    def _swap(self, parts: list[Delta | Segment], merged: Segment) -> None:
        """(Lock held) replace ``parts`` by ``merged``; tombstone what was removed since the capture."""
        merged.alive = self._alive[merged.slots]
        merged.removed = np.flatnonzero(~merged.alive).tolist()
        self._part_of[merged.slots] = merged.number
        self._document_of[merged.slots] = np.arange(merged.documents, dtype=np.int32)
        replaced = {part.number for part in parts}
        for part in parts:
            self._segments.pop(part.number, None)
            held = part.slots if isinstance(part, Segment) else np.array(part.slots, np.int64)
            self._free.extend(held[self._part_of[held] == part.number].tolist())  # dropped, now free
        self._parts = [part for part in self._parts if part.number not in replaced]
        if merged.documents:
            self._parts.append(merged)
            self._segments[merged.number] = merged
