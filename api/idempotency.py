"""``Idempotency-Key`` on POST and DELETE: a retry gets the first answer back.

The key is claimed in the transaction that appends the event, so a request
is either fully done (event and key) or not at all. A retry with the same
key and request replays the stored status and body; with another request it
is a 409. Only writes that happened are remembered: a request that failed
(400, 404, ...) can be retried and runs again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import Response, g, jsonify, request

from api.context import caller, services
from events.idempotency import IdempotencyClaim, IdempotencyKeyTaken, StoredOutcome
from memoryd.errors import Conflict, ValidationError

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
F = TypeVar("F", bound=Callable[..., Any])


def idempotent(rebuild: Callable[[int], tuple[Response, int]]) -> Callable[[F], F]:
    """``rebuild(position)`` recreates the answer from the log if the first attempt
    appended but died before its answer was stored."""

    def decorate(view: F) -> F:
        @wraps(view)
        def once(*args: Any, **kwargs: Any) -> Any:
            key = request.headers.get(KEY_HEADER)
            if key is None:
                return view(*args, **kwargs)
            claim = IdempotencyClaim(caller().user_id, _checked(key), _fingerprint())
            stored = services().idempotency.find(claim.user_id, claim.key)
            if stored is not None:
                return _replay(stored, claim, rebuild)
            g.idempotency_claim = claim
            try:
                response, status = view(*args, **kwargs)
            except IdempotencyKeyTaken:  # a concurrent request with this key appended first
                found = services().idempotency.find(claim.user_id, claim.key)
                if found is None:  # it expired in between: only possible with a clock jump
                    raise Conflict(f"{KEY_HEADER} {claim.key!r} is in use; retry the request") from None
                return _replay(found, claim, rebuild)
            services().idempotency.remember(claim.user_id, claim.key, status, response.get_json())
            return response, status

        return cast(F, once)

    return decorate


def _replay(stored: StoredOutcome, claim: IdempotencyClaim, rebuild: Callable[[int], tuple[Response, int]]) -> Any:
    if stored.fingerprint != claim.fingerprint:
        raise Conflict(f"{KEY_HEADER} {claim.key!r} was already used for a different request")
    if stored.status is None:
        response, status = rebuild(stored.position)
    else:
        response, status = jsonify(stored.response), stored.status
    response.headers[REPLAYED_HEADER] = "true"
    response.headers["X-Memory-Position"] = str(stored.position)
    return response, status


def _checked(key: str) -> str:
    if not 1 <= len(key) <= 255 or not key.isprintable() or not key.isascii():
        raise ValidationError(f"{KEY_HEADER} must be 1 to 255 printable ASCII characters")
    return key


def _fingerprint() -> str:
    """The request, canonically: method, path, query and JSON body (key order ignored)."""
    raw = request.get_data(cache=True)
    try:
        body = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")) if raw else ""
    except (ValueError, UnicodeDecodeError):
        body = raw.hex()
    query = sorted(request.args.items(multi=True))
    return hashlib.sha256(json.dumps([request.method, request.path, query, body]).encode()).hexdigest()
