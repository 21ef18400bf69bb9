"""The weights of Okapi BM25, shared by the index and its tests (``analysis`` makes the terms).

Lucene's idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` is always positive, so
a word that occurs everywhere still counts a little, and a query none of
whose words occur scores zero everywhere (and returns nothing).
"""

from __future__ import annotations

import math

K1 = 1.2  # Lucene's default: 1.2 and 1.5 recall alike on the LoCoMo dev split (docs/benchmarks.md)
B = 0.5  # less length normalization than the textbook 0.75: turns recalled better in all five dev conversations


def idf(document_count: int, document_frequency: int) -> float:
    return math.log(1 + (document_count - document_frequency + 0.5) / (document_frequency + 0.5))
