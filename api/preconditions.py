"""Versions over HTTP: a memory's version as its ``ETag``, and ``If-Match`` as a conditional write.

A memory's version is its stream's version, the count of events its identity has had. An ``ETag`` is
that number in quotes. It names the memory's version, not the bytes of an answer: read counters
(``access_count``, ``last_accessed``) change without it. A write with ``If-Match`` appends only if the
memory is there at that version, else 412 with the version it is at (none: it does not exist); the
check is the command's, against the log, in the append's transaction.
"""

from __future__ import annotations

import re

from flask import Response, request

from memoryd.kernel.errors import ValidationError

_ONE_TAG = re.compile(r'\s*"(\d{1,18})"\s*')


def expected_version() -> int | None:
    """The version ``If-Match`` names (None without the header); one strong ETag this service gave, else 400."""
    header = request.headers.get("If-Match")
    if header is None:
        return None
    match = _ONE_TAG.fullmatch(header)
    if match is None:
        raise ValidationError('If-Match must be one ETag as memoryd gives it, a version in quotes: If-Match: "3"')
    return int(match.group(1))


def tagged(response: tuple[Response, int], version: int) -> tuple[Response, int]:
    """The response with the memory's version as its ``ETag``."""
    response[0].headers["ETag"] = etag(version)
    return response


def etag(version: int) -> str:
    return f'"{version}"'
