"""The memory list's ``after`` cursor: a row's keyset (updated, memory id), opaque to callers.

It is URL-safe base64 of a JSON array, so it travels in a query string as it is; a caller only hands back
what a page's ``next_after`` gave it, and anything else is a 400, never a query with odd values.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from marshmallow import ValidationError as SchemaError
from marshmallow import fields

from memoryd.kernel.errors import ValidationError
from memoryd.kernel.text import checked_identifier
from projections.queries import Keyset

MAX_CURSOR = 512  # characters; a real one is under 100
MALFORMED = "after must be a previous page's next_after, as it was given"


def cursor_of(keyset: Keyset) -> str:
    encoded = json.dumps([keyset.updated, keyset.memory_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(encoded).decode().rstrip("=")


def keyset_of(cursor: str) -> Keyset:
    """The keyset a cursor names; ``ValidationError`` if it is not one ``cursor_of`` could have made."""
    try:
        if len(cursor) > MAX_CURSOR:
            raise ValueError(cursor)
        decoded = json.loads(base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True))
        if not (isinstance(decoded, list) and len(decoded) == 2 and all(isinstance(part, str) for part in decoded)):
            raise ValueError(cursor)
        return Keyset(checked_identifier(decoded[0], "after"), checked_identifier(decoded[1], "after"))
    except (ValueError, binascii.Error, ValidationError):  # json's and UnicodeDecodeError are ValueErrors
        raise ValidationError(MALFORMED) from None


class Cursor(fields.String):
    """``after``: empty for the first page, else a previous page's ``next_after``; loads as a ``Keyset`` or None."""

    def __init__(self) -> None:
        super().__init__(load_default=None, error_messages={"invalid": "after must be a string"}, metadata={
            "description": "the previous page's next_after (left out: the first page)"})

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:  # a Keyset, or None
        text = super()._deserialize(value, attr, data, **kwargs)
        if not text:
            return None
        try:
            return keyset_of(text)
        except ValidationError as error:
            raise SchemaError(error.message) from None
