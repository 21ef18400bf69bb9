"""Response models: pydantic, read by attribute (``m.name``) or by key (``m["name"]``), as the spec's examples do.

Unknown fields are kept (a newer server may send more); ``position`` is the log
position a write answered in ``X-Memory-Position``, when it did.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(extra="allow")

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields and key not in (self.model_extra or {}):
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def keys(self) -> list[str]:
        return list(self.model_dump())


class MemoryInfo(Model):
    memory_id: str
    name: str
    description: str = ""
    type: str = "general"
    scope: str = "global"
    scope_id: str = ""
    content: str = ""
    created: str = ""
    updated: str = ""
    last_accessed: str = ""
    access_count: int = 0
    version: int = 0  # the memory's version: its ETag in REST answers
    position: int | None = None
    score: float | None = None  # a search hit's BM25 score


AdminMemoryInfo = MemoryInfo


class ListMemoriesResponse(Model):
    memories: list[MemoryInfo]
    total: int = 0
    next_after: str | None = None  # the public list's: pass as ``after`` for the next page (None: the last page)

    def __iter__(self) -> Iterator[MemoryInfo]:  # type: ignore[override]  # iterate the memories, not the fields
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)


class MemoryWrite(Model):
    """One write of a batch as it was applied: a save (``created``) or a delete (``deleted``: False when
    ``missing_ok`` found nothing); ``memory`` as the write left it (a delete's: as it was)."""

    action: str
    name: str
    created: bool | None = None
    deleted: bool | None = None
    memory: MemoryInfo | None = None


class WriteResult(Model):
    writes: list[MemoryWrite]
    position: int | None = None  # the batch's last event (None: it changed nothing)


class StatusResponse(Model):
    status: str = "ok"
    name: str | None = None
    position: int | None = None


class ProjectMember(Model):
    user_id: str
    access: str


class ProjectInfo(Model):
    project_id: str
    name: str
    owner: str
    state: str
    members: list[ProjectMember] = []
    created: str = ""
    updated: str = ""


class WorkstreamInfo(Model):
    workstream_id: str
    name: str
    owner: str | None = None
    project_id: str | None = None
    persona: dict[str, Any] = {}


class SessionInfo(Model):
    session_id: str
    token: str = ""
    kind: str
    user_id: str | None = None
    workstream_id: str
    project_id: str | None = None
    parent_session_id: str | None = None


class ToolResult(Model):
    ok: bool
    text: str
    error: str | None = None
    memory: MemoryInfo | None = None
    memories: list[MemoryInfo] | None = None


class Nudge(Model):
    type: str
    text: str
    deliver: str


class TurnItem(Model):
    memory_id: str
    name: str
    type: str
    scope: str
    score: float | None = None
    position: int


class TurnContext(Model):
    """What to put in front of the model this turn (``memoryd``'s ``POST .../turns``)."""

    turn_id: str | None = None
    turn: int | None = None
    position: int = 0
    memory_enabled: bool = True
    placement: str = "system"
    block: str = ""
    hint: str = ""
    system_message: dict[str, str] | None = None
    tail_message: dict[str, str] | None = None
    items: list[TurnItem] = []
    in_scope: int = 0
    candidates: int = 0
    nudges: list[Nudge] = []
    receipt_id: str | None = None
    degraded: str | None = None
    dropped: dict[str, int] = {}
    block_sha256: str = ""
    system_sha256: str = ""
    replayed: bool = False


class Receipt(Model):
    receipt_id: str
    session_id: str
    turn_id: str
    turn: int
    created: str
    position: int
    placement: str
    memory_enabled: bool
    tool_visible: bool
    in_scope: int
    candidates: int
    items: list[TurnItem]
    nudges: list[Nudge]
    degraded: str | None = None
    block: str
    withheld: int = 0
    hint: str
    block_sha256: str
    block_matches: bool
    system_sha256: str


class ReceiptPage(Model):
    receipts: list[Receipt]
    next_after: int


class ReceiptList(Model):
    receipts: list[Receipt]


class AuditRecord(Model):
    """One save, update, delete or project change, read from the log (more fields per action are kept)."""

    position: int
    action: str
    actor: str = ""
    time: str = ""


class AuditPage(Model):
    records: list[AuditRecord]
    next_after: int


class LoggedEvent(Model):
    """One event exactly as the log stores it: its position, its stream, its payload, who wrote it, its hashes."""

    position: int
    stream_id: str
    stream_version: int
    event_type: str
    schema_version: int
    payload: dict[str, Any]
    metadata: dict[str, Any] = {}
    recorded_at: str = ""
    payload_sha256: str = ""
    hash: str = ""


class EventPage(Model):
    events: list[LoggedEvent]
    next_after: int
    head: int = 0


class ErasureCheck(Model):
    """One store, read back after an erasure: ``free`` when nothing of the erased memories was found there."""

    store: str
    free: bool
    detail: str = ""


class ErasureCertificate(Model):
    """What an erasure took (memories, the log positions it redacted) and what each store held afterwards."""

    position: int  # the memory.erase event's
    erased_at: str = ""
    erased_by: str = ""
    selector: dict[str, Any] = {}
    reason: str = ""
    memories: list[str] = []
    positions: list[int] = []
    idempotency_keys_forgotten: int = 0
    snapshots_dropped: int = 0
    checks: list[ErasureCheck] = []
    free: bool = False


class MemoryVersion(Model):
    """One write of a memory: its version after it, where and when, who, and the memory it left."""

    version: int
    position: int
    event_type: str
    time: str
    actor: str = ""
    surface: str = ""
    memory: dict[str, Any]
    superseded: bool = False


class ErasedMemory(Model):
    memory_id: str
    name: str = ""
    scope: str = ""
    scope_id: str = ""
    type: str = ""
    description: str = ""


class ErasurePreview(Model):
    """What an erasure would take now (each memory as its newest write left it), nothing changed."""

    selector: dict[str, Any] = {}
    memories: list[ErasedMemory] = []
    positions: list[int] = []


class ChainPoint(Model):
    position: int
    hash: str


class ChainBreak(Model):
    position: int
    reason: str


class ChainPage(Model):
    """One page of the hash chain's walk: resume from ``reached`` until ``complete`` or ``broken``."""

    events: int
    reached: ChainPoint
    head: ChainPoint
    complete: bool
    broken: ChainBreak | None = None


class MemoryHistory(Model):
    memory_id: str
    versions: list[MemoryVersion]


class UserInfo(Model):
    user_id: str
    name: str
    created: str = ""
    active: bool = True
    deactivated_at: str | None = None


class UserPage(Model):
    users: list[UserInfo]
    next_after: str = ""


class TokenInfo(Model):
    """A token as a list shows it: never its secret (``prefix`` tells tokens apart)."""

    token_id: str
    prefix: str = ""
    name: str = ""
    user_id: str
    scopes: list[str] = []
    permissions: list[str] = []
    created: str = ""
    expires_at: str | None = None
    last_used_at: str | None = None
    revoked_at: str | None = None


class CreatedToken(TokenInfo):
    """A token just created: ``token`` is its secret, shown only in this answer."""

    token: str


class TokenPage(Model):
    tokens: list[TokenInfo]
    next_after: str = ""


class SessionRecord(Model):
    """A session as an admin's list shows it (never its token)."""

    session_id: str
    kind: str
    user_id: str | None = None
    workstream_id: str
    parent_session_id: str | None = None
    created: str = ""
    state: str = "open"
    closed_at: str | None = None
    last_active_at: str | None = None


class SessionPage(Model):
    sessions: list[SessionRecord]
    next_after: str = ""


class ClosedSessions(Model):
    closed: list[SessionRecord]  # closed by this request: the session, then its children


class ProjectPage(Model):
    projects: list[ProjectInfo]
    next_after: str = ""


class WorkstreamPage(Model):
    workstreams: list[WorkstreamInfo]
    next_after: str = ""
