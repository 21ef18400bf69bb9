"""A deterministic stand-in for a sentence-embedding model, in-process and as an OpenAI-compatible server.

Vectors are hashed bags of words: each lowercased word (or the concept ``CONCEPTS`` files it under) adds 1 to
one of ``dimension`` coordinates (by its digest, the same in every process), then the row is scaled to unit
length. Texts sharing words are close, texts sharing none are orthogonal unless two words collide; the
concepts let a test find a memory that shares no word with the query, as a real model would ("guitar" near
"violin"). The same text always gives the same vector, so a rebuild equals the live projection exactly.
Enough to test the semantic channel's plumbing, never its quality.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from memoryd.embeddings.embedder import EmbeddingUnavailable, Vectors
from memoryd.embeddings.unit import unit_rows

DIMENSION = 64
_WORD = re.compile(r"\w+")
CONCEPTS = {word: "instrument" for word in ("violin", "guitar", "piano", "cello", "drums")}


def hashed_vectors(texts: Sequence[str], dimension: int = DIMENSION) -> Vectors:
    counts = np.zeros((len(texts), dimension))
    for row, text in enumerate(texts):
        for word in _WORD.findall(text.lower()):
            counts[row, _slot(CONCEPTS.get(word, word), dimension)] += 1
        counts[row, 0] += 1e-3  # no zero vector, even for a text of no words
    return unit_rows(counts)


@lru_cache(maxsize=1 << 16)
def _slot(word: str, dimension: int) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % dimension


class FakeEmbedder:
    """An ``Embedder`` of hashed bags of words. ``blocked`` cleared holds every call until it is set again (a
    save must not wait for it); ``unavailable`` makes every call raise ``EmbeddingUnavailable``; ``texts``
    holds every text it was asked for, ``called`` is set by the first call (a held one too), ``warmed`` by
    ``warm``."""

    def __init__(self, dimension: int = DIMENSION, model: str = "fake-hashed-words") -> None:
        self.dimension, self.model = dimension, f"{model}/{dimension}"
        self.blocked = threading.Event()
        self.blocked.set()
        self.called = threading.Event()
        self.warmed = threading.Event()
        self.unavailable = False
        self.calls = 0
        self.texts: list[str] = []

    def warm(self) -> None:
        """Nothing to load; ``warmed`` says it was asked to."""
        self.warmed.set()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.called.set()
        self.blocked.wait()
        self.calls += 1
        if self.unavailable:
            raise EmbeddingUnavailable("the fake embedder is switched off")
        self.texts.extend(texts)
        return hashed_vectors(texts, self.dimension)


@dataclass
class Behaviour:
    """How the fake server answers next: a test changes it between calls."""

    dimension: int = DIMENSION
    delay: float = 0.0  # seconds before answering
    status: int = 200
    body: bytes | None = None  # sent as it is instead of the vectors
    scale: float = 3.0  # vectors are sent this long, so the client must normalise them itself
    key: str = ""  # when set, a request without "Authorization: Bearer <key>" gets 401
    hang_up: bool = False  # close the connection after answering without saying so, as an idle timeout does


class FakeEmbeddingsServer:
    """``POST /v1/embeddings`` on loopback; ``requests`` holds every request body it got."""

    def __init__(self) -> None:
        self.behaviour = Behaviour()
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # connections are kept open, as real services keep them

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                behaviour = fake.behaviour
                time.sleep(behaviour.delay)
                if self.path != "/v1/embeddings":
                    return self._send(404, b'{"error": "not found"}')
                if behaviour.key and self.headers.get("Authorization") != f"Bearer {behaviour.key}":
                    return self._send(401, json.dumps({"error": f"Incorrect API key provided: "
                                                                f"{self.headers.get('Authorization')}"}).encode())
                if behaviour.body is not None or behaviour.status != 200:
                    return self._send(behaviour.status, behaviour.body or b'{"error": "failing as told"}')
                vectors = hashed_vectors(body["input"], behaviour.dimension) * behaviour.scale
                data = [{"object": "embedding", "index": index, "embedding": vector.tolist()}
                        for index, vector in reversed(list(enumerate(vectors)))]  # out of order, as the spec allows
                self._send(200, json.dumps({"object": "list", "data": data, "model": body["model"]}).encode())

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    self.close_connection = fake.behaviour.hang_up
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting: as it should
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @contextmanager
    def running(self) -> Iterator[FakeEmbeddingsServer]:
        thread = threading.Thread(target=self._server.serve_forever, name="fake-embeddings", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join()
