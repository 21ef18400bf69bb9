"""Marshmallow schemas for every request and response body.

The same classes validate input and generate the OpenAPI document. Field
order is the order in which errors are reported: a request with several
problems gets the message of the first field listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

from marshmallow import EXCLUDE, Schema, fields, validate
from marshmallow import ValidationError as SchemaError

from api.cursors import Cursor
from api.turn_schemas import ToolNamesSchema
from events.audit import ACTION_FAMILIES
from events.types import EVENT_CLASSES
from memoryd.kernel.domain import (
    REST_MAX_CONTENT,
    clean_content,
    clean_description,
    clean_name,
    clean_type,
    clean_type_filter,
)
from memoryd.kernel.errors import ValidationError
from memoryd.kernel.text import checked_identifier

_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,19}")  # ASCII digits only: int() would also take "²" or "٣"
_INT64 = range(-(2**63), 2**63)
MAX_SEARCH_OFFSET = 10_000  # deep pages rank the top offset + limit each: bounded, as Elasticsearch bounds them
MAX_LIST_OFFSET = 10_000  # the admin list's deepest page reads offset + limit rows: past it, filter


class WholeNumber(fields.Integer):
    """A 64-bit integer given as a JSON number or a string of digits; never a bool or a fraction."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value in _INT64:
            return value
        raise self.make_error("invalid")


class DomainText(fields.String):
    """A string that the domain's ``rule`` checks and cleans, once: the loaded value is the rule's answer."""

    def __init__(self, rule: Callable[[str], Any], **options: Any) -> None:
        super().__init__(**options)
        self.rule = rule

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            return self.rule(text)
        except ValidationError as error:
            raise SchemaError(error.message) from None


def _text(field: str, required: str = "", rule: Callable[[str], Any] | None = None, **options: Any) -> fields.String:
    """A string field; ``required`` is the message for a missing value and makes it required; ``rule`` (a
    domain rule) checks and cleans it."""
    messages: dict[str, Any] = {"invalid": f"{field} must be a string"}
    if required:
        messages |= {"required": required, "null": required}
    if rule is not None:
        return DomainText(rule, required=bool(required), error_messages=messages, **options)
    return fields.String(required=bool(required), error_messages=messages, **options)


def _limit(default: int, low: int | None = None, high: int | None = None) -> WholeNumber:
    checks = [validate.Range(low, high, error=f"limit must be between {low} and {high}")] if low is not None else []
    messages: dict[str, Any] = {"invalid": "limit must be an integer", "null": "limit must be an integer"}
    return WholeNumber(load_default=default, validate=checks, error_messages=messages)


class TypeFilter(fields.String):
    """A type filter, normalized like a saved type: ``" FEEDBACK "`` filters on ``feedback``.

    ``strict``: an unknown type is a 400 (the public API); otherwise it filters
    on a type no memory has, an empty answer (the admin API, as upstream).
    """

    def __init__(self, *, strict: bool = True, **options: Any) -> None:
        super().__init__(load_default="", error_messages={"invalid": "type must be a string"}, **options)
        self.strict = strict

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            return clean_type_filter(text) if self.strict else checked_identifier(text.strip(), "type").lower()
        except ValidationError as error:
            raise SchemaError(error.message) from None


def _not_blank(field: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if not value.strip():
            raise SchemaError(f"{field} is required")

    return check


class RequestSchema(Schema):
    class Meta:
        unknown = EXCLUDE


# -- requests -----------------------------------------------------------------


class SaveMemoryRequest(RequestSchema):
    name = _text("name", "name is required (max 256 characters)", rule=clean_name,
                 metadata={"description": "snake_case name, max 256 characters"})
    content = _text("content", "content is required", rule=lambda content: clean_content(content, REST_MAX_CONTENT),
                    metadata={"description": "max 65,536 characters"})
    description = _text("description", "description is required and must be non-empty", rule=clean_description,
                        metadata={"description": "relevance summary: not blank, of any length", "minLength": 1})
    type = _text("type", load_default=None, allow_none=True, rule=clean_type, metadata={
        "description": "user, general, feedback or reference; omitted or null keeps an update's type"})
    scope = _text("scope", load_default="global", metadata={"description": "global, user or workstream"})
    scope_id = _text("scope_id", load_default="", metadata={"description": "workstream id; the caller's id for user"})


class EditMemoryRequest(RequestSchema):
    """An administrator's edit of one memory, by id: the fields given change, the others stay."""

    content = _text("content", load_default=None, rule=lambda content: clean_content(content, REST_MAX_CONTENT),
                    metadata={"description": "max 65,536 characters; omitted: kept"})
    description = _text("description", load_default=None, rule=clean_description,
                        metadata={"description": "not blank; omitted: kept", "minLength": 1})
    type = _text("type", load_default=None, rule=clean_type,
                 metadata={"description": "user, general, feedback or reference; omitted: kept"})


class ChainPageQuery(RequestSchema):
    after = WholeNumber(load_default=0, validate=validate.Range(0, 2**63 - 1, error="after must be a log position (0 or more)"),
                        error_messages={"invalid": "after must be an integer"},
                        metadata={"description": "the position the walk has verified up to (0 at the start)"})
    hash = _text("hash", load_default="", metadata={
        "description": "the chain's hash at `after`, as the previous page reached it (none at 0)"})
    limit = _limit(2000, 1, 5000)


class ListMemoriesQuery(RequestSchema):
    type = TypeFilter()
    limit = _limit(100, 1, 200)
    scope = _text("scope", load_default="")
    scope_id = _text("scope_id", load_default="")
    after = Cursor()


class SearchMemoriesRequest(RequestSchema):
    query = _text("query", "query is required", validate=_not_blank("query"))
    limit = _limit(20, 1, 50)
    offset = WholeNumber(load_default=0, validate=validate.Range(0, MAX_SEARCH_OFFSET, error=(
        f"offset must be between 0 and {MAX_SEARCH_OFFSET}")), error_messages={
        "invalid": "offset must be an integer", "null": "offset must be an integer"}, metadata={
        "description": f"hits to skip: the next page is at offset + limit (at most {MAX_SEARCH_OFFSET:,}); "
                       "each page is ranked as the index stands when it is read"})
    type = TypeFilter()
    scope = _text("scope", load_default="")
    scope_id = _text("scope_id", load_default="")


class NamedMemoryQuery(RequestSchema):
    scope = _text("scope", load_default="global")
    scope_id = _text("scope_id", load_default="")


def _as_of() -> fields.String:
    return _text("as_of", load_default="", metadata={
        "description": "answer as at this log position, or this time (ISO 8601, e.g. 2026-12-01T10:00:00Z): "
                       "built from the log; read counts are as each write left them"})


class AsOfQuery(RequestSchema):
    as_of = _as_of()


class AdminFilterQuery(RequestSchema):
    type = TypeFilter(strict=False)
    scope = _text("scope", load_default="")
    scope_id = _text("scope_id", load_default="")
    as_of = _as_of()


class AdminListQuery(AdminFilterQuery):
    limit = _limit(100)
    offset = WholeNumber(load_default=0, validate=validate.Range(0, MAX_LIST_OFFSET, error=(
        f"offset must be between 0 and {MAX_LIST_OFFSET}")), error_messages={
        "invalid": "offset must be an integer", "null": "offset must be an integer"}, metadata={
        "description": "memories to skip, newest first: a page's start (a deep page costs what it skips)"})


class AdminSearchQuery(AdminFilterQuery):
    q = _text("q", "q is required", validate=_not_blank("q"))
    limit = _limit(20)


class AuditQuery(RequestSchema):
    action = _text("action", load_default="",
                   validate=validate.OneOf(["", *EVENT_CLASSES, *ACTION_FAMILIES], error="action must be one of {choices}"),
                   metadata={"description": "an action, or a family of them: memory.*, identity.* (users, tokens and "
                                            "sessions), project.*, ..."})
    actor = _text("actor", load_default="")
    memory_id = _text("memory_id", load_default="")
    project_id = _text("project_id", load_default="")
    after = WholeNumber(load_default=0, validate=validate.Range(0, 2**63 - 1, error="after must be a log position (0 or more)"),
                        error_messages={"invalid": "after must be an integer"})
    since = _text("since", load_default="", metadata={
        "description": "an ISO 8601 time: only records from then on (with `after`, whichever is later)"})
    limit = _limit(100, 1, 1000)


class EventsQuery(RequestSchema):
    after = WholeNumber(load_default=0, validate=validate.Range(0, 2**63 - 1, error="after must be a log position (0 or more)"),
                        error_messages={"invalid": "after must be an integer"})
    limit = _limit(100, 1, 1000)


class ReceiptsQuery(RequestSchema):
    after = WholeNumber(load_default=0, validate=validate.Range(0, 2**31 - 1, error="after must be a turn number (0 or more)"),
                        error_messages={"invalid": "after must be an integer"})
    limit = _limit(50, 1, 200)


class MemoryTurnsQuery(RequestSchema):
    limit = _limit(20, 1, 100)


class RestoreMemoryRequest(RequestSchema):
    version = WholeNumber(required=True, validate=validate.Range(1, 2**63 - 1, error="version must be 1 or more"),
                          error_messages={"required": "version is required", "invalid": "version must be an integer",
                                          "null": "version must be an integer"},
                          metadata={"description": "the version to bring back, as the memory's history lists it"})


class CreateProjectRequest(RequestSchema):
    name = _text("name", "name is required")
    owner = _text("owner", "owner is required", metadata={"description": "the owning user's id"})


class GrantAccessRequest(RequestSchema):
    access = _text("access", "access is required", metadata={"description": "read or write"})


class CreateSessionRequest(RequestSchema):
    kind = _text("kind", "kind is required", validate=validate.OneOf(["interactive", "coordinator"],
                                                                      error="kind must be interactive or coordinator"))
    workstream_id = _text("workstream_id", "workstream_id is required")
    user_id = _text("user_id", load_default=None, allow_none=True, metadata={"description": "absent: anonymous"})
    parent_session_id = _text("parent_session_id", load_default=None, allow_none=True,
                              metadata={"description": "a coordinator's child names its parent"})


class CreateWorkstreamRequest(RequestSchema):
    name = _text("name", load_default="")
    owner = _text("owner", "owner is required")
    project_id = _text("project_id", load_default=None, allow_none=True)
    persona = fields.Dict(load_default=None, allow_none=True, metadata={"description": '{"memory": true|false}'})


class WorkstreamChangeRequest(RequestSchema):
    project_id = _text("project_id", load_default=None, allow_none=True, metadata={"description": "null detaches"})
    persona = fields.Dict(load_default=None, allow_none=True)


class ToolCallSchema(Schema):
    """The memory tool's arguments, as the spec lists them."""

    action = fields.String(required=True, metadata={"description": "save, get, search, delete or list"})
    name = fields.String()
    content = fields.String()
    description = fields.String()
    type = fields.String()
    scope = fields.String(metadata={"description": "omitted: the inherited target (save/get/delete) or the envelope"})
    query = fields.String()
    limit = fields.Integer(metadata={"description": "default 20, capped at 50"})
    expected_version = fields.Integer(metadata={"description": "save or delete only if the memory is at this "
                                                               "version (get shows it); else ok is false"})
    tool_names = fields.Nested(ToolNamesSchema, metadata={
        "description": "the memory tool as the model sees it, which the answers name (as a turn's tool_names)"})


class ErasurePreviewQuery(RequestSchema):
    user_id = _text("user_id", load_default=None)
    memory_id = _text("memory_id", load_default=None)
    scope = _text("scope", load_default=None)
    scope_id = _text("scope_id", load_default=None)


class ErasureRequest(ErasurePreviewQuery):
    reason = _text("reason", "reason is required (a request's reference, say): it stays in the log")


def load(schema: Schema, data: Any) -> dict[str, Any]:
    """Validate ``data``; report the first problem, in field order, as our ValidationError."""
    try:
        return cast(dict[str, Any], schema.load(data))
    except SchemaError as error:
        messages: dict[str, Any] = error.normalized_messages()  # type: ignore[no-untyped-call]
        field = next((name for name in schema.fields if name in messages), next(iter(messages)))
        message = _first(messages[field])
        raise ValidationError(message if field in message else f"{field}: {message}") from None


def _first(message: Any) -> str:
    while isinstance(message, (list, dict)):
        message = next(iter(message.values())) if isinstance(message, dict) else message[0]
    return str(message)
