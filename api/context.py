"""Per-request helpers: the services, the caller, the JSON body, event metadata."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar, cast

from flask import current_app, g, request

from api.metrics import Metrics
from events.idempotency import IdempotencyClaim
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.errors import Forbidden, Refused, Unauthorized, ValidationError
from memoryd.kernel.text import MAX_JSON_DEPTH, check_document, json_depth
from memoryd.storage.directory import INVALID, Principal

ADMIN_PERMISSION = "admin.memories"
F = TypeVar("F", bound=Callable[..., Any])


def services() -> Services:
    return cast(Services, current_app.extensions["memoryd"])


def metrics() -> Metrics:
    return cast(Metrics, current_app.extensions["memoryd.metrics"])


def caller() -> Principal:
    return cast(Principal, g.principal)


def authorized(scope: str, *, admin: bool = False) -> Callable[[F], F]:
    """Require a valid bearer token holding ``scope`` (and admin rights when asked)."""

    def decorate(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            g.principal = admin_caller(scope) if admin else _authenticate()
            if not g.principal.has_scope(scope):
                raise Forbidden(f"Forbidden: token lacks '{scope}' scope")
            return view(*args, **kwargs)

        return cast(F, guarded)

    return decorate


def admin_caller(scope: str = "write") -> Principal:
    """The bearer token's caller, who must be an admin (``service`` or the admin permission) holding ``scope``."""
    principal = _authenticate()
    if not (principal.has_scope("service") or principal.has_permission(ADMIN_PERMISSION)):
        raise Forbidden(f"Forbidden: missing '{ADMIN_PERMISSION}' permission")
    if not principal.has_scope(scope):
        raise Forbidden(f"Forbidden: token lacks '{scope}' scope")
    return principal


def json_object(*, checked: bool = True) -> dict[str, Any]:
    """The request's JSON object; with ``checked``, every string in it is storable text.

    The memory tool's route passes ``checked=False``: the tool checks its own
    arguments and answers ``ok: false`` instead of a 400.
    """
    body = parse_json(request.get_data(cache=True))
    if not isinstance(body, dict):
        raise ValidationError("Request body must be a JSON object")
    if checked:
        check_document(body)
    return body


class NestedTooDeep(ValidationError):
    """A body no request needs, and one that would exhaust the parser's recursion."""


def parse_json(raw: bytes) -> Any:
    """A JSON body, nested at most ``MAX_JSON_DEPTH`` deep."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError("Invalid JSON body") from None
    if json_depth(text) > MAX_JSON_DEPTH:
        raise NestedTooDeep(f"Invalid JSON body: nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except ValueError:
        raise ValidationError("Invalid JSON body") from None


def writing(surface: str) -> tuple[EventMetadata, IdempotencyClaim | None]:
    """What a command run for this request carries: who and how (``surface``), and its idempotency claim."""
    return event_metadata(surface), g.get("idempotency_claim")


CONSOLE_HEADER = "X-Memoryd-Surface"
CONSOLE = "console"
RELABELLED = frozenset({"rest", "admin"})  # what a console's request may say it came through instead


def event_metadata(surface: str) -> EventMetadata:
    principal = caller()
    return EventMetadata(
        actor_user_id=principal.user_id,
        token_id=principal.token_id,
        surface=recorded_surface(surface),
        client_ip=request.remote_addr or "",
        request_id=g.request_id,
    )


def recorded_surface(surface: str) -> str:
    """``console`` when the web console sent the request (``X-Memoryd-Surface: console``) through the REST or
    admin API, else ``surface``. A label only: the actor is still the token's, no other value is taken, and a
    tool, CLI or session write keeps its own surface."""
    if surface in RELABELLED and request.headers.get(CONSOLE_HEADER, "").strip().lower() == CONSOLE:
        return CONSOLE
    return surface


def bearer_token() -> str:
    """The token of an ``Authorization: Bearer <token>`` header, or ""."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


UNKNOWN = "Unauthorized: missing or invalid token"  # what a missing or unknown token is told: nothing more


def _authenticate() -> Principal:
    """The token's caller, in one indexed read (a revoked or expired token, a deactivated user: a 401 naming
    why, on every API process at once); each refusal counted in ``/metrics`` by its reason."""
    token = bearer_token()
    if not token:
        refused("missing")
    try:
        return services().directory.verify(token)
    except Refused as refusal:
        refused(refusal.reason)


def refused(reason: str) -> NoReturn:
    """Count an authentication failure and answer 401: "missing" and "invalid token" say only that."""
    metrics().auth_failures.labels(reason).inc()
    if reason in ("missing", INVALID):
        raise Unauthorized(UNKNOWN)
    raise Refused(reason)
