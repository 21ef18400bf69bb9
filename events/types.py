"""The events of the log: past-tense facts with a schema version.

Every memory event carries the whole memory after the change; a delete
carries the row it removed. Every project event carries the whole project
after the change (and the member it concerned). So a projection never has to
read anything but the event, and the audit record is exactly what the client
was told.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from memoryd.kernel.domain import Memory
from memoryd.kernel.projects import Project

MEMORY_EVENTS, PROJECT_EVENTS = "memory.", "project."  # the prefixes of each family's event types
MEMORY_SAVED = "memory.save"
MEMORY_UPDATED = "memory.update"
MEMORY_DELETED = "memory.delete"


@dataclass(frozen=True)
class MemoryEvent:
    """Base for the three memory events; ``event_type`` names the subclass."""

    event_type: ClassVar[str]
    schema_version: ClassVar[int] = 1
    memory: Memory

    def payload(self) -> dict[str, Any]:
        return {"memory": self.memory.to_dict()}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> MemoryEvent:
        return cls(memory=Memory.from_dict(payload["memory"]))


@dataclass(frozen=True)
class MemorySaved(MemoryEvent):
    """A memory was created."""

    event_type: ClassVar[str] = MEMORY_SAVED


@dataclass(frozen=True)
class MemoryUpdated(MemoryEvent):
    """An existing memory was upserted (same id, new fields)."""

    event_type: ClassVar[str] = MEMORY_UPDATED


@dataclass(frozen=True)
class MemoryDeleted(MemoryEvent):
    """A memory was removed; ``memory`` is the row that was removed."""

    event_type: ClassVar[str] = MEMORY_DELETED


@dataclass(frozen=True)
class ProjectEvent:
    """Base for project events; ``member`` is the user a grant or revoke concerned."""

    event_type: ClassVar[str]
    schema_version: ClassVar[int] = 1
    project: Project
    member: str = ""

    def payload(self) -> dict[str, Any]:
        return {"project": self.project.to_dict(), "member": self.member}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ProjectEvent:
        return cls(project=Project.from_dict(payload["project"]), member=payload.get("member", ""))


@dataclass(frozen=True)
class ProjectCreated(ProjectEvent):
    event_type: ClassVar[str] = "project.create"


@dataclass(frozen=True)
class ProjectAccessGranted(ProjectEvent):
    """A member got access, or their access level changed."""

    event_type: ClassVar[str] = "project.grant"


@dataclass(frozen=True)
class ProjectAccessRevoked(ProjectEvent):
    event_type: ClassVar[str] = "project.revoke"


@dataclass(frozen=True)
class ProjectArchived(ProjectEvent):
    event_type: ClassVar[str] = "project.archive"


@dataclass(frozen=True)
class ProjectReactivated(ProjectEvent):
    event_type: ClassVar[str] = "project.reactivate"


@dataclass(frozen=True)
class ProjectDeleted(ProjectEvent):
    """The project is gone; its memories were deleted by memory.delete events in the same append."""

    event_type: ClassVar[str] = "project.delete"


@dataclass(frozen=True)
class EventSuperseded:
    """An operator replaced the event at ``position``, which a projection could not apply.

    Projections that fail on that event apply ``replacement`` (an event type
    and payload) in its place; the original stays in the log untouched, and
    this event records who replaced it, when and why.
    """

    event_type: ClassVar[str] = "event.supersede"
    schema_version: ClassVar[int] = 1
    position: int
    reason: str
    replacement: dict[str, Any]  # {"event_type": ..., "payload": {...}}

    def payload(self) -> dict[str, Any]:
        return {"position": self.position, "reason": self.reason, "replacement": self.replacement}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> EventSuperseded:
        return cls(position=int(payload["position"]), reason=str(payload["reason"]), replacement=payload["replacement"])

    def stand_in(self, original: RecordedEvent) -> RecordedEvent:
        """The replacement, recorded where the original is (its position, stream and version)."""
        cls = EVENT_CLASSES[self.replacement["event_type"]]
        return replace(original, event_type=cls.event_type, schema_version=cls.schema_version,
                       payload=self.replacement["payload"])


@dataclass(frozen=True)
class MemoriesErased:
    """Memories erased on request: every event of theirs at ``positions`` (and what superseded one) had its
    payload replaced by a content-free record, and ``memory_ids`` leave every read model. Holds no content:
    who asked is in the metadata, what they asked for in ``selector``."""

    event_type: ClassVar[str] = "memory.erase"
    schema_version: ClassVar[int] = 1
    memory_ids: list[str]
    positions: list[int]
    selector: dict[str, str]  # {"user_id": ...}, {"memory_id": ...} or {"scope": ..., "scope_id": ...}
    reason: str

    def payload(self) -> dict[str, Any]:
        return {"memory_ids": self.memory_ids, "positions": self.positions, "selector": self.selector,
                "reason": self.reason}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> MemoriesErased:
        return cls([str(memory_id) for memory_id in payload["memory_ids"]],
                   [int(position) for position in payload["positions"]], dict(payload["selector"]),
                   str(payload["reason"]))


@dataclass(frozen=True)
class ErasedEvent:
    """What an event whose payload an erasure replaced decodes to: nothing of the memory but its id."""

    erased_by: int  # the erasure event's position
    memory_id: str

    @staticmethod
    def stub(erased_by: int, memory_id: str) -> dict[str, Any]:
        """The payload that replaces an erased event's: the chain keeps the original's digest."""
        return {"erased": {"by": erased_by, "memory_id": memory_id}}

    @classmethod
    def of(cls, payload: Any) -> ErasedEvent | None:
        """The erased event this payload is the stub of; None for any other payload."""
        if not isinstance(payload, dict) or set(payload) != {"erased"} or not isinstance(payload["erased"], dict):
            return None
        erased = payload["erased"]
        return cls(int(erased.get("by", 0)), str(erased.get("memory_id", "")))


@dataclass(frozen=True)
class IdentityEvent:
    """A change in the lifecycle of a user, a token or a session, for the audit trail alone.

    The directory's tables hold the identities (and the credentials); these events record who changed
    them, when and why, appended in the same transaction as the change (``memoryd/app/identities.py``).
    No projection applies them. They never hold a secret, a hash or a token's prefix.
    """

    event_type: ClassVar[str]
    schema_version: ClassVar[int] = 1
    user_id: str  # the user concerned (a token's or a session's user; "" for an anonymous session)
    token_id: str = ""
    session_id: str = ""
    name: str = ""  # a user's or a token's name
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)  # a token's scopes, permissions and expiry; a session's

    def payload(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "token_id": self.token_id, "session_id": self.session_id,
                "name": self.name, "reason": self.reason, "details": self.details}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> IdentityEvent:
        return cls(str(payload["user_id"]), str(payload.get("token_id", "")), str(payload.get("session_id", "")),
                   str(payload.get("name", "")), str(payload.get("reason", "")), dict(payload.get("details") or {}))

    def stream_id(self) -> str:
        """One stream per identity: ``user:<id>``, ``token:<id>`` or ``session:<id>``."""
        kind = self.event_type.partition(".")[0]
        return f"{kind}:{self.session_id or self.token_id or self.user_id}"


@dataclass(frozen=True)
class UserCreated(IdentityEvent):
    event_type: ClassVar[str] = "user.create"


@dataclass(frozen=True)
class UserDeactivated(IdentityEvent):
    event_type: ClassVar[str] = "user.deactivate"


@dataclass(frozen=True)
class UserReactivated(IdentityEvent):
    event_type: ClassVar[str] = "user.reactivate"


@dataclass(frozen=True)
class TokenCreated(IdentityEvent):
    event_type: ClassVar[str] = "token.create"


@dataclass(frozen=True)
class TokenRevoked(IdentityEvent):
    event_type: ClassVar[str] = "token.revoke"


@dataclass(frozen=True)
class SessionOpened(IdentityEvent):
    """A session was opened, with its kind, workstream and parent (never its token) in ``details``."""

    event_type: ClassVar[str] = "session.open"


@dataclass(frozen=True)
class SessionClosed(IdentityEvent):
    """A session was closed: by its own token, an admin, the operator, for idleness, or with its coordinator."""

    event_type: ClassVar[str] = "session.close"


IDENTITY_EVENTS = (UserCreated, UserDeactivated, UserReactivated, TokenCreated, TokenRevoked, SessionOpened,
                   SessionClosed)
DomainEvent = MemoryEvent | ProjectEvent | EventSuperseded | MemoriesErased | IdentityEvent
EVENT_CLASSES: dict[str, type[MemoryEvent] | type[ProjectEvent] | type[EventSuperseded] | type[MemoriesErased]
                    | type[IdentityEvent]] = {
    cls.event_type: cls
    for cls in (MemorySaved, MemoryUpdated, MemoryDeleted, ProjectCreated, ProjectAccessGranted, ProjectAccessRevoked,
                ProjectArchived, ProjectReactivated, ProjectDeleted, EventSuperseded, MemoriesErased, *IDENTITY_EVENTS)
}


@dataclass(frozen=True)
class EventMetadata:
    """Who caused an event and through which door."""

    actor_user_id: str = ""
    token_id: str = ""
    surface: str = "rest"  # rest | admin | console | tool | cli
    client_ip: str = ""
    request_id: str = ""
    session_id: str = ""  # the memory tool's session, and its workstream
    workstream_id: str = ""

    def to_dict(self) -> dict[str, str]:
        return {
            "actor_user_id": self.actor_user_id,
            "token_id": self.token_id,
            "surface": self.surface,
            "client_ip": self.client_ip,
            "request_id": self.request_id,
            "session_id": self.session_id,
            "workstream_id": self.workstream_id,
        }


@dataclass(frozen=True)
class RecordedEvent:
    """An event as the log stores it, with its global position."""

    position: int
    stream_id: str
    stream_version: int
    event_type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: dict[str, Any]
    recorded_at: str
    payload_sha256: str = ""  # the chain's (events/chain.py); empty for an event not read from the log
    hash: str = ""

    def to_domain(self) -> DomainEvent | ErasedEvent:
        """The event this code reads it as; an erased one as ``ErasedEvent``, whatever its type was."""
        if (erased := ErasedEvent.of(self.payload)) is not None:
            return erased
        cls = EVENT_CLASSES.get(self.event_type)
        if cls is None or self.schema_version != cls.schema_version:
            raise UnknownEvent(f"no decoder for {self.event_type} v{self.schema_version} at position {self.position}")
        try:
            return cls.from_payload(self.payload)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise UnreadableEvent(f"the {self.event_type} event at position {self.position} is malformed: "
                                  f"{type(error).__name__}: {error}") from error


class UnknownEvent(Exception):
    """The log holds an event this code cannot read; projecting must stop, not skip."""


class UnreadableEvent(UnknownEvent):
    """The log holds an event of a known type whose payload does not decode."""


def superseded_stream_id(position: int) -> str:
    """The stream of the one event that may supersede the event at ``position``."""
    return f"superseded:{position}"


def project_stream_id(project_id: str) -> str:
    return f"project:{project_id}"


def memory_stream_id(name: str, scope: str, scope_id: str) -> str:
    """One stream per identity ``(name, scope, scope_id)``, unambiguous whatever the characters."""
    return "memory:" + json.dumps([scope, scope_id, name], ensure_ascii=False, separators=(",", ":"))
