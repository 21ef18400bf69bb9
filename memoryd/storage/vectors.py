"""The semantic channel's vectors of every model at once. Erasure's reach into them: they can be inverted back
into text, so an erased memory's rows of every model leave in the erasure's own transaction
(``commands/erasure.py``), not when the vectors projection later applies the erase event. And the models held:
a change of model leaves the old one's vectors until an operator drops them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, func, select

from memoryd.storage.schema import memory_vectors, projection_checkpoints

VECTORS_PREFIX = "memory_vectors:"  # the vectors projections' names: one per model
AT_ONCE = 500  # ids per statement: databases cap bound parameters


def erase_vectors(conn: Connection, memory_ids: Sequence[str]) -> int:
    """Delete every model's vectors of ``memory_ids``; how many rows went. The vectors projections' checkpoints
    are locked first, so a catch-up that embedded these memories before the erasure either commits before it
    (and its rows go here) or after it (and sees the erasure: ``projections.vector_catch_up``)."""
    conn.execute(select(projection_checkpoints.c.name)
                 .where(projection_checkpoints.c.name.startswith(VECTORS_PREFIX)).with_for_update()).all()
    return sum(conn.execute(delete(memory_vectors).where(memory_vectors.c.memory_id.in_(memory_ids[first:first + AT_ONCE])))
               .rowcount for first in range(0, len(memory_ids), AT_ONCE))


def count_vectors(conn: Connection, memory_ids: Sequence[str]) -> int:
    """Rows of any model held for ``memory_ids``."""
    return sum(int(conn.execute(select(func.count()).select_from(memory_vectors)
                                .where(memory_vectors.c.memory_id.in_(memory_ids[first:first + AT_ONCE]))).scalar_one())
               for first in range(0, len(memory_ids), AT_ONCE))


def vectors_by_model(conn: Connection) -> dict[str, int]:
    """How many vectors the database holds of each model."""
    counted = select(memory_vectors.c.model, func.count()).group_by(memory_vectors.c.model).order_by(memory_vectors.c.model)
    return {model: int(count) for model, count in conn.execute(counted).all()}


def drop_model(conn: Connection, model: str, checkpoint: str) -> int:
    """Delete every vector of ``model`` and its projection's ``checkpoint``; how many vectors went."""
    conn.execute(delete(projection_checkpoints).where(projection_checkpoints.c.name == checkpoint))
    return int(conn.execute(delete(memory_vectors).where(memory_vectors.c.model == model)).rowcount)
