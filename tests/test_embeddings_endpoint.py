"""The endpoint embedder against a fake OpenAI-compatible server: vectors when it answers, and
``EmbeddingUnavailable`` (never another error, never the key) whenever it does not answer as it should."""

from __future__ import annotations

import socket
import traceback
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from memoryd.embeddings.embedder import EmbeddingUnavailable
from memoryd.embeddings.endpoint import EndpointEmbedder
from memoryd.embeddings.factory import semantic_embedder
from memoryd.kernel.config import SearchSettings
from memoryd.kernel.errors import ConfigError
from tests.fake_embeddings import DIMENSION, FakeEmbeddingsServer, hashed_vectors

KEY = "sk-test-5f3a9c1e"
Opened = list[EndpointEmbedder]


@pytest.fixture
def server() -> Iterator[FakeEmbeddingsServer]:
    with FakeEmbeddingsServer().running() as running:
        yield running


@pytest.fixture
def opened() -> Iterator[Opened]:
    """Embedders a test made, closed after it (each keeps its connections open)."""
    made: list[EndpointEmbedder] = []
    yield made
    for embedder in made:
        embedder.close()


def endpoint(opened: Opened, url: str, model: str = "m", **options: Any) -> EndpointEmbedder:
    opened.append(EndpointEmbedder(url, model, **options))
    return opened[-1]


def test_vectors_come_back_in_input_order_at_unit_length_under_a_name_with_the_dimension(
        server: FakeEmbeddingsServer, opened: Opened) -> None:
    embedder = endpoint(opened, server.url, "nomic-embed-text", batch=2)
    texts = ["violin practice every evening", "running in the park", "reading novels", "violin lessons"]
    vectors = embedder.embed(texts)
    assert embedder.model == f"nomic-embed-text/{DIMENSION}" and embedder.dimension == DIMENSION
    assert vectors.shape == (4, DIMENSION) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)
    assert np.allclose(vectors, hashed_vectors(texts), atol=1e-6)
    assert [request["model"] for request in server.requests] == ["nomic-embed-text"] * 3  # the probe, then 2 batches
    assert embedder.embed([]).shape == (0, DIMENSION)


def test_a_connection_the_service_closed_while_idle_is_replaced_without_a_failure(
        server: FakeEmbeddingsServer, opened: Opened) -> None:
    embedder = endpoint(opened, server.url, dimension=DIMENSION)
    server.behaviour.hang_up = True
    for _ in range(3):
        assert embedder.embed(["still answering"]).shape == (1, DIMENSION)


def test_a_configured_dimension_needs_no_request_at_start(server: FakeEmbeddingsServer, opened: Opened) -> None:
    endpoint(opened, server.url, dimension=DIMENSION)
    assert server.requests == []


def test_the_key_goes_in_the_header_and_a_refusal_never_repeats_it(server: FakeEmbeddingsServer, opened: Opened) -> None:
    server.behaviour.key = KEY
    embedder = endpoint(opened, server.url, key=KEY)
    assert embedder.embed(["hello"]).shape == (1, DIMENSION)
    refused = endpoint(opened, server.url, key="sk-wrong-key", dimension=DIMENSION)
    with pytest.raises(EmbeddingUnavailable, match="HTTP 401") as raised:
        refused.embed(["hello"])
    logged = "".join(traceback.format_exception(raised.value))  # what a log of the failure would hold
    assert "HTTP 401" in logged and "sk-" not in logged


@pytest.mark.parametrize(("change", "message"), [
    ({"status": 500}, "HTTP 500"),
    ({"body": b"<html>502 Bad Gateway</html>"}, "not JSON"),
    ({"body": b'{"data": [{"vector": [1, 2]}]}'}, "OpenAI-compatible"),
    ({"body": b'{"data": []}'}, "0 vectors for 1 texts"),
    ({"body": b'{"data": [{"embedding": []}]}'}, "empty"),
    ({"dimension": DIMENSION * 2}, f"{DIMENSION * 2}-dimensional"),
    ({"delay": 2.0}, "did not answer within 0.3 s"),
])
def test_every_failure_is_embedding_unavailable(server: FakeEmbeddingsServer, opened: Opened, change: dict[str, object],
                                                message: str) -> None:
    embedder = endpoint(opened, server.url, timeout=0.3)
    for name, value in change.items():
        setattr(server.behaviour, name, value)
    with pytest.raises(EmbeddingUnavailable, match=message):
        embedder.embed(["how does she prioritize self-care"])


def test_an_endpoint_nobody_listens_on_is_unavailable_and_its_password_is_not_shown(opened: Opened) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    embedder = endpoint(opened, f"http://user:hunter2@127.0.0.1:{port}/v1", dimension=8, timeout=1)
    with pytest.raises(EmbeddingUnavailable, match="cannot be reached") as raised:
        embedder.embed(["anything"])
    assert "hunter2" not in str(raised.value) and f"127.0.0.1:{port}" in str(raised.value)


def test_the_factory_learns_the_dimension_from_the_endpoint_or_fails_start_up_saying_what_to_set(
        server: FakeEmbeddingsServer, opened: Opened) -> None:
    settings = SearchSettings(semantic="endpoint", embeddings_url=server.url, embeddings_model="m")
    embedder = semantic_embedder(settings)
    assert isinstance(embedder, EndpointEmbedder) and embedder.model == f"m/{DIMENSION}"
    opened.append(embedder)
    server.behaviour.status = 503
    with pytest.raises(ConfigError, match="search.embeddings_dimension is not set.*HTTP 503"):
        semantic_embedder(settings)
