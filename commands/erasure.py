"""Erasing memories on request (a person's right to erasure): the one command that changes the log.

In one transaction: the memories the selector names are found in the log, one ``memory.erase`` event
records who erased which memories and positions (and why; never what they said), every event of those
memories has its payload replaced by a content-free stub and its stream id (which holds the memory's
name) by a digest, and the idempotency answers that could give them back are forgotten, as are the memories'
vectors (of every embedding model). The chain
commits to those digests, which stay, so it still verifies; projections take the memories out when
they apply the erase event.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from commands.handlers import Claim, Dependencies
from events.erasure import events_of, memories_selected
from events.idempotency import IdempotencyKeys
from events.redaction import redact
from events.transaction import AppendTransaction
from events.types import EventMetadata, MemoriesErased
from memoryd.kernel.domain import SCOPES
from memoryd.kernel.errors import NotFound, ValidationError
from memoryd.kernel.text import checked_text
from memoryd.storage.vectors import erase_vectors

SELECTORS = ({"user_id"}, {"memory_id"}, {"scope", "scope_id"})


@dataclass(frozen=True)
class EraseMemories:
    selector: dict[str, str]  # one of SELECTORS' shapes
    reason: str


@dataclass(frozen=True)
class ErasureOutcome:
    erasure: MemoriesErased
    position: int
    idempotency_keys_forgotten: int


def erase_memories(tx: AppendTransaction, command: EraseMemories, metadata: EventMetadata, deps: Dependencies,
                   claim: Claim = None) -> ErasureOutcome:
    """In the command's transaction ``tx``: found, recorded, redacted together."""
    selector, reason = checked(command)
    deps.store.hold_appends(tx)  # no write to these memories can land between finding and redacting them
    memory_ids = memories_selected(tx.conn, selector)
    if not memory_ids:
        raise NotFound("nothing to erase: no memory in the log matches (an erased memory is found no more)")
    targets = events_of(tx.conn, memory_ids)
    erasure = MemoriesErased(memory_ids, sorted(targets), selector, reason)
    position = deps.store.append(f"erasure:{uuid.uuid4()}", 0, [erasure], metadata, claim, tx=tx)
    redact(tx.conn, position, targets)
    forgotten = IdempotencyKeys.forget(tx.conn, sorted(targets), memory_ids)
    erase_vectors(tx.conn, memory_ids)  # now, not when the vectors projection gets there: they can be turned back into text
    return ErasureOutcome(erasure, position, forgotten)


def checked(command: EraseMemories) -> tuple[dict[str, str], str]:
    """The selector and reason, trimmed and checked (a ValidationError says what is wrong)."""
    selector = {key: checked_text(value, key).strip() if isinstance(value, str) else value
                for key, value in command.selector.items()}
    if set(selector) not in SELECTORS or not all(isinstance(value, str) for value in selector.values()):
        raise ValidationError("name what to erase: a user_id, a memory_id, or a scope with its scope_id")
    if any(not value for key, value in selector.items() if key != "scope_id"):
        raise ValidationError(f"{next(key for key, value in selector.items() if not value)} must not be empty")
    if "scope" in selector:
        if selector["scope"] not in SCOPES:
            raise ValidationError(f"scope must be one of {', '.join(SCOPES)}")
        if (selector["scope"] == "global") != (selector["scope_id"] == ""):
            raise ValidationError("scope_id is empty for the global scope and required for every other scope")
    reason = checked_text(command.reason, "reason").strip()
    if not reason:
        raise ValidationError("a reason is required (a request's reference, say): it stays in the log")
    return selector, reason

