"""``Idempotency-Key`` on every POST and DELETE that writes: a retry gets the first answer back.

The key is claimed before the request runs, so concurrent retries of one
request wait (bounded) for the first attempt's answer and replay it instead
of deciding for themselves. A write's key records its event's position in
the transaction that appends it (a route that creates a resource without an
event stores its answer in the transaction that creates it), so a request
either happened completely (its change and its key) or not at all. A retry with the same key and request replays
the stored status and body; with another request it is a 409. A request that
failed without writing (400, 404, ...) gives the key back: its retry runs
again. A retry of a request still running waits for its answer, briefly, then
is a 409 ``request_in_progress`` with ``Retry-After``: the same key later gets
the answer (a permanent conflict has no ``code``). A claim whose attempt is
gone (its process died) is taken over once its lease runs out, within seconds
(``events.idempotency.LEASE``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import Response, g, jsonify, request
from sqlalchemy import Connection

from api.context import NestedTooDeep, caller, parse_json, services
from api.preconditions import etag
from events.idempotency import IdempotencyClaim, IdempotencyKeyTaken, StoredOutcome
from memoryd.kernel.errors import Conflict, ValidationError
from memoryd.kernel.text import checked_identifier

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
WAIT_FOR_HOLDER = 2.0  # seconds a retry waits for the attempt holding its key to answer, holding a thread
F = TypeVar("F", bound=Callable[..., Any])
Rebuild = Callable[[int], tuple[Response, int]]


class StillRunning(Conflict):
    """The attempt holding the key has not answered yet: retry the same request, with the same key, later."""

    code = "request_in_progress"

    def __init__(self, key: str, retry_after: int) -> None:
        super().__init__(f"{KEY_HEADER} {key!r} is held by a request that is still running; "
                         f"retry with the same key in {retry_after} s")
        self.retry_after = retry_after


def idempotent(rebuild: Rebuild | None = None) -> Callable[[F], F]:
    """``rebuild(position)`` recreates the answer from the log if the first attempt
    appended but died before its answer was stored (routes that append events)."""

    def decorate(view: F) -> F:
        @wraps(view)
        def once(*args: Any, **kwargs: Any) -> Any:
            key = request.headers.get(KEY_HEADER)
            if key is None:
                return view(*args, **kwargs)
            claim = IdempotencyClaim(_key_owner(), checked_key(key), _fingerprint())
            while True:
                held = _claim_or_holder(claim)
                if held is not None:
                    return _replay(held, claim, rebuild)
                g.idempotency_claim = claim
                erasures_before = services().idempotency.erasure_mark()
                try:
                    with services().idempotency.leased(claim):
                        response, status = view(*args, **kwargs)
                except IdempotencyKeyTaken:  # our claim was taken over meanwhile: answer as its holder does
                    continue
                except BaseException:
                    services().idempotency.release(claim)
                    raise
                services().idempotency.remember(claim, status, response.get_json(), erasures_before)
                return response, status

        return cast(F, once)

    return decorate


def answered_within(conn: Connection, status: int, body: Any) -> None:
    """Store the request's answer in the transaction that creates its resource (routes with no event)."""
    claim = g.get("idempotency_claim")
    if claim is not None:
        services().idempotency.answer(conn, claim, status, body)


def _claim_or_holder(claim: IdempotencyClaim) -> StoredOutcome | None:
    """None once ``claim`` holds the key; else the answered outcome of the attempt that holds it."""
    deadline = time.monotonic() + WAIT_FOR_HOLDER  # the holder is a request running now: milliseconds
    delay = 0.005
    while True:
        held = _take(claim)
        if held is None or held.fingerprint != claim.fingerprint or held.answered:
            return held
        if time.monotonic() >= deadline:  # its lease runs out by then unless its attempt renews it
            left = held.lease_left(dt.datetime.now(dt.UTC)).total_seconds()
            raise StillRunning(claim.key, max(1, math.ceil(left)))
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _take(claim: IdempotencyClaim) -> StoredOutcome | None:
    """Claim the key (None), take over an abandoned claim (None), or what holds it now."""
    keys = services().idempotency
    held = keys.take(claim)
    if held is not None and not held.answered and held.fingerprint == claim.fingerprint \
            and held.lease_left(dt.datetime.now(dt.UTC)) < dt.timedelta(0) and keys.take_over(claim, held):
        return None
    return held


def _replay(stored: StoredOutcome, claim: IdempotencyClaim, rebuild: Rebuild | None) -> Any:
    if stored.fingerprint != claim.fingerprint:
        raise Conflict(f"{KEY_HEADER} {claim.key!r} was already used for a different request")
    if stored.status is not None:
        response, status = jsonify(stored.response), stored.status
    elif stored.position is not None and rebuild is not None:
        response, status = rebuild(stored.position)
    else:  # appended, but this route cannot rebuild its answer (not reachable: such routes pass rebuild)
        raise Conflict(f"{KEY_HEADER} {claim.key!r}: the first attempt's answer was lost; use a new key")
    response.headers[REPLAYED_HEADER] = "true"
    body = stored.response if stored.status is not None else None
    if isinstance(body, dict) and "memory_id" in body and isinstance(body.get("version"), int):
        response.headers["ETag"] = etag(body["version"])  # as the first answer had it
    if stored.position is not None:
        response.headers["X-Memory-Position"] = str(stored.position)
    return response, status


def _key_owner() -> str:
    """Keys are per caller: the token's user, or on the memory tool's route the session."""
    session = g.get("session")
    return session.session_id if session is not None else caller().user_id


def checked_key(key: str) -> str:
    if not 1 <= len(key) <= 255 or not key.isprintable() or not key.isascii():
        raise ValidationError(f"{KEY_HEADER} must be 1 to 255 printable ASCII characters")
    return checked_identifier(key, KEY_HEADER)


def _fingerprint() -> str:
    """The request, canonically: method, path, query, ``If-Match`` and JSON body (key order ignored; other
    bodies as bytes)."""
    raw = request.get_data(cache=True)
    try:
        body = json.dumps(parse_json(raw), sort_keys=True, separators=(",", ":")) if raw else ""
    except NestedTooDeep:
        raise
    except ValidationError:
        body = raw.hex()
    query = sorted(request.args.items(multi=True))
    condition = request.headers.get("If-Match")
    request_parts = [request.method, request.path, query, body] + ([condition] if condition is not None else [])
    return hashlib.sha256(json.dumps(request_parts).encode()).hexdigest()
