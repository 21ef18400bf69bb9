"""Bulk import and export of memories as JSON Lines (one memory per line).

Import appends ordinary save events in batches, so imported memories have the
same history, audit trail and projections as any other. Export writes the
current memories. An exported file imports again (as new memory ids).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from commands.bus import CommandBus
from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.kernel.domain import REST_MAX_CONTENT, SCOPES, Namespace
from memoryd.kernel.errors import ValidationError
from memoryd.storage.db import Database
from projections.queries import iter_memories

EXPORTED_FIELDS = ("memory_id", "name", "description", "type", "scope", "scope_id", "content", "created", "updated")


def parse_line(line: str, number: int) -> SaveMemory:
    """One line as a save command; errors name the line and the field."""
    try:
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValidationError("each line must be a JSON object")
        return SaveMemory.validated(
            name=record.get("name"), content=record.get("content"), description=record.get("description"),
            type=record.get("type"), max_content=REST_MAX_CONTENT,
            resolve_namespace=lambda: _namespace(record.get("scope", "global"), record.get("scope_id", "")),
        )
    except ValueError as error:
        raise ValidationError(f"line {number}: not JSON: {error}") from None
    except ValidationError as error:
        raise ValidationError(f"line {number}: {error.message}") from None


def read_commands(lines: Iterable[str]) -> Iterator[SaveMemory]:
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield parse_line(line, number)


def import_memories(bus: CommandBus, lines: Iterable[str], batch_size: int = 500,
                    progress: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Save every line's memory; returns (created, updated)."""
    metadata = EventMetadata(surface="cli")
    created = updated = 0
    batch: list[SaveMemory] = []

    def flush() -> None:
        nonlocal created, updated
        outcomes = bus.handle_many(batch, metadata)
        created += sum(outcome.created for outcome in outcomes)
        updated += sum(not outcome.created for outcome in outcomes)
        if progress is not None:
            progress(len(batch))
        batch.clear()

    for command in read_commands(lines):
        batch.append(command)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return created, updated


def export_memories(database: Database, out: IO[str]) -> int:
    """Write every current memory as one JSON line (streamed); returns how many."""
    written = 0
    with database.read() as conn:
        for row in iter_memories(conn):
            out.write(json.dumps({field: row[field] for field in EXPORTED_FIELDS}, ensure_ascii=False) + "\n")
            written += 1
    return written


def _namespace(scope: Any, scope_id: Any) -> Namespace:
    if scope not in SCOPES:
        raise ValidationError(f"invalid scope: {scope}; must be one of {list(SCOPES)}")
    if not isinstance(scope_id, str):
        raise ValidationError("scope_id must be a string")
    if scope == "global" and scope_id:
        raise ValidationError("scope_id is not allowed with global scope")
    if scope != "global" and not scope_id:
        raise ValidationError(f"scope_id is required for {scope} scope")
    return Namespace(scope, scope_id)
