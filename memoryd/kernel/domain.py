"""Domain rules for memories: the vocabulary, normalization and validation.

Pure functions and frozen values with no I/O, shared by commands (which
enforce them), the API (which reports them) and projections (which store the
values they produce).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from typing import Any

from memoryd.kernel.errors import ValidationError
from memoryd.kernel.text import checked_identifier, checked_text

MEMORY_TYPES = ("feedback", "general", "reference", "user")
SCOPES = ("global", "workstream", "user", "coordinator", "project")
PUBLIC_SCOPES = ("global", "user", "workstream")
DEFAULT_TYPE = "general"
MAX_NAME_LENGTH = 256
REST_MAX_CONTENT = 65_536
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S"


@dataclass(frozen=True)
class Memory:
    """A memory as the log records it and clients see it."""

    memory_id: str
    name: str
    description: str
    type: str
    scope: str
    scope_id: str
    content: str
    created: str
    updated: str

    def to_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in _MEMORY_FIELDS}  # not asdict: it deep-copies every string

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Memory:
        return cls(**{field: str(data[field]) for field in cls.__dataclass_fields__})


_MEMORY_FIELDS = tuple(field.name for field in fields(Memory))


def normalize_name(raw: str) -> str:
    """Strip, lowercase, and turn ``-`` and spaces into ``_`` (the spec's rule, nothing more).

    Every lookup by name goes through here, so a name saved as ``" Padded "``
    is found, and deleted, as ``padded`` whichever way it is spelled.
    """
    return raw.strip().lower().replace("-", "_").replace(" ", "_")


def clean_name(raw: Any) -> str:
    """A name as a save, get or delete receives it: normalized, required, at most 256 characters."""
    name = normalize_name(checked_identifier(_text(raw, "name").strip(), "name"))
    if not name or len(name) > MAX_NAME_LENGTH:
        raise ValidationError(f"name is required (max {MAX_NAME_LENGTH} characters)")
    return name


def clean_content(raw: Any, max_content: int) -> str:
    content = checked_text(_text(raw, "content"), "content").strip()
    if not content:
        raise ValidationError("content is required")
    if len(content) > max_content:
        raise ValidationError(f"content exceeds {max_content} character limit")
    return content


def clean_description(raw: Any) -> str:
    description = checked_text(_text(raw, "description"), "description").strip()
    if not description:
        raise ValidationError("description is required and must be non-empty")
    return description


def clean_type(raw: Any) -> str | None:
    """A memory type, or None when unset (a new memory then gets ``general``)."""
    if raw is None:
        return None
    memory_type = checked_identifier(_text(raw, "type").strip(), "type").lower()
    if memory_type not in MEMORY_TYPES:
        raise ValidationError(f"invalid type: {raw}; must be one of {list(MEMORY_TYPES)}")
    return memory_type


def clean_type_filter(raw: Any) -> str:
    """A type filter for list and search: ``""`` means no filter."""
    memory_type = checked_identifier(_text(raw, "type").strip(), "type").lower()
    if memory_type and memory_type not in MEMORY_TYPES:
        raise ValidationError(f"invalid type: {raw}")
    return memory_type


def utc_timestamp(moment: dt.datetime | None = None) -> str:
    """The spec's timestamp: UTC, second precision, no zone suffix."""
    moment = moment or dt.datetime.now(dt.UTC)
    return moment.astimezone(dt.UTC).strftime(TIMESTAMP_FORMAT)


def _text(raw: Any, field: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ValidationError(f"{field} must be a string")
    return raw


@dataclass(frozen=True)
class Namespace:
    """Where a memory lives: its scope and the id that qualifies it."""

    scope: str
    scope_id: str
