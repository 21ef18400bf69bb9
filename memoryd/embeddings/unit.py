"""Unit-length rows: every embedder answers with them, so a dot product is the cosine similarity."""

from __future__ import annotations

import numpy as np

from memoryd.embeddings.embedder import Vectors


def unit_rows(vectors: np.ndarray) -> Vectors:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit
