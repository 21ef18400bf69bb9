"""The index's tuning: part sizes, the merge policy and the pruning cost model, in one frozen value.

Every number was measured (docs/benchmarks.md, "Search: the BM25 index");
tests and benchmarks pass their own instead of rewriting module constants.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    freeze_postings: int = 32_768  # freeze the delta into a segment once it holds this many postings
    bulk_freeze_postings: int = 4_000_000  # inside bulk(): bigger deltas, frozen on the spot
    fanout: int = 4  # merge this many segments of one size tier into one
    tier_base: int = 512  # documents in a tier-0 segment (a frozen delta holds about this many)
    flat_postings: int = 256  # a segment holding fewer postings per query term than this is gathered flat
    runs_cached: int = 256  # visible sets whose document ranges a segment remembers
    prune_from: float = 1_000  # postings touched per query term and part: below, scoring them all flat costs less than pruning
    lookup_cost: float = 8  # binary-searching a term's postings for one candidate costs about 8 postings' scoring
    scan_cost: float = 1 / 8  # picking the candidates costs about an eighth of a posting's scoring per document
    pack_limit: int = 1 << 47  # below this, (term * documents + document) leaves 16 bits for the term frequency
