"""The ``memory`` tool an agent session uses: save, get, search, delete, list.

Every call resolves the session live (its workstream, the attached project,
the acting user's access to it), so a revoked member or an archived project
fails closed at once. A refused or failed action is a result the model can
act on (``ok: false`` with an error), never an exception.

Scope rules (the spec's "Inherited target and coordinator scope"):

* interactive sessions and coordinators' children may name ``global``,
  ``workstream``, ``user`` and ``project``; coordinators ``coordinator`` and
  ``project``;
* without a scope, save/get/delete use the inherited target: the attached
  project if there is one (never falling back elsewhere), else ``global`` for
  interactive sessions and ``coordinator`` for coordinators;
* without a scope, search and list span the visible envelope.

A call may carry ``tool_names`` (as a turn does) so that the answers name the
tool the model sees: ``memory_get(name=...)`` rather than ``memory(action='get', ...)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from commands.bus import CommandBus
from commands.model import DeleteMemory, SaveMemory
from events.idempotency import IdempotencyClaim
from events.store import EventStore
from events.types import (
    EventMetadata,
    MemoryEvent,
    MemorySaved,
    MemoryUpdated,
    RecordedEvent,
)
from memoryd.app.scope import SessionScope, WorkstreamGone, patterns, resolve
from memoryd.app.turn.tools import ToolNames
from memoryd.kernel.domain import (
    SCOPES,
    Memory,
    Namespace,
    clean_name,
    clean_type_filter,
    utc_timestamp,
)
from memoryd.kernel.errors import MemorydError, NotFound, StorageError, ValidationError, VersionMismatch
from memoryd.kernel.text import checked_identifier, checked_text
from memoryd.storage.db import Database
from memoryd.storage.directory import Directory
from memoryd.storage.sessions import Session
from projections.filters import MemoryFilter, ScopePattern
from projections.queries import find_memory, list_memories, record_access
from projections.search import SearchService

INTERACTIVE_SCOPES = ("global", "workstream", "user", "project")
COORDINATOR_SCOPES = ("coordinator", "project")
DEFAULT_LIMIT, MAX_LIMIT = 20, 50
TEXT_ARGUMENTS = ("action", "name", "content", "description", "type", "scope", "query")
IDENTIFIER_ARGUMENTS = ("action", "name", "type", "scope")
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]{1,18}")  # as text: limit, expected_version


class ToolRefusal(Exception):
    """An action the model asked for and cannot have; the message tells it why."""


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    text: str
    error: str = ""
    memory: dict[str, Any] | None = None
    memories: list[dict[str, Any]] | None = None

    @classmethod
    def of_event(cls, recorded: RecordedEvent | None) -> ToolResult:
        """What a save or delete told the model, recreated from its event."""
        event = recorded.to_domain() if recorded is not None else None
        if not isinstance(event, MemoryEvent):
            raise StorageError("the memory tool's event is missing from the log")
        verb = {MemorySaved: "Saved", MemoryUpdated: "Updated"}.get(type(event), "Deleted")
        return cls.written(verb, event.memory, recorded.stream_version if recorded is not None else 0)

    @classmethod
    def written(cls, verb: str, memory: Memory, version: int) -> ToolResult:
        """A write's answer (the reference's words); ``version`` is what a later ``expected_version`` names."""
        return cls(True, f"{verb} memory '{memory.name}' (scope={memory.scope})", memory=memory.to_dict() | {"version": version})

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": self.ok}
        if self.error:
            body["error"] = self.error
        if self.memory is not None:
            body["memory"] = self.memory
        if self.memories is not None:
            body["memories"] = self.memories
        return body | {"text": self.text}


class MemoryTool:
    """The tool, given what it works with: the command bus, the log, the read models and the directory."""

    def __init__(self, bus: CommandBus, store: EventStore, database: Database, directory: Directory,
                 search: SearchService, max_content: int) -> None:
        self.bus, self.store, self.database = bus, store, database
        self.directory, self.search, self.max_content = directory, search, max_content

    def run(self, session: Session, arguments: dict[str, Any], claim: IdempotencyClaim | None = None) -> ToolResult:
        """One tool call; ``claim`` (an idempotency key) is taken atomically with the call's append."""
        try:
            _check_arguments(arguments)
            action = (arguments.get("action") or "").strip().lower()
            handler = {"save": self._save, "get": self._get, "search": self._search, "delete": self._delete,
                       "list": self._list}.get(action)
            if handler is None:
                raise ToolRefusal(f"unknown action '{action}'. Valid: save, get, search, delete, list")
            context = self._context(session)
            if not context.memory_enabled:
                raise ToolRefusal("memory is turned off for this workstream's persona")
            return handler(context, arguments, claim)
        except (ToolRefusal, ValidationError) as refusal:
            message = refusal.message if isinstance(refusal, MemorydError) else str(refusal)
            return ToolResult(ok=False, error=message, text=f"Error: {message}")

    # -- actions -------------------------------------------------------------------

    def _save(self, context: SessionScope, arguments: dict[str, Any], claim: IdempotencyClaim | None) -> ToolResult:
        command = SaveMemory.validated(
            name=_required(arguments, "name", "save"), content=arguments.get("content"),
            description=arguments.get("description"), type=arguments.get("type"),
            max_content=self.max_content,
            resolve_namespace=lambda: self._target(context, arguments.get("scope"), write=True),
            expected_version=_expected_version(arguments),
        )
        try:
            outcome = self.bus.handle(command, self._metadata(context), claim)
        except VersionMismatch as mismatch:
            raise ToolRefusal(_changed_meanwhile(mismatch)) from None
        return ToolResult.written("Saved" if outcome.created else "Updated", outcome.memory, outcome.version)

    def _get(self, context: SessionScope, arguments: dict[str, Any], claim: IdempotencyClaim | None) -> ToolResult:
        name = clean_name(_required(arguments, "name", "get"))
        namespace = self._target(context, arguments.get("scope"), write=False)
        with self.database.read() as conn:
            found = find_memory(conn, name, namespace)
        if found is not None:
            found = self._touched([found])[0]
        if found is None:
            raise ToolRefusal(f"no memory named '{name}' in scope '{namespace.scope}'"
                              + self._hint(context, name, namespace, _tool_names(arguments)))
        return ToolResult(True, _render(found, full=True), memory=found)

    def _delete(self, context: SessionScope, arguments: dict[str, Any], claim: IdempotencyClaim | None) -> ToolResult:
        name = clean_name(_required(arguments, "name", "delete"))
        namespace = self._target(context, arguments.get("scope"), write=True)
        command = DeleteMemory(name, namespace, expected_version=_expected_version(arguments))
        try:
            outcome = self.bus.handle(command, self._metadata(context), claim)
        except NotFound:
            raise ToolRefusal(f"no memory named '{name}' in scope '{namespace.scope}'"
                              + self._hint(context, name, namespace, _tool_names(arguments))) from None
        except VersionMismatch as mismatch:
            raise ToolRefusal(_changed_meanwhile(mismatch)) from None
        return ToolResult.written("Deleted", outcome.memory, outcome.version)

    def _search(self, context: SessionScope, arguments: dict[str, Any], claim: IdempotencyClaim | None) -> ToolResult:
        query = (arguments.get("query") or "").strip()
        if not query:
            raise ToolRefusal("'query' is required for search")
        where = self._visible(context, arguments)
        with self.database.read() as conn:
            found = self.search.memories(conn, where, query, _limit(arguments))
        found = self._touched(found)
        return ToolResult(True, _render_list(found, "No memories match.", _tool_names(arguments)), memories=found)

    def _list(self, context: SessionScope, arguments: dict[str, Any], claim: IdempotencyClaim | None) -> ToolResult:
        with self.database.read() as conn:
            found = list_memories(conn, self._visible(context, arguments), _limit(arguments))
        return ToolResult(True, _render_list(found, "No memories stored.", _tool_names(arguments)), memories=found)

    # -- scopes --------------------------------------------------------------------

    def _context(self, session: Session) -> SessionScope:
        try:
            return resolve(session, self.directory, self.store)
        except WorkstreamGone as gone:
            raise ToolRefusal(str(gone)) from None

    def _scope(self, context: SessionScope, raw: Any) -> str:
        scope = str(raw).strip().lower()
        if scope not in SCOPES:
            raise ToolRefusal(f"invalid scope '{raw}'. Valid: {', '.join(SCOPES)}")
        allowed = COORDINATOR_SCOPES if context.session.is_coordinator else INTERACTIVE_SCOPES
        if scope not in allowed:
            raise ToolRefusal(f"scope '{scope}' is unavailable to this {context.session.kind} session; "
                              f"it may use: {', '.join(allowed)}")
        return scope

    def _target(self, context: SessionScope, raw: Any, *, write: bool) -> Namespace:
        """The one namespace a save, get or delete addresses."""
        if raw is None or str(raw).strip() == "":
            scope = "project" if context.workstream.project_id else (
                "coordinator" if context.session.is_coordinator else "global")
        else:
            scope = self._scope(context, raw)
        return self._namespace(context, scope, write=write)

    def _namespace(self, context: SessionScope, scope: str, *, write: bool) -> Namespace:
        if scope == "global":
            return Namespace("global", "")
        if scope == "workstream":
            return Namespace("workstream", context.workstream.workstream_id)
        if scope in ("user", "coordinator"):
            if not context.user_id:
                raise ToolRefusal(f"'{scope}' scope requires an authenticated acting user")
            return Namespace(scope, context.user_id)
        verb = "changed" if write else "read"
        if not context.workstream.project_id:
            raise ToolRefusal(f"this workstream is not attached to a project; project-scoped memory cannot be {verb}.")
        access = context.project_access()
        if access is None:
            raise ToolRefusal(f"the acting user cannot access the active attached project; "
                              f"project-scoped memory cannot be {verb}.")
        if write and access != "write":
            raise ToolRefusal("the acting user has read-only access to the attached project; "
                              "project-scoped memory cannot be changed.")
        return Namespace("project", context.workstream.project_id)

    def _visible(self, context: SessionScope, arguments: dict[str, Any]) -> MemoryFilter:
        memory_type = clean_type_filter(arguments.get("type") or "")
        raw = arguments.get("scope")
        if raw is None or str(raw).strip() == "":
            return context.envelope_filter(memory_type)
        namespace = self._namespace(context, self._scope(context, raw), write=False)
        chosen = [ScopePattern("global") if namespace.scope == "global" else namespace]
        return MemoryFilter(type=memory_type, scopes=patterns(chosen))

    def _hint(self, context: SessionScope, name: str, missed: Namespace, tools: ToolNames) -> str:
        """Where else the session can see this name (never probing scopes it cannot)."""
        elsewhere = []
        with self.database.read() as conn:
            for candidate in context.envelope():
                namespace = Namespace(candidate.scope, candidate.scope_id or "")
                if namespace != missed and find_memory(conn, name, namespace) is not None:
                    elsewhere.append(namespace.scope)
        if missed.scope == "project" and context.project_access() == "read":
            return ". Project access is read-only."
        if not elsewhere:
            return ""
        scopes = ", ".join(f"'{scope}'" for scope in elsewhere)
        return f". It exists in scope {scopes}: call {tools.call('get', name=name, scope=elsewhere[0])}."

    def _touched(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Count this read of each row (telemetry beside the log) and answer with it counted."""
        if not rows:
            return rows
        now = utc_timestamp()
        with self.database.write() as conn:
            record_access(conn, [row["memory_id"] for row in rows], now)
        return [row | {"last_accessed": now, "access_count": row["access_count"] + 1} for row in rows]

    def _metadata(self, context: SessionScope) -> EventMetadata:
        return EventMetadata(actor_user_id=context.user_id, surface="tool", session_id=context.session.session_id,
                             workstream_id=context.workstream.workstream_id)


def _check_arguments(arguments: dict[str, Any]) -> None:
    """Each argument the tool reads has its JSON type and storable text, or the model is told which is wrong."""
    _tool_names(arguments)
    for name in TEXT_ARGUMENTS:
        value = arguments.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ToolRefusal(f"'{name}' must be a string (got {type(value).__name__})")
        if name in IDENTIFIER_ARGUMENTS:
            checked_identifier(value.strip(), f"'{name}'")
        else:
            checked_text(value, f"'{name}'")


def _required(arguments: dict[str, Any], field_name: str, action: str) -> Any:
    value = arguments.get(field_name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ToolRefusal(f"'{field_name}' is required for {action}")
    return value


def _whole_number(raw: Any) -> int | None:
    """A JSON integer or a string of ASCII digits as an int; None for anything else (a bool included)."""
    if isinstance(raw, str) and _WHOLE_NUMBER.fullmatch(raw.strip()):
        return int(raw)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _limit(arguments: dict[str, Any]) -> int:
    """A whole number, capped to 1..50 rather than rejected."""
    if arguments.get("limit") is None:
        return DEFAULT_LIMIT
    limit = _whole_number(arguments["limit"])
    if limit is None:
        raise ToolRefusal(f"'limit' must be a whole number such as 10 (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})")
    return max(1, min(MAX_LIMIT, limit))


def _expected_version(arguments: dict[str, Any]) -> int | None:
    """``expected_version``: write only if the memory is at this version (a whole number, as get gives it)."""
    if arguments.get("expected_version") is None:
        return None
    version = _whole_number(arguments["expected_version"])
    if version is None or version < 1:
        raise ToolRefusal("'expected_version' must be a memory's version, a whole number such as 3 (get shows it)")
    return version


def _changed_meanwhile(mismatch: VersionMismatch) -> str:
    if mismatch.current is None:
        return f"nothing written: the memory is not at version {mismatch.expected} (it does not exist now)"
    return (f"nothing written: the memory is at version {mismatch.current}, not {mismatch.expected}; "
            "get it again, then decide")


def _render(row: dict[str, Any], *, full: bool = False) -> str:
    header = f"[{row['type']}:{row['scope']}] {row['name']}"
    if not full:
        return f"{header} - {row['description']}"
    return f"{header}\n{row['description']}\n\n{row['content']}"


def _render_list(rows: list[dict[str, Any]], empty: str, tools: ToolNames) -> str:
    if not rows:
        return empty
    lines = [_render(row) for row in rows]
    return "\n".join(lines) + f"\n\nCall {tools.call('get')} with the displayed name and scope for the full content."


def _tool_names(arguments: dict[str, Any]) -> ToolNames:
    """The call's ``tool_names`` (checked with the other arguments): how the answer names the tool."""
    try:
        return ToolNames.parse(arguments.get("tool_names"))
    except ValidationError as bad:
        raise ToolRefusal(bad.message) from None
