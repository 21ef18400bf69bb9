"""The log as JSON Lines (``memoryd events export`` / ``import``): lossless, and verifiable on its own.

The first line is a header: the format, the chain's head when the export began, the positions that
never held an event, and those an erasure redacted (with the erasure's position). Every other line is
one event exactly as stored (its position, digests and hash included), in position order, up to that
head. An import into an empty database checks the
chain as it reads, so a copy that verifies is the log it was taken from.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from events.chain import CHAIN_FORMAT, Checkpoint
from events.store import EventStore
from events.types import RecordedEvent
from events.whole_log import whole_log
from memoryd.kernel.errors import ValidationError

FORMAT = 1
_FIELDS = ("position", "stream_id", "stream_version", "event_type", "schema_version", "payload", "metadata",
           "recorded_at", "payload_sha256", "hash")


def export_log(store: EventStore, target: IO[str]) -> int:
    """Write the header and every event, as one consistent read of the log saw them; the events written."""
    written = 0
    with whole_log(store) as log:  # one consistent read: the header agrees with the events
        header = {"memoryd_events": FORMAT, "chain_format": CHAIN_FORMAT,
                  "head": {"position": log.head.position, "hash": log.head.hash}, "gaps": log.gaps,
                  "erased": sorted(log.erased.items())}
        target.write(json.dumps(header) + "\n")
        for event in log.events:
            target.write(json.dumps({name: getattr(event, name) for name in _FIELDS}, ensure_ascii=True) + "\n")
            written += 1
    return written


def read_log(source: IO[str]) -> tuple[Checkpoint, list[tuple[int, int]], dict[int, int], Iterator[RecordedEvent]]:
    """The header's head, gaps and erased positions, and the events as they are read (a line that is no
    event raises)."""
    first = source.readline()
    if not first.strip():
        raise ValidationError("the file is empty: not a memoryd events export (memoryd events export writes one)")
    header = _parsed(first, 1)
    if not isinstance(header, dict) or header.get("memoryd_events") != FORMAT:
        raise ValidationError("line 1 is not a memoryd events export header (memoryd events export writes one)")
    if header.get("chain_format") != CHAIN_FORMAT:
        raise ValidationError(f"the export's chain format is {header.get('chain_format')!r}, this memoryd reads "
                              f"{CHAIN_FORMAT}")
    try:
        head = Checkpoint(int(header["head"]["position"]), str(header["head"]["hash"]))
        gaps = [(int(first), int(last)) for first, last in header["gaps"]]
        erased = {int(position): int(erased_by) for position, erased_by in header["erased"]}
    except (KeyError, TypeError, ValueError):
        raise ValidationError("line 1: the header's head, gaps or erased positions are malformed") from None
    return head, gaps, erased, _events(source)


def _events(source: IO[str]) -> Iterator[RecordedEvent]:
    for number, line in enumerate(source, start=2):
        if not line.strip():
            continue
        found = _parsed(line, number)
        if not isinstance(found, dict) or set(found) != set(_FIELDS):
            raise ValidationError(f"line {number}: an event has exactly the fields {', '.join(_FIELDS)}")
        if not (isinstance(found["payload"], dict) and isinstance(found["metadata"], dict)
                and all(isinstance(found[name], int) and not isinstance(found[name], bool)
                        for name in ("position", "stream_version", "schema_version"))
                and all(isinstance(found[name], str) for name in ("stream_id", "event_type", "recorded_at",
                                                                  "payload_sha256", "hash"))):
            raise ValidationError(f"line {number}: a field of the event has the wrong type")
        yield RecordedEvent(**found)


def _parsed(line: str, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as error:
        raise ValidationError(f"line {number} is not JSON: {error}") from None
