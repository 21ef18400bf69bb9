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
    """Every query term's visible postings in one part, term after term; a tombstone among them has tf 0."""

    positions: np.ndarray
    documents: np.ndarray
    tfs: np.ndarray
    bounds: np.ndarray  # term t's postings are [bounds[t], bounds[t + 1])


NOTHING = np.empty(0, np.int32)
EMPTY = Postings(NOTHING, NOTHING, np.empty(0, np.uint16), None)  # positions are documents, as when all are visible


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

    def counts(self) -> list[int]:
        """Each term's postings here, tombstones included."""
        if self._terms is not None:
            return [len(postings.positions) for postings in self._terms]
        bounds = cast(Flat, self._flat).bounds.tolist()
        return [end - start for start, end in zip(bounds, bounds[1:])]

    def frequencies(self) -> list[int]:
        """Each term's live documents here: its document frequency in this part."""
        if self._terms is not None:
            return [len(where) - (len(zero) if zero is not None else 0) for where, _, _, zero in self._terms]
        return self.counts()  # gathered flat: tombstones were dropped


def _split(flat: Flat) -> list[Postings]:
    """Views of each term's postings; none to zero (tombstones were dropped, or their tfs are 0)."""
    bounds = flat.bounds.tolist()
    return [Postings(flat.positions[start:end], flat.documents[start:end], flat.tfs[start:end], None)
            for start, end in zip(bounds, bounds[1:])]


def _join(terms: list[Postings]) -> Flat:
    lengths = [len(postings.positions) for postings in terms]
    bounds = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    if not terms:
        return Flat(NOTHING, NOTHING, np.empty(0, np.uint16), bounds)
    tfs = np.concatenate([postings.tfs for postings in terms])
    for (_, _, _, zero), start in zip(terms, bounds.tolist()):
        if zero is not None:
            tfs[zero + start] = 0  # a copy: a tombstone scores tf 0 / (0 + norm), nothing
    documents = np.concatenate([postings.documents for postings in terms])
    if all(postings.positions is postings.documents for postings in terms):  # every document visible: one array
        return Flat(documents, documents, tfs, bounds)
    return Flat(np.concatenate([postings.positions for postings in terms]), documents, tfs, bounds)
