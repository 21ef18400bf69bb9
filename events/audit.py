"""Audit records, read straight from the log (no projection can drift from it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, select

from events.store import EventStore
from events.types import EVENT_CLASSES, ErasedEvent, MemoryEvent, RecordedEvent
from memoryd.storage.schema import event_type_is, events

AUDITED = tuple(EVENT_CLASSES)  # every event: memory, project, supersede, erasure and identity (user, token, session)
IDENTITY_PREFIXES = ("user.", "token.", "session.")
# an action filter may name a family ("memory.*": every memory action), or "identity.*" for users, tokens and sessions
ACTION_FAMILIES = {f"{family}.*": tuple(action for action in AUDITED if action.startswith(f"{family}."))
                   for family in sorted({action.split(".")[0] for action in AUDITED})}
ACTION_FAMILIES["identity.*"] = tuple(action for action in AUDITED if action.startswith(IDENTITY_PREFIXES))


@dataclass(frozen=True)
class AuditQuery:
    action: str = ""
    actor: str = ""
    memory_id: str = ""
    project_id: str = ""
    after: int = 0
    limit: int = 100


@dataclass(frozen=True)
class AuditRecord:
    position: int
    action: str
    actor: str
    memory_id: str
    name: str
    scope: str
    scope_id: str
    type: str
    surface: str
    client_ip: str
    request_id: str
    time: str
    session_id: str = ""  # memory tool events
    workstream_id: str = ""
    project_id: str = ""  # project events: which project, whose access, now at which level
    member: str = ""
    access: str = ""
    user_id: str = ""  # identity events: the user, token and session concerned, and why
    token_id: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def list_audit(conn: Connection, query: AuditQuery) -> list[AuditRecord]:
    """Memory and project events after ``query.after`` in position order, filtered."""
    statement = (
        select(events.c.position, events.c.event_type, events.c.payload, events.c.meta, events.c.recorded_at)
        .where(events.c.position > query.after, events.c.event_type.in_(AUDITED))
        .order_by(events.c.position)
        .limit(query.limit)
    )
    if query.action in ACTION_FAMILIES:
        statement = statement.where(events.c.event_type.in_(ACTION_FAMILIES[query.action]))
    elif query.action:
        statement = statement.where(event_type_is(query.action))
    if query.actor:
        statement = statement.where(events.c.meta["actor_user_id"].as_string() == query.actor)
    if query.project_id:
        statement = statement.where(events.c.payload[("project", "project_id")].as_string() == query.project_id)
    if query.memory_id:
        statement = statement.where(events.c.payload[("memory", "memory_id")].as_string() == query.memory_id)
    return [_record(row) for row in conn.execute(statement)]


def _record(row: Any) -> AuditRecord:
    position, action, payload, metadata, recorded_at = row
    erased = ErasedEvent.of(payload)
    memory = payload.get("memory") or dict.fromkeys(("memory_id", "name", "scope", "scope_id", "type"), "") | {
        "memory_id": erased.memory_id if erased else ""}
    project = payload.get("project") or {}
    member = payload.get("member", "")
    identity = payload if action.startswith(IDENTITY_PREFIXES) else {}
    return AuditRecord(
        position=position,
        action=action,
        actor=metadata.get("actor_user_id", ""),
        memory_id=memory["memory_id"],
        name=memory["name"] or project.get("name", "") or identity.get("name", ""),
        scope=memory["scope"],
        scope_id=memory["scope_id"],
        type=memory["type"],
        surface=metadata.get("surface", ""),
        client_ip=metadata.get("client_ip", ""),
        request_id=metadata.get("request_id", ""),
        time=recorded_at[:19],
        session_id=identity.get("session_id") or metadata.get("session_id", ""),
        workstream_id=metadata.get("workstream_id") or (identity.get("details") or {}).get("workstream_id", ""),
        project_id=project.get("project_id", ""),
        member=member,
        access=project.get("members", {}).get(member, "") if member else "",
        user_id=identity.get("user_id", ""),
        token_id=identity.get("token_id", ""),
        reason=identity.get("reason", ""),
    )


@dataclass(frozen=True)
class MemoryVersion:
    """One write of a memory as the log holds it: who, when, through which door, and the memory it left."""

    version: int
    position: int
    event_type: str
    time: str
    actor: str
    surface: str
    memory: dict[str, Any]  # as the write left it (a delete: as it was when deleted)
    superseded: bool  # an operator replaced the event; ``memory`` is what the replacement says

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_history(store: EventStore, memory_id: str, stream_id: str) -> list[MemoryVersion]:
    """Every write of the memory ``memory_id`` in its stream ``stream_id``, oldest first.

    A name deleted and saved again is a new memory with its own id, so only this memory's writes are
    listed. A superseded event is shown as the projections applied it (its replacement) and marked; one
    that cannot be decoded is shown as stored.
    """
    originals = store.stream(stream_id)
    applied = store.events_at([original.position for original in originals])
    versions = []
    for original in originals:
        recorded = applied.get(original.position, original)
        memory = _memory_of(recorded)
        if memory.get("memory_id") != memory_id:
            continue
        versions.append(MemoryVersion(
            recorded.stream_version, recorded.position, recorded.event_type, recorded.recorded_at[:19],
            recorded.metadata.get("actor_user_id", ""), recorded.metadata.get("surface", ""), memory,
            superseded=recorded != original))
    return versions


def _memory_of(recorded: RecordedEvent) -> dict[str, Any]:
    """The memory an event carries: decoded, or as stored when this code cannot read it (never a 500)."""
    try:
        event = recorded.to_domain()
    except Exception:  # an event the projections are stopped on: an auditor wants to see it most of all
        stored = recorded.payload.get("memory") if isinstance(recorded.payload, dict) else None
        return stored if isinstance(stored, dict) else {}
    return event.memory.to_dict() if isinstance(event, MemoryEvent) else {}
