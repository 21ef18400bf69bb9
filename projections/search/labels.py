"""Which memory holds which slot: shared arrays from the snapshot, with what changed since kept privately.

An index started from a memory-mapped snapshot must not copy a million memory
ids into Python objects (hundreds of megabytes per process, and seconds to
build). So the snapshot's slots are read from its arrays, ids found by binary
search over its sorted ids, and only the slots written since live in a list and
dicts of this process's own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

_NONE = np.empty(0, "S1")


class Labels:
    """A string (or None) per slot: the snapshot's slots from a shared bytes array, the rest private."""

    __slots__ = ("_shared", "_changed", "_added")

    def __init__(self, shared: np.ndarray = _NONE) -> None:
        self._shared = shared
        self._changed: dict[int, str | None] = {}  # shared slots written since
        self._added: list[str | None] = []  # slots past the shared ones

    def __len__(self) -> int:
        return len(self._shared) + len(self._added)

    def __getitem__(self, slot: int) -> str | None:
        shared = len(self._shared)
        if slot >= shared:
            return self._added[slot - shared]
        if slot in self._changed:
            return self._changed[slot]
        return str(self._shared[slot].decode())

    def __setitem__(self, slot: int, value: str | None) -> None:
        shared = len(self._shared)
        if slot >= shared:
            self._added[slot - shared] = value
        else:
            self._changed[slot] = value

    def append(self, value: str | None) -> None:
        self._added.append(value)

    def copy(self) -> Labels:
        """The labels as they are now, for reading after the index's lock is let go: the shared array is
        immutable, so only what changed since is copied."""
        copied = Labels(self._shared)
        copied._changed, copied._added = dict(self._changed), list(self._added)
        return copied

    def shared_bytes(self) -> int:
        return self._shared.nbytes

    def private_bytes(self, size: Callable[[object], int] = sys.getsizeof) -> int:
        """What this process holds of its own (the containers and their strings), for memory reports; ``size``
        may count an object already counted elsewhere as 0 (an id is one string in both maps)."""
        strings = [*self._changed.values(), *self._added]
        return size(self._changed) + size(self._added) + sum(size(item) for item in strings if item is not None)


class SlotsById:
    """Memory id -> slot of the live memories: the snapshot's through its sorted ids, the rest in a dict."""

    __slots__ = ("_ids", "_slots", "_added", "_gone")

    def __init__(self, sorted_ids: np.ndarray = _NONE, sorted_slots: np.ndarray | None = None) -> None:
        self._ids = sorted_ids
        self._slots = sorted_slots if sorted_slots is not None else np.empty(0, np.int32)
        self._added: dict[str, int] = {}  # placed since the snapshot
        self._gone: set[str] = set()  # the snapshot's, removed since

    def __len__(self) -> int:
        return len(self._ids) - len(self._gone) + len(self._added)

    def __contains__(self, memory_id: str) -> bool:
        return self.get(memory_id) is not None

    def __getitem__(self, memory_id: str) -> int:
        if (slot := self.get(memory_id)) is None:
            raise KeyError(memory_id)
        return slot

    def get(self, memory_id: str) -> int | None:
        slot = self._added.get(memory_id)
        if slot is not None or not len(self._ids) or memory_id in self._gone:
            return slot
        return self._shared(memory_id)

    def __setitem__(self, memory_id: str, slot: int) -> None:
        if len(self._ids) and memory_id not in self._gone and self._shared(memory_id) is not None:
            self._gone.add(memory_id)  # placed again: its snapshot slot no longer counts
        self._added[memory_id] = slot

    def pop(self, memory_id: str, default: int | None = None) -> int | None:
        if (slot := self._added.pop(memory_id, None)) is not None:
            return slot
        if len(self._ids) and memory_id not in self._gone and (slot := self._shared(memory_id)) is not None:
            self._gone.add(memory_id)
            return slot
        return default

    def shared_bytes(self) -> int:
        return self._ids.nbytes + self._slots.nbytes

    def private_bytes(self, size: Callable[[object], int] = sys.getsizeof) -> int:
        return size(self._added) + size(self._gone) + sum(size(memory_id) for memory_id in (*self._added, *self._gone))

    def _shared(self, memory_id: str) -> int | None:
        key = memory_id.encode()
        if len(key) > self._ids.itemsize:  # longer than any the snapshot holds (and no cast of the array)
            return None
        found = int(np.searchsorted(self._ids, key))
        if found < len(self._ids) and self._ids[found] == key:
            return int(self._slots[found])
        return None
