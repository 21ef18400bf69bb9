"""The index's state: per-slot arrays, the vocabulary, namespace counters, and its parts.

Every indexed memory holds a *slot*: its length, type, namespace and
liveness live in numpy arrays indexed by slot. Per namespace, live documents
and their summed lengths are counted by type and in all, so a query's
statistics cover exactly what the caller may see.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import count

import numpy as np

from memoryd.domain import MEMORY_TYPES
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
    def __init__(self, k1: float = K1, b: float = B, tuning: Tuning | None = None,
                 merge_built: Callable[[], None] | None = None, first_part: int = 0,
                 analyzer: Analyzer | None = None) -> None:
        """``merge_built`` is called by the merger between building a segment and swapping it in; parts are
        numbered from ``first_part`` (a snapshot's segment is part 0)."""
        self.k1, self.b = k1, b
        self.analyzer = analyzer or Analyzer()
        self._tuning = tuning or Tuning()
        self._scorer = Scorer(k1, b, self._tuning)
        self._merge_built = merge_built
        self._freezes = 0
        self.position = 0
        self._lock = threading.Lock()
        self._vocabulary: dict[str, int] = {}
        self._namespace_numbers: dict[tuple[str, str], int] = {}
        self._by_scope: dict[str, list[int]] = {}
        # live documents and their summed lengths per namespace, by type and in all (the last column);
        # Python lists: an apply updates four counters, and list items are ten times cheaper than numpy's
        self._documents: list[list[int]] = []
        self._lengths: list[list[int]] = []
        self._slot_of = SlotsById()
        self._memory_ids = Labels()  # by slot; None once free
        # ``updated`` is kept only as the recency key it orders by (``_recency``), rebuilt by ``timestamp``, but for
        # times not in the spec's format (kept as they are); the times applied since the last settling wait here
        self._unsettled: dict[int, str] = {}
        self._odd_times: dict[int, str] = {}
        self._free: list[int] = []  # slots no part refers to
        self._length = np.zeros(1024, np.int32)
        self._type = np.zeros(1024, np.uint8)
        self._namespace = np.zeros(1024, np.int32)
        self._alive = np.zeros(1024, bool)
        self._part_of = np.zeros(1024, np.int32)  # slot -> the number of the part holding it
        self._document_of = np.zeros(1024, np.int32)  # slot -> its document number in that segment
        self._version = np.zeros(1024, np.int64)  # slot -> the log position of the event it was indexed from
        self._recency = np.zeros(1024, np.int64)  # slot -> its ``updated`` time as digits, for newest-first
        self._numbers = count(first_part)
        self._delta = Delta(next(self._numbers))
        self._parts: list[Delta | Segment] = [self._delta]
        self._segments: dict[int, Segment] = {}
        self._merging: set[int] = set()
        self._merger: threading.Thread | None = None
        self._merge_wanted = False  # something changed that may make a merge due
        self._bulk = False
        self.held_erased = False  # an erasure took out what it had indexed: the words linger (parts, vocabulary)
        self._stubbed: set[int] = set()  # positions it read as erased stubs: it never held their content

    def _namespace_number(self, key: tuple[str, str]) -> int:
        number = self._namespace_numbers.get(key)
        if number is None:
            number = self._namespace_numbers[key] = len(self._namespace_numbers)
            self._by_scope.setdefault(key[0], []).append(number)
            self._documents.append([0] * (ALL_TYPES + 1))
            self._lengths.append([0] * (ALL_TYPES + 1))
        return number

    def _settle_times(self) -> None:
        """(Lock held) turn the ``updated`` times applied since the last settling into recency keys, in numpy."""
        if not self._unsettled:
            return
        slots = np.fromiter(self._unsettled, np.int64, len(self._unsettled))
        times = list(self._unsettled.values())
        self._unsettled = {}
        keys, odd = recency_keys(times)
        self._recency[slots] = keys
        if self._odd_times:  # a slot used again, by a time in the spec's format this time
            for slot in slots.tolist():
                self._odd_times.pop(slot, None)
        for position in odd:
            self._odd_times[int(slots[position])] = times[position]

    def _updated_of(self, slot: int) -> str:
        """(Lock held, times settled) the ``updated`` time of the memory in ``slot``."""
        return self._odd_times.get(slot) or timestamp(int(self._recency[slot]))

    def _grow(self, needed: int) -> None:
        if needed <= len(self._alive):
            return
        size = max(needed, 2 * len(self._alive))
        for name in ("_length", "_type", "_namespace", "_part_of", "_document_of", "_version", "_recency"):
            setattr(self, name, np.resize(getattr(self, name), size))
        alive = np.zeros(size, bool)
        alive[: len(self._alive)] = self._alive
        self._alive = alive
