"""A turn request, checked field by field: a bad one is a ``ValidationError`` naming the field."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from memoryd.app.turn.conversation import Message, context_of, messages_from, newest_user_text
from memoryd.app.turn.tools import SPEC_TOOLS, ToolNames
from memoryd.kernel.errors import ValidationError

PLACEMENTS = ("system", "tail", "none")
MAX_TURN_ID = 255
MAX_CHARS = 10_000_000


def _wire(kind: str, description: str, **more: Any) -> dict[str, Any]:
    """How a field travels in JSON (``kind``) and what the OpenAPI document says of it."""
    return {"kind": kind, "description": description, **more}


@dataclass(frozen=True)
class TurnRequest:
    """What a runtime asks for a turn. Its fields are the request's one definition: ``parse`` checks a body
    against them, and ``api.turn_schemas`` describes them in the OpenAPI document from their metadata."""

    messages: tuple[Message, ...] = field(default=(), metadata=_wire(
        "messages", "the conversation so far; memoryd takes the last 3 user texts as the context"))
    query: str | None = field(default=None, metadata=_wire("string", "instead of messages: the context itself"))
    system: str = field(default="", metadata=_wire("string", "the runtime's own system prompt"))
    placement: str = field(default="system", metadata=_wire("string", "default system", enum=list(PLACEMENTS)))
    turn_id: str = field(default="", metadata=_wire(  # "" lets the composer choose one
        "string", "a retry with the same turn_id replays the recorded answer"))
    tool_visible: bool = field(default=True, metadata=_wire(
        "boolean", "whether the model sees the memory tool (default true)"))
    relevance_k: int | None = field(default=None, metadata=_wire(  # None: the configured relevance_k
        "integer", "1 to the configured memory.relevance_k"))
    max_chars: int | None = field(default=None, metadata=_wire(  # None: no budget
        "integer", "budget for the block: whole memories are dropped"))
    min_score: float = field(default=0.0, metadata=_wire(  # a memory must score above 0 and at least this
        "number", "floor on the BM25 score (default: above 0)"))
    preview: bool = field(default=False, metadata=_wire("boolean", "dry run: records, touches and charges nothing"))
    min_position: int = field(default=0, metadata=_wire("integer", "as X-Min-Position"))
    tool_names: ToolNames = field(default=SPEC_TOOLS, metadata=_wire(  # what the hint and nudges name
        "tool_names", "how the model sees the memory tool"))

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> TurnRequest:
        """From a JSON object (the HTTP body, or what an embedding caller builds)."""
        names = [known.name for known in fields(cls)]
        unknown = sorted(set(body) - set(names))
        if unknown:
            raise ValidationError(f"unknown field: {unknown[0]} (a turn takes {', '.join(names)})")
        if body.get("messages") is not None and body.get("query") is not None:
            raise ValidationError("send messages or query, not both")
        query = body.get("query")
        if query is not None and not isinstance(query, str):
            raise ValidationError("query must be a string")
        placement = _string(body, "placement", "system")
        if placement not in PLACEMENTS:
            raise ValidationError(f"placement must be one of {', '.join(PLACEMENTS)}")
        turn_id = _string(body, "turn_id", "")
        given = body.get("turn_id") is not None
        if given and (not turn_id.strip() or len(turn_id) > MAX_TURN_ID or not turn_id.isascii()
                      or not turn_id.isprintable()):
            raise ValidationError(f"turn_id must be 1 to {MAX_TURN_ID} printable ASCII characters, not blank "
                                  "(it doubles as the Idempotency-Key)")
        messages = body.get("messages")
        return cls(
            messages=tuple(messages_from(messages)) if messages is not None else (),
            query=query, system=_string(body, "system", ""), placement=placement, turn_id=turn_id,
            tool_visible=_flag(body, "tool_visible", True), relevance_k=_whole(body, "relevance_k", 1),
            max_chars=_whole(body, "max_chars", 1, MAX_CHARS), min_score=_score(body),
            preview=_flag(body, "preview", False), min_position=_whole(body, "min_position", 0) or 0,
            tool_names=ToolNames.parse(body.get("tool_names")))

    @property
    def context(self) -> str:
        return self.query.strip() if self.query is not None else context_of(self.messages)

    @property
    def newest_user_text(self) -> str:
        return self.query.strip() if self.query is not None else newest_user_text(self.messages)

    def fingerprint(self) -> str:
        """What a retry of the same ``turn_id`` must repeat (not the dry-run or consistency switches)."""
        shape: dict[str, Any] = {
            "messages": [[message.role, list(message.texts)] for message in self.messages], "query": self.query,
            "system": self.system, "placement": self.placement, "tool_visible": self.tool_visible,
            "relevance_k": self.relevance_k, "max_chars": self.max_chars, "min_score": self.min_score}
        if self.tool_names.names:  # only when given, so the turns recorded before the field replay as they did
            shape["tool_names"] = self.tool_names.to_dict()
        return hashlib.sha256(json.dumps(shape, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass"))\
            .hexdigest()


def _string(body: Mapping[str, Any], name: str, default: str) -> str:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string")
    return value


def _flag(body: Mapping[str, Any], name: str, default: bool, label: str = "") -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValidationError(f"{label or name} must be true or false")
    return value


def _whole(body: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValidationError(f"{name} must be a whole number {bound}")
    return value


def _score(body: Mapping[str, Any]) -> float:
    value = body.get("min_score")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValidationError("min_score must be a number, 0 or more")
    return float(value)


SIGNALS = ("resume", "tool_results")


@dataclass(frozen=True)
class Signal:
    """A tool-loop event: the session resumed earlier history, or a batch of tool results came back."""

    event: str
    denied: bool = False  # the user rejected a tool call in the batch
    failed: bool = False  # a tool in the batch returned an error
    tool_names: ToolNames = SPEC_TOOLS  # as in a turn: what the nudges name

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> Signal:
        unknown = sorted(set(body) - {"event", "results", "tool_names"})
        if unknown:
            raise ValidationError(f"unknown field: {unknown[0]} (a signal takes event, results and tool_names)")
        tool_names = ToolNames.parse(body.get("tool_names"))
        event = body.get("event")
        if event not in SIGNALS:
            raise ValidationError(f"event must be one of {', '.join(SIGNALS)}")
        results = body.get("results")
        if event == "resume":
            if results is not None:
                raise ValidationError("results go with event tool_results only")
            return cls(event, tool_names=tool_names)
        if not isinstance(results, list):
            raise ValidationError("results must be a list of {tool, error, denied} objects")
        for number, result in enumerate(results):
            if not isinstance(result, dict):
                raise ValidationError(f"results[{number}] must be an object with tool, error and denied")
            if not isinstance(result.get("tool", ""), str):
                raise ValidationError(f"results[{number}].tool must be a string")
        denied = [_flag(result, "denied", False, f"results[{number}].denied") for number, result in enumerate(results)]
        failed = [_flag(result, "error", False, f"results[{number}].error") for number, result in enumerate(results)]
        return cls(event, any(denied), any(failed), tool_names)
