"""``memoryd projections verify`` for the semantic channel: one model's stored vectors beside the log replayed and
embedded again, at the live checkpoint.

Versions and positions must be equal, and each vector within ``TOLERANCE`` of the replayed one in every component:
a deterministic embedder gives equal vectors; a real model may differ in the last bits when its batches are cut
differently (a sentence embedded alone or among others), far below what changes a ranking. Memory: the live rows
and the replayed texts of the model are held while compared (about ``dimension * 4`` bytes and a text per memory).
"""

from __future__ import annotations

import hashlib

import numpy as np
from sqlalchemy import select

from events.chain import canonical
from memoryd.embeddings.embedder import Vectors
from memoryd.storage.db import Database
from memoryd.storage.schema import memory_vectors, projection_checkpoints
from projections.projector import Projector
from projections.vector_catch_up import BATCH_SIZE
from projections.vectors import Changes, Embedding, VectorProjection, from_bytes
from projections.verify import LISTED, Verified

TOLERANCE = 1e-4  # the largest difference allowed in any component of a unit vector


def verify_vectors(database: Database, projector: Projector, projection: VectorProjection) -> Verified:
    """The model's rows, live beside the log replayed to their checkpoint and embedded again."""
    changes = Changes()
    reached = _replay_into(changes, projector, 0, projector.checkpoint(projection.name))
    with database.consistent_read() as live:  # the rows and their checkpoint, at one moment
        checkpoint = int(live.execute(select(projection_checkpoints.c.position)
                                      .where(projection_checkpoints.c.name == projection.name)).scalar() or 0)
        stored = {row.memory_id: (row.version, row.position, row.vector) for row in live.execute(
            select(memory_vectors.c.memory_id, memory_vectors.c.version, memory_vectors.c.position,
                   memory_vectors.c.vector).where(memory_vectors.c.model == projection.model))}
    if checkpoint < reached:  # rebuilt meanwhile: replay again to where it stands now
        changes, reached = Changes(), 0
    _replay_into(changes, projector, reached, checkpoint)
    replayed = dict(changes.to_embed)
    return _compared(projection, checkpoint, stored, replayed)


def _replay_into(changes: Changes, projector: Projector, after: int, until: int) -> int:
    position = after
    for event in projector.replayed(after, until):
        changes.add(event)
        position = event.position
    return max(position, until)


def _compared(projection: VectorProjection, position: int, stored: dict[str, tuple[int, int, bytes]],
              replayed: dict[str, Embedding]) -> Verified:
    live_digest, replayed_digest = hashlib.sha256(), hashlib.sha256()
    different, listed = 0, list[str]()
    ids = sorted(replayed)
    vectors = {memory_id: vector for first in range(0, len(ids), BATCH_SIZE)
               for memory_id, vector in zip(ids[first:first + BATCH_SIZE], projection.embed_texts(
                   [replayed[memory_id].text for memory_id in ids[first:first + BATCH_SIZE]]), strict=True)}
    for memory_id in sorted(set(stored) | set(replayed)):
        mine, theirs = stored.get(memory_id), replayed.get(memory_id)
        if mine is not None:
            live_digest.update(canonical([memory_id, mine[0], mine[1]]))
        if theirs is not None:
            replayed_digest.update(canonical([memory_id, theirs.version, theirs.position]))
        problem = _difference(mine, theirs, vectors.get(memory_id))
        if problem:
            different += 1
            if len(listed) < LISTED:
                listed.append(f"memory_vectors {memory_id}: {problem}")
    return Verified(projection.name, position, len(stored), live_digest.hexdigest(), replayed_digest.hexdigest(),
                    different, listed)


def _difference(mine: tuple[int, int, bytes] | None, theirs: Embedding | None, vector: Vectors | None) -> str:
    """What differs between a live row and the replayed version ("" if nothing beyond the tolerance)."""
    if mine is None:
        return "only in the replay"
    if theirs is None:
        return "only in the live copy"
    if (mine[0], mine[1]) != (theirs.version, theirs.position):
        return f"live version {mine[0]} (position {mine[1]}), replayed version {theirs.version} (position {theirs.position})"
    assert vector is not None  # every replayed memory was embedded
    apart = float(np.max(np.abs(from_bytes(mine[2]) - vector))) if len(mine[2]) == 4 * len(vector) else float("inf")
    return f"the vectors differ by {apart:.3g} in a component (tolerance {TOLERANCE:g})" if apart > TOLERANCE else ""
