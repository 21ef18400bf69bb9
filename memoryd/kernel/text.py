"""What text may enter the log: encodable as UTF-8, no NUL; identifiers also no control characters.

A string that cannot be encoded as UTF-8 (a lone UTF-16 surrogate, which JSON
can spell as ``"\\ud800"``) or that holds NUL cannot be stored in a PostgreSQL
text column, nor inserted through SQLite's driver: an event carrying one would
stop every projection behind it. So text is checked where it enters, and the
message names the field.
"""

from __future__ import annotations

import re
from typing import Any

from memoryd.kernel.errors import ValidationError

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")
MAX_JSON_DEPTH = 32  # nesting a request body may have; ours needs 3


def checked_text(value: str, field: str) -> str:
    """``value`` unchanged if it can be stored; else a ValidationError naming ``field``."""
    found = _UNSTORABLE.search(value)
    if found is not None:
        raise ValidationError(f"{field} {_describe(found.group())}")
    return value


def checked_identifier(value: str, field: str) -> str:
    """Like ``checked_text``, and no control characters (names, scope ids, types, ids)."""
    checked_text(value, field)
    found = _CONTROL.search(value)
    if found is not None:
        raise ValidationError(f"{field} contains a control character (U+{ord(found.group()):04X})")
    return value


def repaired(value: str) -> str:
    """``value`` made storable: lone surrogates become U+FFFD, NUL is dropped."""
    return _UNSTORABLE.sub(lambda found: "" if found.group() == "\x00" else "\ufffd", value)


def check_document(document: Any, root: str = "") -> None:
    """Every key and string in a JSON-like document is storable; the error names its path.

    Every request body and every event passes here, so the usual case (nothing wrong) is one search over
    all the document's text at once; only a document that fails it is walked again to name the path."""
    if _UNSTORABLE.search("".join(_strings(document))) is not None:
        _name_the_unstorable(document, root)


def _strings(document: Any) -> list[str]:
    """Every key and string in ``document``, in no particular order."""
    found: list[str] = []
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(map(str, value))
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return found


def _name_the_unstorable(document: Any, root: str) -> None:
    """Walk ``document`` to the first unstorable key or string and raise the error that names its path."""
    stack = [(document, root or "body")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            checked_text(value, path)
        elif isinstance(value, dict):
            for key, item in value.items():
                checked_text(str(key), f"a key in {path}")
                stack.append((item, f"{path}.{key}" if path != "body" else str(key)))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{path}[{number}]") for number, item in enumerate(value))


def json_depth(raw: str) -> int:
    """How deeply a JSON text nests arrays and objects (brackets inside strings do not count)."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", raw)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _describe(character: str) -> str:
    if character == "\x00":
        return "contains a NUL character (U+0000)"
    return f"is not valid Unicode text: it contains a lone surrogate (U+{ord(character):04X})"
