"""The batch write's bodies (``POST /v1/api/memories/batch``): saves and deletes applied all or none."""

from __future__ import annotations

from typing import Any

from marshmallow import fields, validate

from api.answer_schemas import HistoricMemorySchema
from api.schemas import RequestSchema, SaveMemoryRequest, WholeNumber, _text, load
from memoryd.kernel.domain import REST_MAX_CONTENT, clean_content, clean_description
from memoryd.kernel.errors import ValidationError

MAX_WRITES = 1_000  # a LangGraph batch of puts is one append: room for big ones; the body limit still applies


class MemoryWriteRequest(SaveMemoryRequest):
    """One write of a batch: a save (``SaveMemoryRequest``'s fields) or a delete (name, scope, scope_id)."""

    action = _text("action", "action is required: save or delete",
                   validate=validate.OneOf(("save", "delete"), error="action must be save or delete"))
    content = _text("content", load_default=None, rule=lambda content: clean_content(content, REST_MAX_CONTENT),
                    metadata={"description": "a save's: max 65,536 characters"})
    description = _text("description", load_default=None, rule=clean_description,
                        metadata={"description": "a save's: not blank"})
    expected_version = WholeNumber(load_default=None, allow_none=True, metadata={
        "description": "write only if the memory is at this version (a batch's If-Match, per write)"})
    missing_ok = fields.Boolean(load_default=False, metadata={
        "description": "a delete's: a memory that is not there counts as deleted instead of a 404"})


class WriteMemoriesRequest(RequestSchema):
    writes = fields.List(fields.Nested(MemoryWriteRequest), required=True,
                         validate=validate.Length(1, MAX_WRITES),
                         metadata={"description": f"1 to {MAX_WRITES} saves and deletes, applied in order"})


class WrittenMemorySchema(HistoricMemorySchema):
    version = fields.Integer()


class MemoryWriteSchema(RequestSchema):
    action = fields.String(metadata={"example": "save"})
    name = fields.String()
    created = fields.Boolean(metadata={"description": "a save's: a new memory (else an update)"})
    deleted = fields.Boolean(metadata={"description": "a delete's: false when missing_ok found nothing"})
    memory = fields.Nested(WrittenMemorySchema, allow_none=True,
                           metadata={"description": "the memory as this write left it (a delete: as it was)"})


class WriteMemoriesSchema(RequestSchema):
    writes = fields.List(fields.Nested(MemoryWriteSchema))
    position = fields.Integer(allow_none=True, metadata={"description": "the batch's last event (null: no change)"})


def load_writes(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Each write validated on its own, so a refusal names it (``writes[2]: content is required``)."""
    writes = body.get("writes")
    if not isinstance(writes, list) or not 1 <= len(writes) <= MAX_WRITES:
        raise ValidationError(f"writes must be a list of 1 to {MAX_WRITES} saves and deletes")
    loaded = []
    for index, write in enumerate(writes):
        try:
            item = load(MemoryWriteRequest(), write)
            if item["action"] == "save":
                for field in ("content", "description"):
                    if item[field] is None:
                        raise ValidationError(f"{field} is required")
        except ValidationError as error:
            raise ValidationError(f"writes[{index}]: {error.message}") from None
        loaded.append(item)
    return loaded
