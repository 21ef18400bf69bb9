"""The semantic channel's vectors as one process uses them: the projection of one model, its catch-up (run in the
background where this process runs it), and the in-memory index searches ask for similarities."""

from __future__ import annotations

from collections.abc import Iterable

from events.store import EventStore
from memoryd.embeddings.embedder import Embedder, Vectors
from memoryd.storage.db import Database
from memoryd.storage.driver import Transaction
from projections.projector import lock_checkpoint, save_checkpoint
from projections.vector_catch_up import VectorCatchUp, VectorLoop
from projections.vector_index import VectorIndex
from projections.vectors import VectorProjection


class VectorChannel:
    def __init__(self, database: Database, store: EventStore, embedder: Embedder) -> None:
        self.database, self.store, self.embedder = database, store, embedder
        self.projection = VectorProjection(embedder)
        self.catch_up = VectorCatchUp(database, store, self.projection)
        self.index = VectorIndex(database, self.projection)
        self._loop: VectorLoop | None = None

    @property
    def name(self) -> str:
        return self.projection.name

    @property
    def model(self) -> str:
        return self.projection.model

    def similarities(self, query: Vectors, memory_ids: Iterable[str]) -> dict[str, float]:
        """Cosine similarity of the query's vector (``embed_query``) with each of ``memory_ids`` that has a vector."""
        return self.index.similarities(query, memory_ids)

    def embed_query(self, text: str) -> Vectors:
        """The query's unit vector, shape ``(dimension,)``; raises ``EmbeddingUnavailable`` (search then uses BM25
        alone)."""
        return self.projection.embed_texts([text]).reshape(-1)

    def checkpoint(self) -> int:
        return self.catch_up.checkpoint()

    def warm(self) -> None:
        """Load the model now (``Embedder.warm``): a serving process's first searches need not wait for it."""
        self.embedder.warm()

    def start(self) -> None:
        """Catch up in the background from now on (the serving process without workers; ``memoryd worker``)."""
        if self._loop is None:
            self._loop = VectorLoop(self.catch_up)
            self._loop.start()

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None

    def rebuild(self) -> int:
        """Drop this model's vectors and checkpoint in one transaction, then build them again from the log; the
        position reached. Meanwhile searches find the memories not embedded again yet by BM25 alone."""
        with self.database.transaction(Transaction) as tx:
            lock_checkpoint(tx.conn, self.name)
            self.projection.reset(tx.conn)
            save_checkpoint(tx.conn, self.name, 0)
        return self.catch_up.run()
