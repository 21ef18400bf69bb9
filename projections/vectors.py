"""The semantic channel's read model: one vector per live memory and embedding model, in ``memory_vectors``.

A projection like the others, keyed by its model (``memory_vectors:<model>``), so a new model or dimension is a
new projection with its own checkpoint, built from position 0, and never mixes with another model's vectors.
It never runs in a save's transaction (a save does not wait for its embedding): ``projections.vector_catch_up``
reads a batch of events, embeds it outside any transaction, then writes the rows and the checkpoint together.
A batch's events collapse to what they leave behind: a memory's newest version is embedded once, a memory
deleted or erased in it is not embedded at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from sqlalchemy import Connection, Executable, and_, bindparam, delete
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from events.types import MEMORY_EVENTS, MemoriesErased, MemoryDeleted, MemoryEvent, RecordedEvent
from memoryd.embeddings.embedder import Embedder, Vectors, memory_text
from memoryd.storage.schema import memory_vectors
from memoryd.storage.vectors import VECTORS_PREFIX

NAME_LENGTH = 64  # projection_checkpoints.name


@dataclass(frozen=True)
class Embedding:
    """A memory version waiting for its vector."""

    version: int
    position: int
    text: str


@dataclass
class Changes:
    """What a run of events leaves behind: memory id -> its newest version to embed, or None (gone)."""

    latest: dict[str, Embedding | None] = field(default_factory=dict)

    def add(self, recorded: RecordedEvent) -> None:
        """Take one event in (decoding it may raise: the event cannot be applied)."""
        if not recorded.event_type.startswith(MEMORY_EVENTS):
            return
        event = recorded.to_domain()
        if isinstance(event, MemoriesErased):
            self.latest.update(dict.fromkeys(event.memory_ids))
        elif isinstance(event, MemoryDeleted):
            self.latest[event.memory.memory_id] = None
        elif isinstance(event, MemoryEvent):  # a save or an update; an erased event decodes to neither
            memory = event.memory
            self.latest[memory.memory_id] = Embedding(recorded.stream_version, recorded.position,
                                                      memory_text(memory.description, memory.content))

    def forget(self, memory_ids: Sequence[str]) -> None:
        """Embed none of these (erased since the batch was read): they are removed, not written."""
        self.latest.update(dict.fromkeys(set(memory_ids) & set(self.latest)))

    @property
    def to_embed(self) -> list[tuple[str, Embedding]]:
        return [(memory_id, found) for memory_id, found in self.latest.items() if found is not None]

    @property
    def gone(self) -> list[str]:
        return [memory_id for memory_id, found in self.latest.items() if found is None]


class VectorProjection:
    """The vectors of one model: what the catch-up embeds a batch at a time, and how it writes them."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model = embedder.model
        self.name = projection_name(embedder.model)

    def embed(self, changes: Changes) -> Vectors:
        """The vectors of what ``changes`` leaves to embed, in its order (raises what the embedder raises)."""
        return self.embed_texts([found.text for _, found in changes.to_embed])

    def embed_texts(self, texts: list[str]) -> Vectors:
        """One vector per text, checked to be of this model's shape."""
        if not texts:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dimension):
            raise ValueError(f"the embedder {self.model} answered shape {vectors.shape} for {len(texts)} texts "
                             f"of dimension {self.embedder.dimension}")
        return vectors

    def write(self, conn: Connection, changes: Changes, vectors: Vectors) -> None:
        """Rows for what is embedded, none for what is gone (``vectors`` in ``changes.to_embed``'s order)."""
        if gone := changes.gone:
            conn.execute(_DELETE, [{"model": self.model, "gone": memory_id} for memory_id in gone])
        rows = [{"model": self.model, "memory_id": memory_id, "version": found.version, "position": found.position,
                 "vector": to_bytes(vector)} for (memory_id, found), vector in zip(changes.to_embed, vectors, strict=True)]
        if rows:
            conn.execute(_upsert(conn.dialect.name), rows)

    def reset(self, conn: Connection) -> None:
        conn.execute(delete(memory_vectors).where(memory_vectors.c.model == self.model))


def projection_name(model: str) -> str:
    """``memory_vectors:<model>``; a model name too long for a checkpoint's name is replaced by its digest."""
    name = VECTORS_PREFIX + model
    if len(name) <= NAME_LENGTH:
        return name
    return VECTORS_PREFIX + hashlib.sha256(model.encode()).hexdigest()[:NAME_LENGTH - len(VECTORS_PREFIX)]


def to_bytes(vector: Vectors) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(data: bytes) -> Vectors:
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


_DELETE = delete(memory_vectors).where(and_(memory_vectors.c.model == bindparam("model"),
                                            memory_vectors.c.memory_id == bindparam("gone")))


@cache
def _upsert(dialect: str) -> Executable:
    """INSERT .. ON CONFLICT (model, memory_id) DO UPDATE, built once per dialect."""
    statement = (postgres_insert if dialect == "postgresql" else sqlite_insert)(memory_vectors)
    return statement.on_conflict_do_update(
        index_elements=[memory_vectors.c.model, memory_vectors.c.memory_id],
        set_={column: statement.excluded[column] for column in ("version", "position", "vector")})
