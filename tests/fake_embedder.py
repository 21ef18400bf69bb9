"""A deterministic stand-in for a sentence embedder: hashed bag of words, L2-normalised.

Texts that share words point the same way, so similarities order as a real model's would on word overlap; the same
text always gives the same vector, so a rebuild equals the live projection exactly. ``blocked`` holds every call
until it is set (a save must not wait for it); ``unavailable`` makes every call raise ``EmbeddingUnavailable``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from memoryd.embeddings.embedder import EmbeddingUnavailable, Vectors

WORD = re.compile(r"\w+")


class FakeEmbedder:
    def __init__(self, dimension: int = 64, model: str = "fake-bag-of-words") -> None:
        self.dimension = dimension
        self.model = f"{model}/{dimension}"
        self.blocked = threading.Event()
        self.blocked.set()  # set: calls go through
        self.called = threading.Event()  # set by the first call (a blocked one too)
        self.unavailable = False
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.called.set()
        self.blocked.wait()
        self.calls += 1
        if self.unavailable:
            raise EmbeddingUnavailable("the fake embedder is switched off")
        self.texts.extend(texts)
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            counts = [0.0] * self.dimension
            for word in WORD.findall(text.lower()):
                slot, sign = _slot(word, self.dimension)
                counts[slot] += sign
            counts[0] += 1e-3  # no zero vector, even for a text of no words
            vectors[row] = counts
        norms: Vectors = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / norms


@lru_cache(maxsize=1 << 16)
def _slot(word: str, dimension: int) -> tuple[int, float]:
    """The dimension a word counts in, and with which sign (a digest: the same in every process)."""
    digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % dimension, 1.0 if digest[4] & 1 else -1.0
