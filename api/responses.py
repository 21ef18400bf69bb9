"""Shaping results into response bodies."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify
from marshmallow import Schema

from commands.handlers import Outcome
from projections.queries import get_memory

from api.context import services
from api.schemas import MemoryListSchema, MemorySchema

POSITION_HEADER = "X-Memory-Position"


def respond(schema: Schema, body: Any, status: int = 200, position: int | None = None) -> tuple[Response, int]:
    response = jsonify(schema.dump(body))
    if position is not None:
        response.headers[POSITION_HEADER] = str(position)
    return response, status


def memory_list(rows: list[dict[str, Any]], total: int | None = None) -> tuple[Response, int]:
    return respond(MemoryListSchema(), {"memories": rows, "total": len(rows) if total is None else total})


def written_memory(outcome: Outcome) -> tuple[Response, int]:
    """The saved memory as the read model holds it (access counters included)."""
    with services().database.read() as conn:
        row = get_memory(conn, outcome.memory.memory_id)
    if row is None:  # the projection has not caught up yet: answer from the event itself
        row = outcome.memory.to_dict() | {"last_accessed": outcome.memory.updated, "access_count": 0}
    return respond(MemorySchema(), row, 201 if outcome.created else 200, outcome.position)
