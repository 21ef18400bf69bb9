"""A part's visible postings of a query's terms, in the two forms scoring reads them.

* *term by term*: one ``Postings`` per term, views into a big segment where it can,
  so MaxScore looks the common words up for a few candidates without copying them;
* *flat*: every term's postings one after the other in one array each, so a query
  that touches few postings is scored with a constant number of numpy calls
  instead of a few per term and part.

A part is gathered in whichever form is cheaper and the other form is derived on
demand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

import numpy as np


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenated ``arange(start, end)`` of each pair, vectorized."""
    lengths = ends - starts
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return cast(np.ndarray, np.arange(int(lengths.sum())) + shift)


class Postings(NamedTuple):
    """One query term's visible postings in one part."""

    positions: np.ndarray  # ascending, in the part's own position space
    documents: np.ndarray  # the part's document numbers
    tfs: np.ndarray
    zero: np.ndarray | None  # which of them are tombstones to score zero, or None


class Flat(NamedTuple):
    """Every query term's visible postings in one part, term after term."""

    positions: np.ndarray
    documents: np.ndarray
    tfs: np.ndarray
    bounds: np.ndarray  # term t's postings are [bounds[t], bounds[t + 1])
    zero: np.ndarray | None  # indexes of the postings that are tombstones, ascending, or None; their tfs are 0


EMPTY = Postings(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint16), None)
NOTHING = np.empty(0, np.int32)


class Gathered:
    """One part's visible postings of each query term, numbered in a space of its own (positions < ``space``).

    Lengths are looked up only for the postings that get scored.
    """

    __slots__ = ("lengths", "space", "slots_of", "_terms", "_flat")

    def __init__(self, lengths: np.ndarray, space: int, slots_of: Callable[[np.ndarray], np.ndarray], *,
                 terms: list[Postings] | None = None, flat: Flat | None = None) -> None:
        assert (terms is None) != (flat is None), "gathered in exactly one form"
        self.lengths, self.space, self.slots_of = lengths, space, slots_of  # lengths by the part's document number
        self._terms, self._flat = terms, flat

    @classmethod
    def nothing(cls, terms: int) -> Gathered:
        return cls(NOTHING, 0, lambda positions: positions, terms=[EMPTY] * terms)

    def term(self, term: int) -> Postings:
        if self._terms is None:
            self._terms = _split(cast(Flat, self._flat))
        return self._terms[term]

    def flat(self) -> Flat:
        if self._flat is None:
            self._flat = _join(cast(list[Postings], self._terms))
        return self._flat

    def counts(self) -> np.ndarray:
        """Each term's postings here, tombstones included."""
        if self._flat is not None:
            return np.diff(self._flat.bounds)
        return np.array([len(postings.positions) for postings in cast(list[Postings], self._terms)], np.int64)

    def frequencies(self) -> np.ndarray:
        """Each term's live documents here: its document frequency in this part."""
        if self._flat is None:
            return np.array([len(where) - (len(zero) if zero is not None else 0)
                             for where, _, _, zero in cast(list[Postings], self._terms)], np.int64)
        flat = self._flat
        found = np.diff(flat.bounds)
        if flat.zero is not None:
            found -= np.bincount(np.searchsorted(flat.bounds, flat.zero, side="right") - 1, minlength=len(found))
        return found


def _split(flat: Flat) -> list[Postings]:
    assert flat.zero is None, "gathered flat, tombstones are dropped: only a joined form zeroes any"
    bounds = flat.bounds.tolist()
    return [Postings(flat.positions[start:end], flat.documents[start:end], flat.tfs[start:end], None)
            for start, end in zip(bounds, bounds[1:])]


def _join(terms: list[Postings]) -> Flat:
    lengths = [len(postings.positions) for postings in terms]
    bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    zeros = [zero + start for (_, _, _, zero), start in zip(terms, bounds.tolist()) if zero is not None]
    if not terms:
        return Flat(NOTHING, NOTHING, np.empty(0, np.uint16), bounds, None)
    tfs = np.concatenate([postings.tfs for postings in terms])
    zero = np.concatenate(zeros) if zeros else None
    if zero is not None:
        tfs[zero] = 0  # a copy: a tombstone scores tf 0 / (0 + norm), nothing
    return Flat(np.concatenate([postings.positions for postings in terms]),
                np.concatenate([postings.documents for postings in terms]), tfs, bounds, zero)
