"""Query evaluation: a part's visible postings, BM25, MaxScore pruning and the top-k cut.

Statistics (document count, average length, document frequencies) are
computed per query over exactly the searched set, so another user's memories
never change the caller's scores. A query scores its rarest words first; once
the words still to come could not lift a document it has not scored into the
top, the common words are looked up only for the documents that can still get
there (MaxScore). The answer stays exact, ties included.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

from projections.search.parts import Segment
from projections.search.tuning import Tuning

_BOUND_SLACK = 1 + 1e-9  # widens the sum of weights still to come, far beyond float rounding


def top_mask(scores: np.ndarray, limit: int) -> np.ndarray:
    """A mask of the positive scores at or above the cut for the ``limit`` best."""
    if len(scores) <= limit:
        return scores > 0
    cut = cut_for(scores, limit)
    return scores >= cut if cut > 0 else scores > 0


def cut_for(scores: np.ndarray, limit: int, block: int = 512) -> float:
    """A score at or below the ``limit``-th best: the ``limit``-th best of the blocks' maxima.

    Those maxima are ``limit`` distinct scores, so at least ``limit`` scores reach
    the cut; keeping everything at or above it keeps every tie. Cheaper than a
    partition of all scores, and it leaves few candidates to sort exactly.
    """
    blocks = -(-len(scores) // block)
    if blocks <= limit:  # few scores: the exact cut among the positive ones
        positive = scores[scores > 0]
        return float(np.partition(positive, len(positive) - limit)[len(positive) - limit]) if len(positive) > limit else 0.0
    maxima = np.maximum.reduceat(scores, np.arange(0, len(scores), block))
    return float(np.partition(maxima, blocks - limit)[blocks - limit])


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


@dataclass
class Gathered:
    """One part's visible postings of each query term, numbered in a space of its own.

    Lengths are looked up only for the postings that get scored.
    """

    postings: list[Postings]
    lengths: np.ndarray  # by the part's document number
    space: int  # positions are < space
    slots_of: Callable[[np.ndarray], np.ndarray]


EMPTY = Postings(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint16), None)
NOTHING = np.empty(0, np.int32)


class Scorer:
    """Scores gathered postings with Okapi BM25 (``k1``, ``b``), pruning as ``tuning`` says."""

    def __init__(self, k1: float, b: float, tuning: Tuning) -> None:
        self.k1, self.b, self.tuning = k1, b, tuning
        self.lookups = 0  # terms looked up for candidates only (pruned), since the start

    def gather(self, part: Segment, term_ids: np.ndarray, visible: np.ndarray | None,
               type_code: int | None) -> Gathered:
        """A segment's postings of each query term that ``visible`` and ``type_code`` admit."""
        runs = part.runs(visible, self.tuning.runs_cached) if visible is not None else None
        if runs is not None and not len(runs[0]):
            return Gathered([EMPTY] * len(term_ids), NOTHING, 0, lambda positions: positions)
        filtered = type_code is not None  # else tombstones, if any, score zero (or are filtered when many)
        removed = part.removed_documents() if part.dead and not filtered else None
        if runs is not None:
            firsts, lasts = runs
            run_offsets = np.cumsum(lasts - firsts) - (lasts - firsts)  # where each run starts among the visible
            shifts = firsts - run_offsets
            bounds, single = np.concatenate((firsts, lasts)), len(firsts) == 1
            if single and removed is not None:  # only the tombstones in the visible range matter
                begin, finish = removed.searchsorted(bounds).tolist()
                removed = removed[begin:finish] if finish > begin else None
        postings: list[Postings] = []
        for start, end in part.slices(term_ids):
            if start == end:
                postings.append(EMPTY)
                continue
            docs, tfs = part.docs[start:end], part.tfs[start:end]
            positions = docs
            if runs is not None:
                found = docs.searchsorted(bounds)
                if single:  # one namespace (or adjacent ones): plain slices, no gathers
                    begin, finish = found.tolist()
                    docs, tfs = docs[begin:finish], tfs[begin:finish]
                    positions = docs - firsts[0]
                else:
                    begins, ends = found[:len(firsts)], found[len(firsts):]
                    chosen = ranges(begins, ends)
                    docs, tfs = docs[chosen], tfs[chosen]
                    positions = docs - np.repeat(shifts, ends - begins)
            zero = None
            if removed is not None and len(removed) * 16 <= len(docs):  # few tombstones: find them
                found = docs.searchsorted(removed)
                inside = found < len(docs)
                found = found[inside]
                zero = found[docs[found] == removed[inside]]
            elif (filtered or removed is not None) and len(docs):
                keep = part.alive[docs]
                if type_code is not None:
                    keep &= part.types[docs] == type_code
                docs, tfs = docs[keep], tfs[keep]
                positions = docs if runs is None else positions[keep]
            postings.append(Postings(positions, docs, tfs, zero))
        if runs is None:
            return Gathered(postings, part.lengths, part.documents, lambda positions: part.slots[positions])

        def slots_of(positions: np.ndarray) -> np.ndarray:
            run = np.searchsorted(run_offsets, positions, side="right") - 1
            return cast(np.ndarray, part.slots[positions + shifts[run]])

        return Gathered(postings, part.lengths, int((lasts - firsts).sum()), slots_of)

    def score(self, parts: list[Gathered], weights: list[float], average_length: float,
               limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The best slots and their scores (ties at the cut kept), each term scored once across parts.

        Each part's positions are shifted into one space for the query (part after part), so a
        term's postings from every part are scored together: the numpy calls grow with the
        query's terms, not with terms times parts.

        Terms are scored heaviest (rarest) first. No term adds as much as its weight to a score,
        so once the weights still to come sum below the ``limit``-th best score so far, only the
        documents within that sum of it can still make the top: the remaining terms, the common
        ones with the longest postings, are looked up for those documents alone (MaxScore). The
        result is exact, ties included.
        """
        bases = np.cumsum([0] + [part.space for part in parts]).tolist()
        postings = [sum(len(part.postings[term][0]) for part in parts) for term in range(len(weights))]
        touched = sum(postings)
        if touched * 8 <= bases[-1]:  # few postings for the space: accumulate sparsely
            return self._score_sparse(parts, bases, weights, average_length, limit)
        totals = np.zeros(bases[-1])
        order = sorted((term for term, weight in enumerate(weights) if weight), key=weights.__getitem__, reverse=True)
        if touched < self.tuning.prune_from:  # too little to save for the bookkeeping to pay
            for term in order:
                np.add.at(totals, *self._term_scores(parts, bases, term, weights[term], average_length))
            best = np.flatnonzero(top_mask(totals, limit))
            return self._slots_of(parts, bases, best), totals[best]
        threshold = 0.0  # at or below the limit-th best final score
        candidates = None  # once known: the only documents that can still make the top, ascending
        to_come = [postings[term] for term in order]
        for done, term in enumerate(order):
            remaining = math.fsum(weights[later] for later in order[done:]) * _BOUND_SLACK
            if candidates is not None:
                candidates = candidates[totals[candidates] >= threshold - remaining]
            elif remaining < threshold and len(totals) * self.tuning.scan_cost < sum(to_come[done:]):  # the pass can pay
                candidates = np.flatnonzero(totals >= threshold - remaining)
            if candidates is not None and len(candidates) * self.tuning.lookup_cost < to_come[done]:
                where, contributions = self._look_up(parts, bases, term, candidates, weights[term], average_length)
                totals[where] += contributions  # each candidate at most once per term
                where = candidates
            else:
                where, contributions = self._term_scores(parts, bases, term, weights[term], average_length)
                np.add.at(totals, where, contributions)  # numpy 2's fast path: quicker than a bincount
                where = where if candidates is None else candidates
            later = remaining - weights[term] * _BOUND_SLACK
            if len(where) > limit and 0 < later < math.fsum(weights[earlier] for earlier in order[:done + 1]):
                reached = totals[where]  # distinct documents: their limit-th best bounds the final one's
                if reached.max() > later:  # else no threshold could prune the rest
                    threshold = max(threshold, cut_for(reached, limit, block=max(len(reached) // (8 * limit), 1)))
        best = np.flatnonzero(top_mask(totals, limit)) if candidates is None else \
            candidates[top_mask(totals[candidates], limit)]
        return self._slots_of(parts, bases, best), totals[best]

    def _score_sparse(self, parts: list[Gathered], bases: list[int], weights: list[float],
                      average_length: float, limit: int) -> tuple[np.ndarray, np.ndarray]:
        scored = [self._term_scores(parts, bases, term, weight, average_length)
                  for term, weight in enumerate(weights) if weight]
        scored = [(where, contributions) for where, contributions in scored if len(where)]
        if not scored:
            return np.empty(0, np.int64), np.empty(0)
        unique, inverse = np.unique(np.concatenate([where for where, _ in scored]), return_inverse=True)
        sums = np.bincount(inverse, weights=np.concatenate([contributions for _, contributions in scored]))
        keep = top_mask(sums, limit)
        return self._slots_of(parts, bases, unique[keep]), sums[keep]

    def _term_scores(self, parts: list[Gathered], bases: list[int], term: int, weight: float,
                     average_length: float) -> tuple[np.ndarray, np.ndarray]:
        """Every visible posting of ``term``: positions in the query's space and what each adds."""
        pieces = [(part, base) for part, base in zip(parts, bases) if len(part.postings[term][0])]
        if not pieces:
            return NOTHING, np.empty(0)
        if len(pieces) == 1:  # one part (an admin over one segment): no copies
            part, base = pieces[0]
            where, docs, tfs, _ = part.postings[term]
            where, lengths = (where + base if base else where), part.lengths[docs]
        else:
            where = np.concatenate([part.postings[term][0] + base for part, base in pieces])
            lengths = np.concatenate([part.lengths[part.postings[term][1]] for part, _ in pieces])
            tfs = np.concatenate([part.postings[term][2] for part, _ in pieces])
        contributions = self._bm25(tfs, lengths, weight, average_length)
        skipped = 0
        for part, _ in pieces:
            found, _, _, zero = part.postings[term]
            if zero is not None:
                contributions[zero + skipped] = 0.0  # tombstones: no score (and not counted in df)
            skipped += len(found)
        return where, contributions

    def _look_up(self, parts: list[Gathered], bases: list[int], term: int, candidates: np.ndarray,
                 weight: float, average_length: float) -> tuple[np.ndarray, np.ndarray]:
        """What ``term`` adds to each of ``candidates`` (ascending, live) that it occurs in."""
        self.lookups += 1
        cuts = np.searchsorted(candidates, bases).tolist()
        found, tfs, lengths = [], [], []
        for number, part in enumerate(parts):
            positions, docs, frequencies, _ = part.postings[term]
            mine = candidates[cuts[number]:cuts[number + 1]]
            if not len(positions) or not len(mine):
                continue
            mine = (mine - bases[number]).astype(positions.dtype)  # searchsorted would cast the postings
            rows = np.minimum(positions.searchsorted(mine), len(positions) - 1)
            hit = positions[rows] == mine
            rows = rows[hit]
            found.append(mine[hit] + bases[number])
            tfs.append(frequencies[rows])
            lengths.append(part.lengths[docs[rows]])
        if not found:
            return NOTHING, np.empty(0)
        return np.concatenate(found), self._bm25(np.concatenate(tfs), np.concatenate(lengths), weight, average_length)

    def _bm25(self, tfs: np.ndarray, lengths: np.ndarray, weight: float, average_length: float) -> np.ndarray:
        """``weight * tf / (tf + k1 * (1 - b + b * length / average))``, in place where it can."""
        tf = tfs.astype(np.float64)
        norm = lengths * (self.k1 * self.b / average_length)
        norm += self.k1 * (1 - self.b)
        norm += tf
        np.divide(tf, norm, out=norm)
        norm *= weight
        return norm

    @staticmethod
    def _slots_of(parts: list[Gathered], bases: list[int], positions: np.ndarray) -> np.ndarray:
        owner = np.searchsorted(bases, positions, side="right") - 1
        slots = np.empty(len(positions), np.int64)
        for number in np.unique(owner).tolist():
            mine = owner == number
            slots[mine] = parts[number].slots_of(positions[mine] - bases[number])
        return slots
