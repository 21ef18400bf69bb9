"""What the semantic channel asks of an embedder, whichever model or service stands behind it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memoryd.kernel.errors import MemorydError

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit-length vectors of one model.

    ``model`` names the model and its dimension (``"all-MiniLM-L6-v2/384"``): vectors are kept under it, so a
    change of model or dimension is a new projection, never a mix of two models' vectors.
    """

    model: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """An array of shape ``(len(texts), dimension)``, float32, each row L2-normalised.

        Raises ``EmbeddingUnavailable`` when the model or service cannot answer now.
        """
        ...

    def warm(self) -> None:
        """Prepare now what the first ``embed`` would (a local model loads), so that no query waits for it.

        A serving process calls it in the background at start; a command that never embeds never does.
        """
        ...


class EmbeddingUnavailable(MemorydError):
    """The embedder cannot answer now (an endpoint down, slow or refusing): callers fall back to BM25 alone."""

    status = 503
    code = "embedding_unavailable"
    retry_after = 1


def memory_text(description: str, content: str) -> str:
    """The text a memory is embedded as: its description says what it is about, its content the rest."""
    return f"{description}: {content}" if description else content
