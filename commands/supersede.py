"""Superseding an event that projections cannot apply: the operator's way out of a stopped projection.

The log is never edited. An ``event.supersede`` event, one per position (its
own stream, version 1), names the event and carries a replacement that
projections apply in its place: the original with its unstorable text
repaired, or a payload the operator supplies. The replacement must decode,
hold only storable text and belong to the same stream as the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commands.handlers import Claim, Dependencies
from events.store import ConcurrencyConflict
from events.transaction import AppendTransaction
from events.types import (
    EVENT_CLASSES,
    EventMetadata,
    EventSuperseded,
    MemoryEvent,
    ProjectEvent,
    RecordedEvent,
    UnknownEvent,
    memory_stream_id,
    project_stream_id,
    superseded_stream_id,
)
from memoryd.kernel.errors import Conflict, NotFound, ValidationError
from memoryd.kernel.text import check_document, checked_text, repaired


@dataclass(frozen=True)
class SupersedeEvent:
    """Replace, for projections, the event at ``position``; ``replacement`` None repairs its text."""

    position: int
    reason: str
    replacement: dict[str, Any] | None = None  # {"event_type": ..., "payload": {...}}


@dataclass(frozen=True)
class SupersedeOutcome:
    superseded: EventSuperseded
    position: int


def supersede_event(tx: AppendTransaction, command: SupersedeEvent, metadata: EventMetadata, deps: Dependencies,
                    claim: Claim = None) -> SupersedeOutcome:
    original = deps.store.event_at(command.position, tx)
    if original is None:
        raise NotFound(f"no event at position {command.position}")
    if original.event_type == EventSuperseded.event_type:
        raise ValidationError("a supersede event cannot itself be superseded")
    reason = checked_text(command.reason, "reason").strip()
    if not reason:
        raise ValidationError("a reason is required: it is the audit trail of this change")
    replacement = command.replacement if command.replacement is not None else _repaired(original)
    superseding = EventSuperseded(command.position, reason, replacement)
    _check_replacement(superseding, original)
    try:
        position = deps.store.append(superseded_stream_id(command.position), 0, [superseding], metadata, claim, tx=tx)
    except ConcurrencyConflict:
        raise Conflict(f"the event at position {command.position} is already superseded") from None
    return SupersedeOutcome(superseding, position)


def _repaired(original: RecordedEvent) -> dict[str, Any]:
    """The original with lone surrogates turned into U+FFFD and NUL removed."""
    cleaned = _clean(original.payload)
    if cleaned == original.payload:
        raise ValidationError(f"the event at position {original.position} holds no unstorable text to repair; "
                              "supply a replacement payload")
    return {"event_type": original.event_type, "payload": cleaned}


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return repaired(value)
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _check_replacement(superseding: EventSuperseded, original: RecordedEvent) -> None:
    replacement = superseding.replacement
    if not isinstance(replacement, dict) or set(replacement) != {"event_type", "payload"}:
        raise ValidationError('the replacement must be {"event_type": ..., "payload": {...}}')
    if replacement["event_type"] not in EVENT_CLASSES or replacement["event_type"] == EventSuperseded.event_type:
        raise ValidationError(f"unknown replacement event type: {replacement['event_type']!r}")
    check_document(replacement["payload"], "replacement")
    try:
        event = superseding.stand_in(original).to_domain()
    except UnknownEvent as error:
        raise ValidationError(f"the replacement does not decode: {error}") from None
    stream = None
    if isinstance(event, MemoryEvent):
        stream = memory_stream_id(event.memory.name, event.memory.scope, event.memory.scope_id)
    elif isinstance(event, ProjectEvent):
        stream = project_stream_id(event.project.project_id)
    if stream != original.stream_id:
        raise ValidationError(f"the replacement belongs to stream {stream}, the original to {original.stream_id}")
