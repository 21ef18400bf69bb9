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
from collections.abc import Callable, Iterator
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


class Merger:
    """Freezing full deltas, and merging parts in a background thread: built off the lock, swapped in under it."""

    def __init__(self, state: IndexState, built: Callable[[], None] | None = None) -> None:
        """``built`` is called between building a segment and swapping it in (tests time merges with it)."""
        self.state, self.built = state, built
        self.thread: threading.Thread | None = None
        self.merging: set[int] = set()  # the numbers of the parts being merged now
        self.wanted = False  # something changed that may make a merge due
        self.bulk_loading = False
        self.freezes = 0

    @contextmanager
    def bulk(self) -> Iterator[None]:
        """Fill without background merges, then merge everything into one segment (a rebuild)."""
        state = self.state
        self.bulk_loading = True
        try:
            yield
        finally:
            self.bulk_loading = False
            self.wait_for_merges()
            with state.lock:
                self.freeze_if_filled()
                parts = [part for part in state.parts if part is not state.delta]
                if len(parts) > 1 or any(isinstance(part, Delta) for part in parts):
                    self.swap(parts, self.merged(parts))

    def wait_for_merges(self) -> None:
        """Return once no background merge is running (tests, benchmarks, snapshots)."""
        while (merger := self.thread) is not None:
            merger.join()

    def maintain(self) -> None:
        """After an apply (lock held): freeze a full delta and see that merges get done."""
        state = self.state
        if self.bulk_loading:
            if state.delta.size >= state.tuning.bulk_freeze_postings:
                frozen = self.freeze()
                self.swap([frozen], self.merged([frozen]))
            return
        if state.delta.size >= state.tuning.freeze_postings:
            self.freeze()
        if self.wanted and self.thread is None:
            self.wanted = False
            if self.due_parts() is None:
                return
            self.thread = threading.Thread(target=self.merge_while_due, name="memoryd-search-merge", daemon=True)
            self.thread.start()

    def freeze(self) -> Delta:
        """Start a new delta; the old one stays searchable until a merge turns it into a segment."""
        state = self.state
        self.freezes += 1
        frozen, state.delta = state.delta, Delta(next(state.part_numbers))
        state.parts.append(state.delta)
        self.wanted = True
        return frozen

    def freeze_if_filled(self) -> None:
        """(Lock held) freeze the delta unless it is empty, so everything but an empty delta is immutable."""
        if self.state.delta.documents:
            self.freeze()

    def due_parts(self) -> list[Delta | Segment] | None:
        state = self.state
        idle = [part for part in state.parts if part is not state.delta and part.number not in self.merging]
        return due(idle, state.tuning)

    def merge_while_due(self) -> None:
        """The background merger: build each due merge off the lock, swap it in under it."""
        state = self.state
        try:
            while True:
                with state.lock:
                    parts = self.due_parts()
                    if parts is None:
                        self.thread = None
                        return
                    self.merging.update(part.number for part in parts)
                    sources, vocabulary_size = self.capture(parts), len(state.vocabulary)
                try:
                    merged = build(next(state.part_numbers), sources, vocabulary_size, state.tuning.pack_limit)
                    if self.built is not None:
                        self.built()
                    with state.lock:
                        self.swap(parts, merged)
                finally:
                    with state.lock:
                        self.merging.difference_update(part.number for part in parts)
        except Exception:  # the parts stay searchable as they are; the next apply tries again
            log.exception("search index merge failed")
            with state.lock:
                self.thread = None

    def merged(self, parts: list[Delta | Segment]) -> Segment:
        """(Lock held) ``parts`` built into one segment on the spot (bulk loads)."""
        state = self.state
        return build(next(state.part_numbers), self.capture(parts), len(state.vocabulary), state.tuning.pack_limit)

    def capture(self, parts: list[Delta | Segment]) -> list[Source]:
        """(Lock held) what a merge needs of ``parts``: immutable arrays and a copy of what changes."""
        return [segment_source(part) if isinstance(part, Segment) else self.delta_source(part) for part in parts]

    def delta_source(self, delta: Delta) -> Source:
        state = self.state
        slots = np.array(delta.slots, np.int64)

        def expand() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            items = list(delta.postings.items())
            terms = np.repeat(np.array([term for term, _ in items], np.int64), [len(pairs) // 2 for _, pairs in items])
            pairs = np.frombuffer(b"".join(pairs.tobytes() for _, pairs in items), np.int32).reshape(-1, 2)
            return terms, pairs[:, 0], np.minimum(pairs[:, 1], 65_535).astype(np.uint16)

        return Source(slots, state.slot_namespace[slots], state.slot_length[slots], state.slot_type[slots],
                      state.slot_alive[slots], delta.size, expand)

    def swap(self, parts: list[Delta | Segment], merged: Segment) -> None:
        """(Lock held) replace ``parts`` by ``merged``; tombstone what was removed since the capture."""
        state = self.state
        merged.alive = state.slot_alive[merged.slots]
        merged.removed = np.flatnonzero(~merged.alive).tolist()
        state.slot_part[merged.slots] = merged.number
        state.slot_document[merged.slots] = np.arange(merged.documents, dtype=np.int32)
        replaced = {part.number for part in parts}
        for part in parts:
            state.segments.pop(part.number, None)
            held = part.slots if isinstance(part, Segment) else np.array(part.slots, np.int64)
            state.free.extend(held[state.slot_part[held] == part.number].tolist())  # dropped, now free
        state.parts = [part for part in state.parts if part.number not in replaced]
        if merged.documents:
            state.parts.append(merged)
            state.segments[merged.number] = merged
