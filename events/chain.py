r"""The log's hash chain: every event commits to the one before it, so an edited, removed or reordered
event is found by walking the log (``memoryd audit verify``).

The canonical bytes (chain format 1, documented in docs/architecture.md):

* ``canonical(value)``: JSON, keys sorted, no whitespace, every non-ASCII character as a ``\u`` escape
  (so the bytes are ASCII, lone surrogates included), no NaN or infinities;
* ``payload_sha256 = sha256(canonical(payload))`` and ``stream_sha256 = sha256(stream_id as UTF-8)``, hex;
* ``hash = sha256(canonical([position, stream_sha256, stream_version, event_type, schema_version,
  payload_sha256, metadata, recorded_at, previous_hash]))``, hex, where ``previous_hash`` is the
  hash of the event at the next lower position, or 64 zeros for the first.

The chain commits to digests of the payload and of the stream id (which names a memory), not to
them: an erasure replaces the payload with a content-free stub and the stream id with
``erased:<erasure position>:<stream_sha256>``, keeps the payload's digest, and the chain still verifies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from events.types import ErasedEvent, RecordedEvent
from memoryd.kernel.errors import ValidationError

CHAIN_FORMAT = 1
GENESIS = "0" * 64
ERASED_STREAM = "erased:"  # the prefix of an erased event's stream id


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def payload_digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(payload)).hexdigest()


def stream_digest(stream_id: str) -> str:
    """What the chain commits to of a stream id: its SHA-256, or for an erased event the one its id keeps."""
    if stream_id.startswith(ERASED_STREAM):
        return stream_id.rsplit(":", 1)[-1]
    return hashlib.sha256(stream_id.encode("utf-8", "surrogatepass")).hexdigest()


def erased_stream_id(stream_id: str, erased_by: int) -> str:
    """The stream id an erased event keeps: the erasure's position and the digest, not the name."""
    return f"{ERASED_STREAM}{erased_by}:{stream_digest(stream_id)}"


def link(previous_hash: str, position: int, row: dict[str, Any]) -> str:
    """The hash of the event ``row`` (the store's row, ``payload_sha256`` included) at ``position``."""
    return hashlib.sha256(canonical([
        position, stream_digest(row["stream_id"]), row["stream_version"], row["event_type"], row["schema_version"],
        row["payload_sha256"], row["meta"], row["recorded_at"], previous_hash])).hexdigest()


def check_storable(value: Any, what: str) -> None:
    """Refuse a float anywhere in ``value``: PostgreSQL's ``jsonb`` gives some back changed (``1e16`` as an
    integer, ``-0.0`` as ``0``), and the digest computed now would then not match the stored event."""
    if isinstance(value, float):
        raise ValidationError(f"{what} holds the number {value!r}: events hold no floats (their stored form can change)")
    if isinstance(value, dict):
        for item in value.values():
            check_storable(item, what)
    elif isinstance(value, list):
        for item in value:
            check_storable(item, what)


def chained(previous_hash: str, first_position: int, rows: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``rows`` (the store's rows) at consecutive positions from ``first_position``, sealed: position,
    payload digest and hash added. A float in a payload or metadata is refused (``check_storable``)."""
    for offset, row in enumerate(rows):
        check_storable([row["payload"], row["meta"]], f"the {row['event_type']} event")
        position = first_position + offset
        sealed = row | {"position": position, "payload_sha256": payload_digest(row["payload"])}
        sealed["hash"] = previous_hash = link(previous_hash, position, sealed)
        yield sealed


def stored_row(event: RecordedEvent) -> dict[str, Any]:
    """``event`` as the store's row, which the chain hashes."""
    return {"stream_id": event.stream_id, "stream_version": event.stream_version, "event_type": event.event_type,
            "schema_version": event.schema_version, "payload": event.payload, "meta": event.metadata,
            "recorded_at": event.recorded_at, "payload_sha256": event.payload_sha256}


@dataclass(frozen=True)
class Checkpoint:
    """A position and the chain's hash there: published elsewhere, it pins the log up to that point."""

    position: int
    hash: str

    def __str__(self) -> str:
        return f"{self.position}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        position, _, digest = text.strip().partition(":")
        if not position.isdigit() or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"a checkpoint is POSITION:HASH (as `memoryd audit checkpoint` prints it), not {text!r}")
        return cls(int(position), digest)


@dataclass(frozen=True)
class Break:
    """Where the chain stops holding: the first bad position and what is wrong there."""

    position: int
    reason: str


@dataclass(frozen=True)
class Verdict:
    events: int
    head: Checkpoint
    broken: Break | None

    @property
    def ok(self) -> bool:
        return self.broken is None


def verify(log: Iterable[RecordedEvent], head: Checkpoint, gaps: Iterable[tuple[int, int]] = (),
           since: Checkpoint | None = None, erased: dict[int, int] | None = None) -> Verdict:
    """Walk ``log`` (in the order stored) and check every digest, hash and position, then that the walk
    ends at ``head`` (the store's record of the highest position taken and its hash).

    ``gaps``: ``(first, last)`` ranges of positions known never to have held an event (found when the
    chain was first computed). ``since``: a checkpoint the walk must pass through unchanged.
    ``erased``: positions an erasure redacted -> that erasure's position; such an event's payload is its
    stub, and its digest is taken as stored (the erasure event itself is checked like any other).
    Constant memory: nothing is kept but the previous event's position and hash.
    """
    allowed = dict(gaps)
    reached = Checkpoint(0, GENESIS)
    count, passed_since = 0, since is None
    for event in log:
        if (broken := _check(event, reached, allowed, (erased or {}).get(event.position))) is not None:
            return Verdict(count, reached, broken)
        if since is not None and reached.position < since.position <= event.position:
            if event.position != since.position:
                return Verdict(count, reached, Break(since.position, "the checkpoint's position holds no event"))
            if event.hash != since.hash:
                return Verdict(count, reached,
                               Break(since.position, "the hash here is not the checkpoint's: the log was rewritten"))
            passed_since = True
        reached, count = Checkpoint(event.position, event.hash), count + 1
    if (ended := end_of_the_log(reached, head, allowed)) is not None:
        return Verdict(count, reached, ended)
    if not passed_since:
        assert since is not None
        return Verdict(count, reached,
                       Break(since.position, f"the log ends at position {reached.position}, before the checkpoint"))
    return Verdict(count, reached, None)


def end_of_the_log(reached: Checkpoint, head: Checkpoint, gaps: dict[int, int]) -> Break | None:
    """Where a walk that read the last event (``reached``) fails the head, the store's record of the highest
    position taken and its hash; None when it ends there."""
    ends_in_a_gap = gaps.get(reached.position + 1) == head.position  # the newest positions never held one
    if (reached.position != head.position and not ends_in_a_gap) or reached.hash != head.hash:
        return Break(min(reached.position, head.position) + 1, (
            f"missing: the log ends at position {reached.position}, its head at {head.position}"
            if head.position > reached.position else
            f"the head records position {head.position} and hash {head.hash[:12]}…, the log ends at "
            f"{reached.position} with {reached.hash[:12]}… (a head moved back, or events past it)"))
    return None


def verify_segment(log: Iterable[RecordedEvent], start: Checkpoint, gaps: Iterable[tuple[int, int]] = (),
                   erased: dict[int, int] | None = None) -> Verdict:
    """Walk ``log``, the events after ``start`` (a position and the hash the walk reached there), and check
    each as ``verify`` does: one page of a walk that is resumed from where the last page stopped, so a
    caller can show its progress and no request walks the whole log."""
    allowed = dict(gaps)
    reached, count = start, 0
    for event in log:
        if (broken := _check(event, reached, allowed, (erased or {}).get(event.position))) is not None:
            return Verdict(count, reached, broken)
        reached, count = Checkpoint(event.position, event.hash), count + 1
    return Verdict(count, reached, None)


def _check(event: RecordedEvent, after: Checkpoint, gaps: dict[int, int], erased_by: int | None) -> Break | None:
    if event.position <= after.position:
        return Break(event.position, f"out of order: position {event.position} comes after {after.position}")
    first_missing = after.position + 1
    if event.position != first_missing and gaps.get(first_missing) != event.position - 1:
        missing = f"{first_missing}" if event.position == first_missing + 1 else f"{first_missing}-{event.position - 1}"
        return Break(first_missing, f"missing: position {missing} holds no event and is no recorded gap")
    stub = ErasedEvent.of(event.payload)
    if erased_by is not None and (stub is None or stub.erased_by != erased_by
                                  or not event.stream_id.startswith(f"{ERASED_STREAM}{erased_by}:")):
        return Break(event.position, f"the erasure at position {erased_by} redacted this event, which is no stub")
    if erased_by is None and event.stream_id.startswith(ERASED_STREAM):
        return Break(event.position, "an erased stream id where no erasure redacted: the event was changed")
    if erased_by is None and payload_digest(event.payload) != event.payload_sha256:
        return Break(event.position, "the payload does not match its digest: it was changed")
    if link(after.hash, event.position, stored_row(event)) != event.hash:
        return Break(event.position, "the hash does not match: this event, or the hash it follows, was changed")
    return None
