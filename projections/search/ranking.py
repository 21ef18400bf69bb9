"""The words and weights of Okapi BM25, shared by the index and its tests.

Lucene's idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` is always positive, so
a word that occurs everywhere still counts a little, and a query none of
whose words occur scores zero everywhere (and returns nothing).
"""

from __future__ import annotations

import math
import re

K1 = 1.5
B = 0.75
_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lowercase words: runs of letters and digits; everything else (``_ - . /`` too) splits."""
    return _WORD.findall(text.lower())


def idf(document_count: int, document_frequency: int) -> float:
    return math.log(1 + (document_count - document_frequency + 0.5) / (document_frequency + 0.5))
