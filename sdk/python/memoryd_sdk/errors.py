"""Errors: one base for every answer memoryd refused, one for a server that could not be reached."""

from __future__ import annotations

from typing import Any


class MemorydError(Exception):
    """Anything this SDK raises."""


class MemorydAPIError(MemorydError):
    """memoryd answered with an error status; ``message`` is its ``error`` (else ``detail``, else the text)."""

    def __init__(self, status_code: int, message: str, body: Any = None) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code, self.message, self.body = status_code, message, body
        self.code: str | None = body.get("code") if isinstance(body, dict) else None  # memoryd's name for it

    def __str__(self) -> str:
        return f"HTTP {self.status_code}: {self.message}"


class BadRequestError(MemorydAPIError):
    """400: the request was invalid; the message names the field."""


class AuthenticationError(MemorydAPIError):
    """401: no token, or one memoryd does not know."""


class PermissionDeniedError(MemorydAPIError):
    """403: the token may not do this."""


class NotFoundError(MemorydAPIError):
    """404."""


class ConflictError(MemorydAPIError):
    """409: an idempotency key or turn id reused for another request, or a concurrent write won."""


class RequestInProgressError(MemorydAPIError):
    """409 ``request_in_progress``: the call's earlier attempt still holds its idempotency key (retried until
    ``retry_deadline`` before it is raised). Not a ``ConflictError``: nothing conflicts, it has not finished."""


class RequestTooLargeError(MemorydAPIError):
    """413."""


class RateLimitError(MemorydAPIError):
    """429."""


class NotCaughtUpError(MemorydAPIError):
    """503: the read model has not reached the position a read asked for (retried before it is raised)."""


class DatabaseUnavailableError(MemorydAPIError):
    """503 ``database_unavailable``: memoryd cannot reach its database just now (retried until
    ``retry_deadline`` before it is raised)."""


class ServerError(MemorydAPIError):
    """500 and other 5xx."""


class APIConnectionError(MemorydError):
    """memoryd could not be reached (after the retries)."""


class APITimeoutError(APIConnectionError):
    """memoryd did not answer in time (after the retries)."""


_BY_STATUS: dict[int, type[MemorydAPIError]] = {
    400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
    409: ConflictError, 413: RequestTooLargeError, 429: RateLimitError, 503: NotCaughtUpError,
}
_BY_CODE: dict[Any, type[MemorydAPIError]] = {
    "request_in_progress": RequestInProgressError, "database_unavailable": DatabaseUnavailableError,
}


def api_error(status_code: int, body: Any, text: str) -> MemorydAPIError:
    """The error for an answer: the class by status, the message as the reference SDK takes it."""
    message = ""
    if isinstance(body, dict):
        message = str(body.get("error") or body.get("detail") or "")
    code = body.get("code") if isinstance(body, dict) else None
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status_code, ServerError if status_code >= 500 else MemorydAPIError)
    return cls(status_code, message or text[:200], body)
