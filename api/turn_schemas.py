"""Schemas of the turn routes, for the OpenAPI document (``memoryd.app.turn.request`` checks the bodies; the
turn request's schema is made from its dataclass, so the request has one definition)."""

from __future__ import annotations

import dataclasses
from typing import Any

from marshmallow import Schema, fields

from memoryd.app.turn import TurnRequest


class MessageSchema(Schema):
    role = fields.String(required=True, metadata={"description": "user, assistant, system, developer, tool or function"})
    content = fields.Raw(metadata={"description": "a string, or a list of parts: {type: text, text} parts and bare "
                                                  "strings count, other parts are ignored"})


def _tool_name(action: str) -> fields.String:
    return fields.String(metadata={"description": f"the tool the model calls to {action}",
                                   "pattern": "^[A-Za-z0-9_.-]{1,128}$", "example": f"memory_{action}"})


class ToolNamesSchema(Schema):
    """The memory tool's names as the model sees them (``memoryd.app.turn.tools``)."""

    save = _tool_name("save")
    get = _tool_name("get")
    search = _tool_name("search")
    delete = _tool_name("delete")
    list = _tool_name("list")


def _tool_names() -> fields.Nested:
    return fields.Nested(ToolNamesSchema, metadata={
        "description": "the memory tool as the model sees it, which the hint and the nudges name: each action "
                       'mapped to its tool ({"search": "memory_search", ...} for one tool per verb). An action left '
                       "out is the spec's memory(action=...); a name given to several actions is one tool taking "
                       "action. Default: the spec's one memory tool"})


def _described(request: type[TurnRequest]) -> type[Schema]:
    """The OpenAPI schema of a request, from its dataclass's fields (their metadata says how they travel)."""
    kinds = {"string": fields.String, "boolean": fields.Boolean, "integer": fields.Integer, "number": fields.Float}
    made: dict[str, fields.Field[Any]] = {}
    for known in dataclasses.fields(request):
        kind, description = known.metadata["kind"], {k: v for k, v in known.metadata.items() if k != "kind"}
        if kind == "messages":
            made[known.name] = fields.List(fields.Nested(MessageSchema), metadata=description)
        elif kind == "tool_names":
            made[known.name] = _tool_names()
        else:
            made[known.name] = kinds[kind](metadata=description)
    return Schema.from_dict(made, name=f"{request.__name__}Schema")


TurnRequestSchema = _described(TurnRequest)


class ItemSchema(Schema):
    memory_id = fields.String()
    name = fields.String()
    type = fields.String()
    scope = fields.String()
    score = fields.Float(allow_none=True, metadata={"description": "null when chosen by recency (no context)"})
    position = fields.Integer(metadata={"description": "log position of the version rendered"})


class NudgeSchema(Schema):
    type = fields.String(metadata={"enum": ["start", "correction", "completion", "resume", "denial", "tool_error"]})
    text = fields.String()
    deliver = fields.String(metadata={"enum": ["after_user", "after_tool_results"]})


class ChatMessageSchema(Schema):
    role = fields.String()
    content = fields.String()


class DroppedSchema(Schema):
    floor = fields.Integer()
    budget = fields.Integer()


class TurnSchema(Schema):
    turn_id = fields.String(allow_none=True)
    turn = fields.Integer(allow_none=True, metadata={"description": "the session's turn number; null on preview"})
    position = fields.Integer()
    memory_enabled = fields.Boolean()
    placement = fields.String()
    block = fields.String()
    hint = fields.String()
    system_message = fields.Nested(ChatMessageSchema, allow_none=True)
    tail_message = fields.Nested(ChatMessageSchema, allow_none=True)
    items = fields.List(fields.Nested(ItemSchema))
    in_scope = fields.Integer(metadata={"description": "every memory the session can see"})
    candidates = fields.Integer()
    nudges = fields.List(fields.Nested(NudgeSchema))
    receipt_id = fields.String(allow_none=True)
    degraded = fields.String(allow_none=True)
    dropped = fields.Nested(DroppedSchema)
    block_sha256 = fields.String()
    system_sha256 = fields.String()
    replayed = fields.Boolean()


class ReceiptSchema(Schema):
    receipt_id = fields.String()
    session_id = fields.String()
    turn_id = fields.String()
    turn = fields.Integer()
    created = fields.String()
    position = fields.Integer()
    placement = fields.String()
    memory_enabled = fields.Boolean()
    tool_visible = fields.Boolean()
    in_scope = fields.Integer()
    candidates = fields.Integer()
    items = fields.List(fields.Nested(ItemSchema))
    nudges = fields.List(fields.Nested(NudgeSchema))
    degraded = fields.String(allow_none=True)
    dropped = fields.Nested(DroppedSchema)
    block = fields.String(metadata={"description": "rebuilt from the log at the recorded versions; empty when "
                                                   "some of them are withheld"})
    withheld = fields.Integer(metadata={"description": "memories this session can no longer see, left out"})
    hint = fields.String()
    block_sha256 = fields.String()
    block_matches = fields.Boolean(metadata={"description": "the rebuilt block has the recorded sha256"})
    system_sha256 = fields.String()


class ReceiptPageSchema(Schema):
    receipts = fields.List(fields.Nested(ReceiptSchema))
    next_after = fields.Integer(metadata={"description": "pass as after for the next page"})


class ReceiptListSchema(Schema):
    receipts = fields.List(fields.Nested(ReceiptSchema), metadata={"description": "newest first"})


class ToolOutcomeSchema(Schema):
    tool = fields.String()
    error = fields.Boolean()
    denied = fields.Boolean()


class SignalRequestSchema(Schema):
    event = fields.String(required=True, metadata={"enum": ["resume", "tool_results"]})
    results = fields.List(fields.Nested(ToolOutcomeSchema), metadata={"description": "with tool_results"})
    tool_names = _tool_names()


class SignalAnswerSchema(Schema):
    nudges = fields.List(fields.Nested(NudgeSchema))
