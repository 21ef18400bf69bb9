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
from typing import cast

import numpy as np

from projections.search.gathered import EMPTY, NOTHING, Flat, Gathered, Postings, ranges
from projections.search.parts import Segment
from projections.search.tuning import Tuning

Runs = tuple[np.ndarray, np.ndarray, np.ndarray]  # the visible document ranges' firsts, ends, and shifts to positions

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


def _summed(where: list[np.ndarray], contributions: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The documents ``where`` names (ascending) and what their ``contributions`` add up to, in array order."""
    if not sum(len(positions) for positions in where):
        return NOTHING, np.empty(0)
    documents, inverse = np.unique(np.concatenate(where), return_inverse=True)
    return documents, np.bincount(inverse, weights=np.concatenate(contributions))


class Scorer:
    """Scores gathered postings with Okapi BM25 (``k1``, ``b``), pruning as ``tuning`` says."""

    def __init__(self, k1: float, b: float, tuning: Tuning) -> None:
        self.k1, self.b, self.tuning = k1, b, tuning
        self.lookups = 0  # terms looked up for candidates only (pruned), since the start

    @staticmethod
    def part_by_part(terms: int, parts: int) -> bool:
        """Whether scoring every posting goes part by part (the numpy calls grow with the parts), not term by term."""
        return terms >= parts

    def scores_all(self, postings: int, terms: int, parts: int) -> bool:
        """Whether a query touching ``postings`` scores every one of them rather than pruning."""
        return postings < self.tuning.prune_from * terms * parts  # pruning's bookkeeping goes per term and part

    def gather(self, part: Segment, slices: tuple[np.ndarray, np.ndarray], visible: np.ndarray | None,
               type_code: int | None) -> Gathered:
        """A segment's postings of each query term (``slices``: where each term's start and end) that
        ``visible`` and ``type_code`` admit.

        Few postings are gathered flat, masked with a handful of numpy calls; many are cut
        term by term with binary searches, as views where the segment's order allows.
        """
        runs = part.runs(visible, self.tuning.runs_cached) if visible is not None else None
        if runs is not None and not len(runs[0]):
            return Gathered.nothing(len(slices[0]))
        cut, space, slots_of = None, part.documents, lambda positions: part.slots[positions]
        if runs is not None:
            firsts, lasts = runs
            run_offsets = np.cumsum(lasts - firsts) - (lasts - firsts)  # where each run starts among the visible
            shifts = firsts - run_offsets
            cut, space = (firsts, lasts, shifts), int((lasts - firsts).sum())

            def slots_of(positions: np.ndarray) -> np.ndarray:
                run = np.searchsorted(run_offsets, positions, side="right") - 1
                return cast(np.ndarray, part.slots[positions + shifts[run]])

        starts, ends = slices
        if int((ends - starts).sum()) <= self.tuning.flat_postings * len(starts):
            return Gathered(part.lengths, space, slots_of, flat=self._gather_flat(part, starts, ends, cut, type_code))
        return Gathered(part.lengths, space, slots_of,
                        terms=self._gather_terms(part, starts.tolist(), ends.tolist(), cut, type_code))

    @staticmethod
    def _gather_flat(part: Segment, starts: np.ndarray, ends: np.ndarray,
                     runs: Runs | None, type_code: int | None) -> Flat:
        """Every posting of the terms at once, then one mask: the visible runs, live, of the type."""
        if int((ends - starts).sum()) >= 64 * len(starts):  # long postings: copied slices beat an index array
            cuts = [slice(start, end) for start, end in zip(starts.tolist(), ends.tolist())]
            docs, tfs = np.concatenate([part.docs[cut] for cut in cuts]), np.concatenate([part.tfs[cut] for cut in cuts])
        else:
            chosen = ranges(starts, ends)
            docs, tfs = part.docs[chosen], part.tfs[chosen]
        positions, keep = docs, None
        if runs is not None:
            firsts, lasts, shifts = runs
            if len(firsts) == 1:
                keep = (docs >= firsts[0]) & (docs < lasts[0])
                positions = docs - firsts[0]
            else:
                run = np.minimum(np.searchsorted(lasts, docs, side="right"), len(lasts) - 1)  # the first run ending later
                keep = (docs >= firsts[run]) & (docs < lasts[run])
                positions = docs - shifts[run]
        if part.dead or type_code is not None:  # a copy is made anyway: tombstones are dropped, not zeroed
            admitted = part.alive[docs] if part.dead else np.ones(len(docs), bool)
            if type_code is not None:
                admitted &= part.types[docs] == type_code
            keep = admitted if keep is None else keep & admitted
        found = ends - starts
        if keep is not None:
            found = np.bincount(np.repeat(np.arange(len(found)), found)[keep], minlength=len(found))
            positions, docs, tfs = positions[keep], docs[keep], tfs[keep]
        bounds = np.concatenate(([0], np.cumsum(found))).astype(np.int64)
        return Flat(positions, docs, tfs, bounds)

    @staticmethod
    def _gather_terms(part: Segment, starts: list[int], ends: list[int],
                      runs: Runs | None, type_code: int | None) -> list[Postings]:
        """Each term's postings cut to the visible runs by binary search: views when one run holds them."""
        filtered = type_code is not None  # else tombstones, if any, score zero (or are filtered when many)
        removed = part.removed_documents() if part.dead and not filtered else None
        if runs is not None:
            firsts, lasts, shifts = runs
            bounds, single = np.concatenate((firsts, lasts)), len(firsts) == 1
            if single and removed is not None:  # only the tombstones in the visible range matter
                begin, finish = removed.searchsorted(bounds).tolist()
                removed = removed[begin:finish] if finish > begin else None
        postings: list[Postings] = []
        for start, end in zip(starts, ends):
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
                    begins, finishes = found[:len(firsts)], found[len(firsts):]
                    chosen = ranges(begins, finishes)
                    docs, tfs = docs[chosen], tfs[chosen]
                    positions = docs - np.repeat(shifts, finishes - begins)
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
        return postings

    def score(self, parts: list[Gathered], weights: list[float], places: list[int], average_length: float,
               limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The best slots and their scores (ties at the cut kept), each term scored once across parts.

        ``places``: each term's place in the query, which orders terms of equal weight, so that a
        document's score is the same float whatever else the index holds.

        Each part's positions are shifted into one space for the query (part after part). When every
        posting is scored, it is scored term by term across the parts or part by part across the
        terms, whichever are fewer: the numpy calls grow with the smaller of the two, not with
        terms times parts.

        Terms are scored heaviest (rarest) first. No term adds as much as its weight to a score,
        so once the weights still to come sum below the ``limit``-th best score so far, only the
        documents within that sum of it can still make the top: the remaining terms, the common
        ones with the longest postings, are looked up for those documents alone (MaxScore). The
        result is exact, ties included.
        """
        bases = np.cumsum([0] + [part.space for part in parts]).tolist()
        postings = [sum(found) for found in zip(*(part.counts() for part in parts))]
        touched = sum(postings)
        order = sorted((term for term, weight in enumerate(weights) if weight), key=lambda term: (-weights[term], places[term]))
        sparse = touched * 8 <= bases[-1]  # few postings for the space: accumulate sparsely
        if sparse or self.scores_all(touched, len(weights), len(parts)):
            every = self._flat_totals if self.part_by_part(len(order), len(parts)) else self._totals_by_term
            where, sums = every(parts, bases, order, weights, average_length, sparse)
            keep = top_mask(sums, limit)
            return self._slots_of(parts, bases, where[keep]), sums[keep]
        totals = np.zeros(bases[-1])
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

    def _flat_totals(self, parts: list[Gathered], bases: list[int], order: list[int], weights: list[float],
                     average_length: float, sparse: bool) -> tuple[np.ndarray, np.ndarray]:
        """Every visible posting of the ``order``-ed terms scored and summed per document, part by part: the
        documents (in the query's space) and their scores; with ``sparse``, only the documents that scored.

        Within a part the terms come heaviest first, so each document's score is summed in the
        order the pruned path sums it: both give the same floats, ties included. The index
        gathers the terms in the order their weights most often have, so seldom are the
        postings reordered here. Unless few, parts are summed apart (a document lives in one):
        no array grows with the query's postings beyond one part's.
        """
        heaviest = np.array(order, np.int64)
        reorder = order != list(range(len(weights)))
        weight_of = np.array(weights)[heaviest]
        found: list[np.ndarray] = []
        sums: list[np.ndarray] = []
        for part, base in zip(parts, bases):
            positions, documents, tfs, bounds = part.flat()  # a tombstone's tf is 0 here: it adds 0
            if not len(positions):
                if not sparse:
                    sums.append(np.zeros(part.space))
                continue
            if reorder:
                pick = ranges(bounds[heaviest], bounds[heaviest + 1])
                positions, documents, tfs = positions[pick], documents[pick], tfs[pick]
            if len(documents) > len(part.lengths):  # more postings than documents: each document normalized once
                norms = self._norms(part.lengths, average_length)[documents]
            else:
                norms = self._norms(part.lengths[documents], average_length)
            scored = self._saturated(tfs, norms, np.repeat(weight_of, bounds[heaviest + 1] - bounds[heaviest]))
            if sparse:  # few postings: gathered across parts, summed at once
                found.append(positions + base if base else positions)
                sums.append(scored)
            else:
                sums.append(np.bincount(positions, weights=scored, minlength=part.space))
        if not sparse:
            return np.arange(bases[-1]), np.concatenate(sums) if sums else np.empty(0)
        return _summed(found, sums)

    def _totals_by_term(self, parts: list[Gathered], bases: list[int], order: list[int], weights: list[float],
                        average_length: float, sparse: bool) -> tuple[np.ndarray, np.ndarray]:
        """``_flat_totals``, term after term (heaviest first, so the same floats) across the parts."""
        scored = [self._term_scores(parts, bases, term, weights[term], average_length) for term in order]
        if not sparse:
            totals = np.zeros(bases[-1])
            for where, contributions in scored:
                np.add.at(totals, where, contributions)
            return np.arange(bases[-1]), totals
        return _summed([where for where, _ in scored], [contributions for _, contributions in scored])

    def _term_scores(self, parts: list[Gathered], bases: list[int], term: int, weight: float,
                     average_length: float) -> tuple[np.ndarray, np.ndarray]:
        """Every visible posting of ``term``: positions in the query's space and what each adds."""
        pieces = [(postings, part.lengths, base) for part, base in zip(parts, bases)
                  if len((postings := part.term(term)).positions)]
        if not pieces:
            return NOTHING, np.empty(0)
        if len(pieces) == 1:  # one part (an admin over one segment): no copies
            (where, docs, tfs, _), lengths, base = pieces[0]
            where, lengths = (where + base if base else where), lengths[docs]
        else:
            where = np.concatenate([postings.positions + base for postings, _, base in pieces])
            lengths = np.concatenate([lengths[postings.documents] for postings, lengths, _ in pieces])
            tfs = np.concatenate([postings.tfs for postings, _, _ in pieces])
        contributions = self._bm25(tfs, lengths, weight, average_length)
        skipped = 0
        for (found, _, _, zero), _, _ in pieces:
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
            positions, docs, frequencies, _ = part.term(term)
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

    def _bm25(self, tfs: np.ndarray, lengths: np.ndarray, weight: float | np.ndarray,
              average_length: float) -> np.ndarray:
        """``weight * tf / (tf + k1 * (1 - b + b * length / average))``, in place where it can."""
        return self._saturated(tfs, self._norms(lengths, average_length), weight)

    def _norms(self, lengths: np.ndarray, average_length: float) -> np.ndarray:
        """``k1 * (1 - b + b * length / average)``: what a document's length adds to each tf's denominator."""
        norms = lengths * (self.k1 * self.b / average_length)
        norms += self.k1 * (1 - self.b)
        return norms

    @staticmethod
    def _saturated(tfs: np.ndarray, norms: np.ndarray, weight: float | np.ndarray) -> np.ndarray:
        """``weight * tf / (tf + norm)``, in ``norms`` (a fresh array)."""
        tf = tfs.astype(np.float64)
        norms += tf
        np.divide(tf, norms, out=norms)
        norms *= weight
        return norms

    @staticmethod
    def _slots_of(parts: list[Gathered], bases: list[int], positions: np.ndarray) -> np.ndarray:
        if len(parts) == 1:  # one part (a fresh or rebuilt index): its own positions
            return parts[0].slots_of(positions)
        owner = np.searchsorted(bases, positions, side="right") - 1
        slots = np.empty(len(positions), np.int64)
        for number in np.unique(owner).tolist():
            mine = owner == number
            slots[mine] = parts[number].slots_of(positions[mine] - bases[number])
        return slots
