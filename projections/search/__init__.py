"""Search: a BM25 index kept as a projection of the log, exact per caller.

``service`` follows the log and swaps in rebuilds; ``index`` applies events
to its ``state``, ``reading`` answers queries over it; ``parts`` lays postings out as a delta and segments;
``merging`` is the merge policy; ``scoring`` evaluates queries (BM25 and
MaxScore pruning); ``snapshot`` is the file format other processes start from,
``snapshot_files`` this host's mapped copies of it, ``labels`` the slots' ids;
``analysis`` turns text into terms, ``ranking`` weighs them; ``tuning`` holds
every size and cost.
"""

from projections.search.analysis import Analyzer
from projections.search.index import IndexShape, SearchIndex
from projections.search.reading import Candidate, Candidates, Hit, Statistics
from projections.search.service import SearchService
from projections.search.snapshot import SnapshotCorrupt, SnapshotFormatError
from projections.search.tuning import Tuning

__all__ = ["Analyzer", "Candidate", "Candidates", "Hit", "IndexShape", "SearchIndex", "SearchService", "SnapshotCorrupt",
           "SnapshotFormatError", "Statistics", "Tuning"]
