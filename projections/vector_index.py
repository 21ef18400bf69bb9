"""The vectors one process holds in memory for the semantic channel: a float32 matrix, a row per memory.

Filled from ``memory_vectors`` and kept current incrementally: rows are written with their checkpoint in one
transaction and carry the position of the event they were made from, so what changed since the last look is what
lies past the checkpoint then seen; what went (deleted or erased memories) is found by the list of ids, read only
when the checkpoint or the newest erasure moved. A checkpoint that went back (a rebuild) reloads everything.
Memory: ``dimension * 4`` bytes per memory (384 dimensions: 1.5 KiB; 10,000 memories about 15 MiB, 100,000 about
150 MiB) plus an id and a dict entry each, and up to twice that while the matrix grows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping

import numpy as np
from sqlalchemy import Connection, select

from events.erasure import newest_erasure
from memoryd.embeddings.embedder import Vectors
from memoryd.storage.db import Database
from memoryd.storage.schema import memory_vectors, projection_checkpoints
from projections.filters import MemoryFilter, admitted_namespaces
from projections.search.fusion import Spread
from projections.search.state import TYPE_CODES
from projections.vectors import VectorProjection, from_bytes

STALE_SECONDS = 0.5  # how long a search may use the matrix before looking at the table again


class VectorIndex:
    def __init__(self, database: Database, projection: VectorProjection, stale_seconds: float = STALE_SECONDS) -> None:
        self.database, self.model, self.name = database, projection.model, projection.name
        self.dimension = projection.embedder.dimension
        self.stale_seconds = stale_seconds
        self._lock = threading.Lock()
        self._matrix = np.zeros((0, self.dimension), dtype=np.float32)
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}
        # per row: the event its vector was made from, its namespace's number and its type's code
        self._positions = np.zeros(0, dtype=np.int64)
        self._namespaces = np.zeros(0, dtype=np.int32)
        self._types = np.zeros(0, dtype=np.uint8)
        self._namespace_numbers: dict[tuple[str, str], int] = {}
        self._by_scope: dict[str, list[int]] = {}
        self._seen: tuple[int, int] | None = None  # (checkpoint, newest erasure) the matrix reflects
        self._looked = -float("inf")

    def similarities(self, query: Vectors, memory_ids: Iterable[str]) -> dict[str, float]:
        """Cosine similarity of ``query`` (one unit vector of this model) with each of ``memory_ids`` that has a
        vector; a memory without one (not embedded yet, or gone) is left out: BM25 alone finds it."""
        self._look_if_stale()
        with self._lock:
            found = [(memory_id, row) for memory_id in memory_ids if (row := self._row_of.get(memory_id)) is not None]
            if not found:
                return {}
            scores = self._matrix[[row for _, row in found]] @ np.asarray(query, dtype=np.float32).reshape(-1)
        return {memory_id: float(score) for (memory_id, _), score in zip(found, scores, strict=True)}

    def similar(self, query: Vectors, where: MemoryFilter, floor: float, best: int, also: Iterable[str] = ()
                ) -> tuple[dict[str, float], Spread]:
        """Of the memories ``where`` admits, those that can rank in a fused top ``best``: the ``best`` most similar
        to ``query`` and each of ``also`` (BM25's candidates), where their similarity reaches ``floor``; and the
        spread of the similarities of every admitted memory that has a vector (the fusion's z-scores are over
        these).

        One matrix product over the rows admitted (or over all, when most are): at 100,000 memories about 7 ms
        on this project's machine; what follows grows with ``best``, not with how many memories pass the floor.
        """
        self._look_if_stale()
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            used = len(self._ids)
            admitted = self._admitted(where, used)
            rows = np.arange(used) if admitted is None else np.flatnonzero(admitted)
            if not len(rows):
                return {}, Spread(0.0, 0.0)
            if len(rows) * 3 >= used:  # most rows: one product over all beats gathering the admitted ones
                scores = (self._matrix[:used] @ vector)[rows]
            else:
                scores = self._matrix[rows] @ vector
            spread = Spread(float(scores.mean()), float(scores.std()))
            top = np.flatnonzero(scores >= floor)
            if len(top) > best:
                top = top[np.argpartition(scores[top], len(top) - best)[len(top) - best:]] if best > 0 else top[:0]
            close = {self._ids[rows[index]]: float(scores[index]) for index in top.tolist()}
            wanted = [(memory_id, row) for memory_id in also if memory_id not in close
                      and (row := self._row_of.get(memory_id)) is not None and (admitted is None or admitted[row])]
            if wanted:
                picked = self._matrix[[row for _, row in wanted]] @ vector
                close |= {memory_id: float(score) for (memory_id, _), score in zip(wanted, picked, strict=True)
                          if score >= floor}
            return close, spread

    def similarities_of_versions(self, query: Vectors, positions: Mapping[str, int]) -> dict[str, float]:
        """Cosine similarity of ``query`` with each memory of ``positions`` whose vector was made from the event
        at its position there (a version read ``as_of``); a memory whose vector is of another version is left out."""
        self._look_if_stale()
        with self._lock:
            found = [(memory_id, row) for memory_id, position in positions.items()
                     if (row := self._row_of.get(memory_id)) is not None and self._positions[row] == position]
            if not found:
                return {}
            scores = self._matrix[[row for _, row in found]] @ np.asarray(query, dtype=np.float32).reshape(-1)
        return {memory_id: float(score) for (memory_id, _), score in zip(found, scores, strict=True)}

    def _look_if_stale(self) -> None:
        if time.monotonic() - self._looked >= self.stale_seconds:
            self.refresh()

    def _admitted(self, where: MemoryFilter, used: int) -> np.ndarray | None:
        """(Lock held) Which of the first ``used`` rows ``where`` admits; None: all of them."""
        mask = None
        if (numbers := admitted_namespaces(where, self._namespace_numbers, self._by_scope)) is not None:
            seen = np.zeros(len(self._namespace_numbers), bool)
            seen[sorted(numbers)] = True
            mask = seen[self._namespaces[:used]]
        if where.type:
            typed = self._types[:used] == TYPE_CODES[where.type] if where.type in TYPE_CODES else np.zeros(used, bool)
            mask = typed if mask is None else mask & typed
        return mask

    def holding(self, memory_ids: Iterable[str]) -> list[str]:
        """Which of ``memory_ids`` this process holds a vector of, after a fresh look at the table."""
        self.refresh()
        with self._lock:
            return [memory_id for memory_id in memory_ids if memory_id in self._row_of]

    def __len__(self) -> int:
        return len(self._ids)

    def refresh(self) -> None:
        """Bring the matrix to the table's state."""
        with self._lock, self.database.consistent_read() as conn:
            self._looked = time.monotonic()
            checkpoint = int(conn.execute(select(projection_checkpoints.c.position)
                                          .where(projection_checkpoints.c.name == self.name)).scalar() or 0)
            seen = (checkpoint, newest_erasure(conn))
            if seen == self._seen:
                return
            if self._seen is None or checkpoint < self._seen[0]:  # first look, or rebuilt: everything again
                self._matrix, self._ids, self._row_of = np.zeros((0, self.dimension), dtype=np.float32), [], {}
                self._positions, self._namespaces, self._types = (
                    np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint8))
                after = -1
            else:
                after = self._seen[0]
            self._remove_gone(conn)
            self._load_after(conn, after)
            self._seen = seen

    def _remove_gone(self, conn: Connection) -> None:
        if not self._ids:
            return
        present = set(conn.execute(select(memory_vectors.c.memory_id).where(memory_vectors.c.model == self.model))
                      .scalars())
        for memory_id in [memory_id for memory_id in self._ids if memory_id not in present]:
            self._remove(memory_id)

    def _load_after(self, conn: Connection, position: int) -> None:
        rows = conn.execute(select(memory_vectors.c.memory_id, memory_vectors.c.vector, memory_vectors.c.position,
                                   memory_vectors.c.scope, memory_vectors.c.scope_id, memory_vectors.c.type)
                            .where(memory_vectors.c.model == self.model, memory_vectors.c.position > position))
        for memory_id, data, position, scope, scope_id, kind in rows:
            if (row := self._row_of.get(memory_id)) is None:
                row = self._append(memory_id)
            self._matrix[row] = from_bytes(data)
            self._positions[row] = position
            self._namespaces[row] = self._namespace_number(scope, scope_id)
            self._types[row] = TYPE_CODES[kind]

    def _namespace_number(self, scope: str, scope_id: str) -> int:
        number = self._namespace_numbers.get((scope, scope_id))
        if number is None:
            number = self._namespace_numbers[(scope, scope_id)] = len(self._namespace_numbers)
            self._by_scope.setdefault(scope, []).append(number)
        return number

    def _append(self, memory_id: str) -> int:
        row = len(self._ids)
        if row == len(self._matrix):  # grow by doubling: appends cost O(1) amortised
            size = max(16, 2 * row)
            self._matrix = _grown(self._matrix, (size, self.dimension))
            self._positions, self._namespaces, self._types = (
                _grown(self._positions, (size,)), _grown(self._namespaces, (size,)), _grown(self._types, (size,)))
        self._ids.append(memory_id)
        self._row_of[memory_id] = row
        return row

    def _remove(self, memory_id: str) -> None:
        """The last row moves into the removed one's place."""
        row, last = self._row_of.pop(memory_id), len(self._ids) - 1
        moved = self._ids.pop()
        if row != last:
            self._ids[row] = moved
            self._row_of[moved] = row
            for array in (self._matrix, self._positions, self._namespaces, self._types):
                array[row] = array[last]
        self._matrix[last] = 0


def _grown(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` copied into the start of a zeroed array of ``shape``."""
    grown = np.zeros(shape, dtype=array.dtype)
    grown[:len(array)] = array
    return grown
