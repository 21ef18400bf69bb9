"""Shaping results into response bodies."""

from __future__ import annotations

import logging
from typing import Any

from flask import Response, jsonify
from marshmallow import Schema
from sqlalchemy.exc import SQLAlchemyError

from api.answer_schemas import DeletedSchema, MemorySchema, StatusSchema
from api.batch_schemas import WriteMemoriesSchema
from api.consistency import PENDING_HEADER, STOPPED_HEADER, settle, stopped_before
from api.context import services
from api.preconditions import tagged
from commands.handlers import Outcome
from commands.model import DeleteMemory, SaveMemory
from events.types import MemoryDeleted, MemoryEvent, MemorySaved, RecordedEvent
from memoryd.kernel.errors import StorageError
from projections.queries import get_memory

POSITION_HEADER = "X-Memory-Position"
MEMORY_FIELDS = tuple(MemorySchema().fields)
log = logging.getLogger(__name__)


def respond(schema: Schema, body: Any, status: int = 200) -> tuple[Response, int]:
    return jsonify(schema.dump(body)), status


def memory_list(rows: list[dict[str, Any]], total: int | None = None) -> tuple[Response, int]:
    """``MemoryListSchema``'s body: each row cut to ``MemorySchema``'s fields (rows already hold their types), and
    a search hit's ``score``.

    The schema still defines the fields (and the OpenAPI document); dumping 20 rows through marshmallow
    cost 140 µs of a search, a dict per row costs 7.
    """
    return jsonify(_listed(rows, total)), 200


def memory_page(rows: list[dict[str, Any]], next_after: str | None) -> tuple[Response, int]:
    """``MemoryPageSchema``'s body: a page of the list, and the cursor of the next (None: this is the last)."""
    return jsonify(_listed(rows) | {"next_after": next_after}), 200


def _listed(rows: list[dict[str, Any]], total: int | None = None) -> dict[str, Any]:
    return {"memories": [{field: row[field] for field in MEMORY_FIELDS} | ({"score": row["score"]} if "score" in row else {})
                         for row in rows],
            "total": len(rows) if total is None else total}


def written_memory(outcome: Outcome) -> tuple[Response, int]:
    """The memory exactly as this write left it (its event), with the read model's access count (none yet for a
    memory this write created: no read for it).

    Never the read model's row itself: another writer may already have changed it.
    """
    projected = settle(outcome.position, outcome.projected)
    row = _projected_row(outcome.memory.memory_id) if projected and not outcome.created else None
    body = outcome.memory.to_dict() | {"last_accessed": outcome.memory.updated,
                                       "access_count": row["access_count"] if row else 0, "version": outcome.version}
    response = _written(MemorySchema(), body, 201 if outcome.created else 200, outcome.position, projected)
    return tagged(response, outcome.version)


def deleted_memory(outcome: Outcome) -> tuple[Response, int]:
    body = {"status": "ok", "name": outcome.memory.name}
    return _written(DeletedSchema(), body, 200, outcome.position, settle(outcome.position, outcome.projected))


def deleted_by_id(outcome: Outcome) -> tuple[Response, int]:
    return _written(StatusSchema(), {"status": "ok"}, 200, outcome.position,
                    settle(outcome.position, outcome.projected))


def written_batch(commands: list[SaveMemory | DeleteMemory], outcomes: list[Outcome | None]) -> tuple[Response, int]:
    """Each write's outcome in order (a delete that found nothing: ``deleted`` false), and the last position."""
    writes = [_batch_write(command.name, outcome, isinstance(command, DeleteMemory))
              for command, outcome in zip(commands, outcomes)]
    written = [outcome for outcome in outcomes if outcome is not None]
    position = max((outcome.position for outcome in written), default=None)
    return _batch_answer(writes, position, any(outcome.projected for outcome in written))


def batch_at(position: int) -> tuple[Response, int]:
    """Recreate a batch's answer from the log (an idempotent replay): the events its request appended, which end
    at ``position``."""
    last = services().store.event_at(position)
    if last is None:
        raise StorageError(f"the event at position {position} is missing from the log")
    outcomes: list[tuple[Outcome, bool]] = []
    recorded: RecordedEvent | None = last
    while recorded is not None and recorded.metadata.get("request_id") == last.metadata.get("request_id"):
        event = recorded.to_domain()
        if not isinstance(event, MemoryEvent):
            break
        outcomes.insert(0, (Outcome(event.memory, isinstance(event, MemorySaved), recorded.position,
                                    recorded.stream_version), isinstance(event, MemoryDeleted)))
        recorded = services().store.event_at(recorded.position - 1) if recorded.position > 1 else None
    return _batch_answer([_batch_write(outcome.memory.name, outcome, deleted) for outcome, deleted in outcomes],
                         position)


def _batch_write(name: str, outcome: Outcome | None, delete: bool) -> dict[str, Any]:
    if outcome is None:
        return {"action": "delete", "name": name, "deleted": False, "memory": None}
    memory = outcome.memory.to_dict() | {"version": outcome.version}
    if delete:
        return {"action": "delete", "name": name, "deleted": True, "memory": memory}
    return {"action": "save", "name": name, "created": outcome.created, "memory": memory}


def _batch_answer(writes: list[dict[str, Any]], position: int | None, projected: bool = False
                  ) -> tuple[Response, int]:
    body = {"writes": writes, "position": position}
    if position is None:
        return jsonify(body), 200
    return _written(WriteMemoriesSchema(), body, 200, position, settle(position, projected))


def outcome_at(position: int) -> Outcome:
    """Recreate a write's outcome from its event (for an idempotent replay)."""
    recorded = services().store.event_at(position)
    if recorded is None:
        raise StorageError(f"the event at position {position} is missing from the log")
    event = recorded.to_domain()
    if not isinstance(event, MemoryEvent):
        raise StorageError(f"the event at position {position} is not a memory event")
    return Outcome(event.memory, created=isinstance(event, MemorySaved), position=position,
                   version=recorded.stream_version)


def _projected_row(memory_id: str) -> dict[str, Any] | None:
    try:
        with services().database.read() as conn:
            return get_memory(conn, memory_id)
    except SQLAlchemyError:  # the write is durable; the read model's trouble must not hide that
        log.exception("could not read memory %s back from the read model", memory_id)
        return None


def _written(schema: Schema, body: Any, status: int, position: int, projected: bool) -> tuple[Response, int]:
    response, status = respond(schema, body, status)
    response.headers[POSITION_HEADER] = str(position)
    if not projected:
        response.headers[PENDING_HEADER] = "true"
        if stopped := stopped_before(position):
            response.headers[STOPPED_HEADER] = stopped
    return response, status
