"""Okapi BM25 with Lucene's idf, over whatever documents the caller may see.

``ln(1 + (N - df + 0.5) / (df + 0.5))`` is always positive, so a word that
occurs everywhere still counts a little and a query none of whose words
occur scores zero everywhere (and returns nothing).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

K1 = 1.5
B = 0.75
_WORD = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lowercase words: runs of letters and digits; everything else (``_ - . /`` too) splits."""
    return _WORD.findall(text.lower())


def idf(document_count: int, document_frequency: int) -> float:
    return math.log(1 + (document_count - document_frequency + 0.5) / (document_frequency + 0.5))


def bm25_scores(documents: Sequence[Sequence[str]], query: Sequence[str], k1: float = K1, b: float = B) -> list[float]:
    """One score per document; a repeated query word counts once per repetition."""
    scores = [0.0] * len(documents)
    if not documents:
        return scores
    average_length = sum(len(doc) for doc in documents) / len(documents)
    counts = [Counter(doc) for doc in documents]
    for word, repeats in Counter(query).items():
        holders = [index for index, count in enumerate(counts) if word in count]
        if not holders:
            continue
        weight = repeats * idf(len(documents), len(holders))
        for index in holders:
            frequency = counts[index][word]
            norm = k1 * (1 - b + b * len(documents[index]) / average_length)
            scores[index] += weight * frequency * (k1 + 1) / (frequency + norm)
    return scores
