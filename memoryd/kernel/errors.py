"""One error family for the whole service.

Each error knows the HTTP status it maps to, so the API turns any of them
into ``{"error": message}`` in one place and bad input never becomes a 500. An
error a client should simply retry names itself in ``code`` and says when in
``retry_after`` (the answer's ``Retry-After``).
"""


class MemorydError(Exception):
    """Base class: ``message`` is safe to show to a client."""

    status = 500
    code: str | None = None  # a stable name for an answer clients act on (``"code"`` in the body)
    retry_after: int | None = None  # seconds: the same request later may succeed

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ValidationError(MemorydError):
    status = 400


class Unauthorized(MemorydError):
    status = 401


class Refused(Unauthorized):
    """A credential memoryd knows but will not take now; ``reason`` says why ("token revoked", "token expired",
    "user deactivated", "session closed"). An unknown one is "invalid token", which reveals nothing."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Unauthorized: {reason}")
        self.reason = reason


class Forbidden(MemorydError):
    status = 403


class NotFound(MemorydError):
    status = 404


class Conflict(MemorydError):
    status = 409


class VersionMismatch(MemorydError):
    """A conditional write (``If-Match``, ``expected_version``) found the memory at another version: nothing
    was appended. ``current`` is the memory's version now (None: there is no such memory)."""

    status = 412

    def __init__(self, expected: int, current: int | None) -> None:
        found = "no such memory" if current is None else f"it is at version {current}"
        super().__init__(f"the memory is not at version {expected}: {found}; read it again and retry")
        self.expected = expected
        self.current = current


class StorageError(MemorydError):
    """The database failed; never reported to clients as a miss."""

    status = 500


class DatabaseUnavailable(MemorydError):
    """The database cannot be used: it cannot be reached or opened, its URL is wrong, or it does not exist
    where a command that never creates one looked. The message names the URL, its password masked.
    To a client: the same request may succeed in a moment (a database restarting)."""

    status = 503
    code = "database_unavailable"
    retry_after = 1


class ConfigError(MemorydError):
    """An invalid configuration value; the message names the key."""
