"""The index's state: per-slot arrays, the vocabulary, namespace counters, and its parts.

Every indexed memory holds a *slot*: its length, type, namespace and
liveness live in numpy arrays indexed by slot. Per namespace, live documents
and their summed lengths are counted by type and in all, so a query's
statistics cover exactly what the caller may see.
"""

from __future__ import annotations

import threading
from itertools import count

import numpy as np

from memoryd.kernel.domain import MEMORY_TYPES
from projections.search.analysis import Analyzer
from projections.search.labels import Labels, SlotsById
from projections.search.parts import Delta, Segment
from projections.search.ranking import K1, B
from projections.search.scoring import Scorer
from projections.search.tuning import Tuning

TYPE_CODES = {memory_type: code for code, memory_type in enumerate(MEMORY_TYPES)}
ALL_TYPES = len(MEMORY_TYPES)  # the counters' last column sums every type


SETTLE_TIMES = 4_096  # times applied since the last settling that are turned into recency keys at once
_DIGITS = np.array([0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18])  # where "YYYY-MM-DDTHH:MM:SS" has digits
_SEPARATORS = np.array([4, 7, 10, 13, 16])
_SEPARATOR_CODES = np.array([ord(character) for character in "--T::"], np.uint32)
_POWERS = 10 ** np.arange(13, -1, -1, dtype=np.int64)


def recency_key(updated: str) -> int:
    """``updated`` ("YYYY-MM-DDTHH:MM:SS") as one integer that orders as the timestamp does."""
    digits = "".join(character for character in updated if character.isascii() and character.isdigit())
    return int(digits[:14] or 0)


def timestamp(key: int) -> str:
    """The time in the spec's format ("YYYY-MM-DDTHH:MM:SS") whose recency key is ``key``."""
    digits = f"{key:014d}"
    return f"{digits[:4]}-{digits[4:6]}-{digits[6:8]}T{digits[8:10]}:{digits[10:12]}:{digits[12:]}"


def recency_keys(times: list[str]) -> tuple[np.ndarray, list[int]]:
    """``recency_key`` of each of ``times``, in numpy for those in the spec's format; and the positions of the
    others (their keys do not give them back through ``timestamp``, so they are kept as they are)."""
    keys = np.zeros(len(times), np.int64)
    if not times:
        return keys, []
    lengths = np.fromiter(map(len, times), np.int64, len(times))
    texts = np.array(times, str)
    width = texts.dtype.itemsize // 4
    if width < 19:
        canonical = np.zeros(len(times), bool)
    else:
        codes = texts.view(np.uint32).reshape(len(times), width)
        digits = codes[:, _DIGITS] - np.uint32(48)  # below "0" wraps around: not a digit
        canonical = (lengths == 19) & (digits <= 9).all(axis=1) & (codes[:, _SEPARATORS] == _SEPARATOR_CODES).all(axis=1)
        keys = np.where(canonical, digits.astype(np.int64) @ _POWERS, 0)
    odd = np.flatnonzero(~canonical).tolist()
    for position in odd:
        keys[position] = recency_key(times[position])
    return keys, odd


class IndexState:
    """What the index holds, shared by the writer (``SearchIndex``), the merger and the reader under ``lock``."""

    def __init__(self, k1: float = K1, b: float = B, tuning: Tuning | None = None, first_part: int = 0,
                 analyzer: Analyzer | None = None) -> None:
        """Parts are numbered from ``first_part`` (a snapshot's segment is part 0)."""
        self.k1, self.b = k1, b
        self.analyzer = analyzer or Analyzer()
        self.tuning = tuning or Tuning()
        self.scorer = Scorer(k1, b, self.tuning)
        self.position = 0
        self.lock = threading.Lock()
        self.vocabulary: dict[str, int] = {}
        self.namespace_numbers: dict[tuple[str, str], int] = {}
        self.by_scope: dict[str, list[int]] = {}
        # live documents and their summed lengths per namespace, by type and in all (the last column);
        # Python lists: an apply updates four counters, and list items are ten times cheaper than numpy's
        self.namespace_documents: list[list[int]] = []
        self.namespace_lengths: list[list[int]] = []
        self.slot_of = SlotsById()
        self.memory_ids = Labels()  # by slot; None once free
        # ``updated`` is kept only as the recency key it orders by (``_recency``), rebuilt by ``timestamp``, but for
        # times not in the spec's format (kept as they are); the times applied since the last settling wait here
        self.unsettled: dict[int, str] = {}
        self.odd_times: dict[int, str] = {}
        self.free: list[int] = []  # slots no part refers to
        self.slot_length = np.zeros(1024, np.int32)
        self.slot_type = np.zeros(1024, np.uint8)
        self.slot_namespace = np.zeros(1024, np.int32)
        self.slot_alive = np.zeros(1024, bool)
        self.slot_part = np.zeros(1024, np.int32)  # slot -> the number of the part holding it
        self.slot_document = np.zeros(1024, np.int32)  # slot -> its document number in that segment
        self.slot_version = np.zeros(1024, np.int64)  # slot -> the log position of the event it was indexed from
        self.slot_recency = np.zeros(1024, np.int64)  # slot -> its ``updated`` time as digits, for newest-first
        self.part_numbers = count(first_part)
        self.delta = Delta(next(self.part_numbers))
        self.parts: list[Delta | Segment] = [self.delta]
        self.segments: dict[int, Segment] = {}
        self.held_erased = False  # an erasure took out what it had indexed: the words linger (parts, vocabulary)
        self.stubbed: set[int] = set()  # positions it read as erased stubs: it never held their content

    def namespace_number(self, key: tuple[str, str]) -> int:
        number = self.namespace_numbers.get(key)
        if number is None:
            number = self.namespace_numbers[key] = len(self.namespace_numbers)
            self.by_scope.setdefault(key[0], []).append(number)
            self.namespace_documents.append([0] * (ALL_TYPES + 1))
            self.namespace_lengths.append([0] * (ALL_TYPES + 1))
        return number

    def settle_times(self) -> None:
        """(Lock held) turn the ``updated`` times applied since the last settling into recency keys, in numpy."""
        if not self.unsettled:
            return
        slots = np.fromiter(self.unsettled, np.int64, len(self.unsettled))
        times = list(self.unsettled.values())
        self.unsettled = {}
        keys, odd = recency_keys(times)
        self.slot_recency[slots] = keys
        if self.odd_times:  # a slot used again, by a time in the spec's format this time
            for slot in slots.tolist():
                self.odd_times.pop(slot, None)
        for position in odd:
            self.odd_times[int(slots[position])] = times[position]

    def updated_of(self, slot: int) -> str:
        """(Lock held, times settled) the ``updated`` time of the memory in ``slot``."""
        return self.odd_times.get(slot) or timestamp(int(self.slot_recency[slot]))

    def grow(self, needed: int) -> None:
        if needed <= len(self.slot_alive):
            return
        size = max(needed, 2 * len(self.slot_alive))
        for name in ("slot_length", "slot_type", "slot_namespace", "slot_part", "slot_document", "slot_version",
                     "slot_recency"):
            setattr(self, name, np.resize(getattr(self, name), size))
        alive = np.zeros(size, bool)
        alive[: len(self.slot_alive)] = self.slot_alive
        self.slot_alive = alive
