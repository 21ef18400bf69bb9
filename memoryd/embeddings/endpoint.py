"""An OpenAI-compatible embeddings service (Ollama, vLLM, text-embeddings-inference, OpenAI) as an embedder.

It posts ``{"model": ..., "input": [...]}`` to ``{url}/embeddings`` (``url`` is the API's base, as OpenAI
clients take it: ``http://127.0.0.1:11434/v1``). Whatever goes wrong (refused, slower than the timeout,
an error status, an answer that is not the expected vectors) is ``EmbeddingUnavailable``, so the caller
goes on with BM25 alone. The key travels only in the ``Authorization`` header: no error says it, and an
error names the address without any user or password in it.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from memoryd.embeddings.embedder import EmbeddingUnavailable, Vectors
from memoryd.embeddings.unit import unit_rows

BATCH = 64  # texts per request: well under every service's limit (OpenAI's is 2,048), and a short request
PROBE = "dimension"  # what is embedded to learn the dimension when it is not configured


class EndpointEmbedder:
    """Vectors from a remote model; thread-safe (a connection per thread)."""

    def __init__(self, url: str, model: str, key: str = "", dimension: int = 0, timeout: float = 2.0,
                 batch: int = BATCH) -> None:
        """``dimension`` 0: learnt now, from the service's answer to one short text (``EmbeddingUnavailable``
        if it does not answer). ``timeout``: seconds a connection, and each read of the answer, may take."""
        self.address = url.rstrip("/") + "/embeddings"
        self.shown = _without_credentials(self.address)
        self.name, self.timeout, self.batch = model, timeout, batch
        self._target = urlsplit(self.address)
        self._path = self._target.path or "/"
        self._connections = threading.local()
        self._opened: set[http.client.HTTPConnection] = set()  # every thread's, for close()
        self._opening = threading.Lock()
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        try:
            self.dimension = dimension or self._request([PROBE]).shape[1]
        except EmbeddingUnavailable:
            self.close()
            raise
        self.model = f"{model}/{self.dimension}"

    def warm(self) -> None:
        """Nothing to prepare: a connection opens on a thread's first request."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch):
            part = self._request(list(texts[start:start + self.batch]))
            if part.shape[1] != self.dimension:
                raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} answered with {part.shape[1]}-"
                                           f"dimensional vectors for {self.name}, not {self.dimension}")
            parts.append(part)
        return np.concatenate(parts)

    def _request(self, texts: list[str]) -> Vectors:
        body = json.dumps({"model": self.name, "input": texts}).encode()
        try:
            status, payload = self._post(body)
        except TimeoutError:
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} did not answer within "
                                       f"{self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} cannot be reached "
                                       f"({type(error).__name__})") from None
        if status != 200:  # its text may quote the key back (OpenAI's 401 does): not kept
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} answered HTTP {status}")
        try:
            answer = json.loads(payload)
        except ValueError:
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} answered with something not JSON") from None
        return self._vectors(answer, len(texts))

    def _post(self, body: bytes) -> tuple[int, bytes]:
        """One request on this thread's connection, kept open (a TLS handshake per query would cost more than
        the embedding); once more on a new one when the service had closed it while idle."""
        connection, reused = self._connection()
        try:
            return self._post_on(connection, body)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            return self._post_on(self._connection()[0], body)

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's open connection, or a new one; and whether it served a request before."""
        connection = getattr(self._connections, "open", None)
        with self._opening:
            if connection is not None and connection in self._opened:
                return connection, True
            kind = http.client.HTTPSConnection if self._target.scheme == "https" else http.client.HTTPConnection
            connection = kind(self._target.hostname or "", self._target.port, timeout=self.timeout)
            self._opened.add(connection)
        self._connections.open = connection
        return connection, False

    def _post_on(self, connection: http.client.HTTPConnection, body: bytes) -> tuple[int, bytes]:
        try:
            connection.request("POST", self._path, body, self._headers)
            response = connection.getresponse()
            return response.status, response.read()
        except BaseException:  # a connection in an unknown state is never used again
            connection.close()
            with self._opening:
                self._opened.discard(connection)
            raise

    def close(self) -> None:
        """Close every thread's connection (a later call opens a new one)."""
        with self._opening:
            opened, self._opened = self._opened, set()
        for connection in opened:
            connection.close()

    def _vectors(self, answer: Any, count: int) -> Vectors:
        """The answer's vectors in input order, unit length; ``EmbeddingUnavailable`` unless there is one of one
        length for each input."""
        try:
            items = sorted(answer["data"], key=lambda item: int(item.get("index", 0)))
            vectors = np.array([item["embedding"] for item in items], dtype=np.float64)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} answered without embeddings in "
                                       "an OpenAI-compatible form") from None
        if len(vectors) != count:
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} answered with {len(vectors)} vectors "
                                       f"for {count} texts")
        if vectors.ndim != 2 or not vectors.shape[1] or not np.isfinite(vectors).all():
            raise EmbeddingUnavailable(f"the embeddings endpoint {self.shown} answered with vectors of unlike "
                                       "lengths, empty or not finite")
        return unit_rows(vectors)


def _without_credentials(address: str) -> str:
    """The address with any ``user:password@`` left out, for messages."""
    parts = urlsplit(address)
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")
                                     if parts.hostname else parts.netloc))
