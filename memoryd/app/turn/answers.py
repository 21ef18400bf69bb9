"""What the composer answers, typed: a turn, the memories it injected, and a turn's receipt.

``api.turns`` turns them into HTTP bodies; an agent runtime in the same process reads them as they are.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import memoryd.app.turn.block as block
from memoryd.app.turn.nudges import Nudge
from memoryd.app.turn.tools import SPEC_TOOLS, ToolNames


@dataclass(frozen=True)
class Item:
    """One injected memory, as rendered: the version is the log position of the event it was read from."""

    memory_id: str
    name: str
    type: str
    scope: str
    score: float | None  # None when chosen by recency (no context)
    position: int



@dataclass(frozen=True)
class Turn:
    """The composer's answer: what to put in front of the model this turn (``api.turns`` makes it a body)."""

    turn_id: str | None
    turn: int | None  # the session's turn number; None for a preview or a turn that could not be recorded
    position: int  # the log position the memories were read at
    memory_enabled: bool
    placement: str
    system: str  # the runtime's own system prompt
    block: str
    hint: str
    items: list[Item]
    in_scope: int
    candidates: int
    nudges: list[Nudge]
    receipt_id: str | None = None
    degraded: str | None = None
    dropped: dict[str, int] = field(default_factory=lambda: {"floor": 0, "budget": 0})
    replayed: bool = False
    tools: ToolNames = SPEC_TOOLS  # how the model sees the memory tool (the tail message names it)

    @property
    def system_message(self) -> dict[str, str] | None:
        if self.placement != "system":
            return None
        return {"role": "system", "content": block.system_content(self.system, self.block, self.hint)}

    @property
    def tail_message(self) -> dict[str, str] | None:
        content = block.tail_content(self.block, self.hint, self.tools) if self.placement == "tail" else ""
        return {"role": "user", "content": content} if content else None

    @property
    def system_sha256(self) -> str:
        """The hash of the system message the runtime sends: composed here, or its own one left untouched."""
        message = self.system_message
        return sha256(message["content"] if message is not None else self.system)

    @property
    def block_sha256(self) -> str:
        return sha256(self.block)


@dataclass(frozen=True)
class TurnReceipt:
    """What a turn gave the model, as recorded: its block rebuilt from the log at the recorded versions and
    checked against the recorded hash (``block_matches``); ``withheld`` memories the reader may no longer see."""

    receipt_id: str
    session_id: str
    turn_id: str
    turn: int
    created: str
    position: int
    placement: str
    memory_enabled: bool
    tool_visible: bool
    in_scope: int
    candidates: int
    items: list[Item]
    nudges: list[Nudge]
    degraded: str | None
    dropped: dict[str, int]
    block: str  # empty when some memory is withheld
    withheld: int
    hint: str
    block_sha256: str
    block_matches: bool
    system_sha256: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
