"""What each method sends, as plain values: the sync and async clients share every one of these."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from memoryd_sdk import models

T = TypeVar("T")
_WHITESPACE = re.compile(r"\s+")
SEARCH_OFFSET_CAP = 10_000  # the server's: the deepest offset a search takes


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, and the model its answer is read into (None: the JSON as it came)."""

    method: str
    path: str
    model: type[T] | None
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    read: bool = False  # sends the highest position seen as X-Min-Position (read your writes)
    key: str | None = None  # the Idempotency-Key, when the call names it (a turn: its turn_id)
    timeout: float | None = None  # this call's own, instead of the client's
    retries: int | None = None  # this call's own, instead of the client's max_retries
    if_match: int | None = None  # write only at this version (sent as If-Match; a 412 otherwise)


def _given(**values: Any) -> dict[str, Any]:
    """Query parameters without the empty ones (the reference SDK's rule)."""
    return {name: value for name, value in values.items() if value not in ("", None)}


def as_of_param(as_of: int | str | dt.datetime | None) -> dict[str, str]:
    """``as_of`` as the admin reads take it: a log position or an ISO 8601 time, as text; nothing when None.

    A ``datetime`` must carry its timezone (a naive one would be read as UTC, which is rarely what it meant)."""
    if as_of is None:
        return {}
    if isinstance(as_of, dt.datetime):
        if as_of.tzinfo is None or as_of.utcoffset() is None:
            raise ValueError("as_of must be a timezone-aware datetime (say datetime.now(timezone.utc))")
        return {"as_of": as_of.isoformat()}
    if isinstance(as_of, bool) or not isinstance(as_of, int | str):
        raise TypeError(f"as_of must be a log position (int), an ISO 8601 time (str) or a datetime, not {as_of!r}")
    return _given(as_of=str(as_of))


def name_path(prefix: str, name: str) -> str:
    return f"{prefix}/{quote(name, safe='')}"


def description_of(description: str) -> str:
    """Whitespace runs become one space, trimmed; an empty one is refused here. Nothing else: the server's rule,
    as its OpenAPI document states it (``SaveMemoryRequest.description``: ``minLength`` 1, no maximum)."""
    cleaned = _WHITESPACE.sub(" ", description or "").strip()
    if not cleaned:
        raise ValueError("memory description is required and must be non-empty")
    return cleaned


# -- the public memory API ---------------------------------------------------------------


def list_memories(mem_type: str, scope: str, scope_id: str, limit: int, after: str) -> Call[models.ListMemoriesResponse]:
    return Call("GET", "/v1/api/memories", models.ListMemoriesResponse,
                _given(type=mem_type, scope=scope, scope_id=scope_id, after=after) | {"limit": limit}, read=True)


def save_memory(name: str, content: str, description: str, mem_type: str | None, scope: str,
                scope_id: str) -> Call[models.MemoryInfo]:
    body = {"name": name, "content": content, "description": description_of(description), "scope": scope}
    if mem_type is not None:
        body["type"] = mem_type
    if scope_id:
        body["scope_id"] = scope_id
    return Call("POST", "/v1/api/memories", models.MemoryInfo, json=body)


def search_memories(query: str, mem_type: str, scope: str, scope_id: str, limit: int,
                    offset: int) -> Call[models.ListMemoriesResponse]:
    body = {"query": query, "limit": limit} | _given(type=mem_type, scope=scope, scope_id=scope_id) | (
        {"offset": offset} if offset else {})
    return Call("POST", "/v1/api/memories/search", models.ListMemoriesResponse, json=body, read=True)


def write_memories(writes: list[dict[str, Any]]) -> Call[models.WriteResult]:
    return Call("POST", "/v1/api/memories/batch", models.WriteResult, json={"writes": writes})


def get_memory(name: str, scope: str, scope_id: str) -> Call[models.MemoryInfo]:
    return Call("GET", name_path("/v1/api/memories", name), models.MemoryInfo,
                {"scope": scope} | _given(scope_id=scope_id), read=True)


def delete_memory(name: str, scope: str, scope_id: str) -> Call[models.StatusResponse]:
    return Call("DELETE", name_path("/v1/api/memories", name), models.StatusResponse,
                {"scope": scope} | _given(scope_id=scope_id))


def open_session(kind: str, workstream_id: str, user_id: str, parent_session_id: str) -> Call[models.SessionInfo]:
    body = {"kind": kind, "workstream_id": workstream_id, "user_id": user_id or None,
            "parent_session_id": parent_session_id or None}
    return Call("POST", "/v1/api/sessions", models.SessionInfo, json=body)


def current_session() -> Call[models.SessionInfo]:
    return Call("GET", "/v1/api/session", models.SessionInfo)


def health() -> Call[Any]:
    return Call("GET", "/readyz", None)


# -- the admin API ---------------------------------------------------------------------------


def admin_list_memories(mem_type: str, scope: str, scope_id: str, limit: int,
                        as_of: int | str | dt.datetime | None, offset: int = 0) -> Call[models.ListMemoriesResponse]:
    return Call("GET", "/v1/api/admin/memories", models.ListMemoriesResponse,
                _given(type=mem_type, scope=scope, scope_id=scope_id) | {"limit": limit} | as_of_param(as_of)
                | ({"offset": offset} if offset else {}), read=True)


def admin_search_memories(query: str, mem_type: str, scope: str, scope_id: str, limit: int,
                          as_of: int | str | dt.datetime | None) -> Call[models.ListMemoriesResponse]:
    return Call("GET", "/v1/api/admin/memories/search", models.ListMemoriesResponse,
                {"q": query, "limit": limit} | _given(type=mem_type, scope=scope, scope_id=scope_id)
                | as_of_param(as_of), read=True)


def admin_get_memory(memory_id: str, as_of: int | str | dt.datetime | None) -> Call[models.MemoryInfo]:
    return Call("GET", name_path("/v1/api/admin/memories", memory_id), models.MemoryInfo, as_of_param(as_of),
                read=True)


def memory_history(memory_id: str) -> Call[models.MemoryHistory]:
    return Call("GET", name_path("/v1/api/admin/memories", memory_id) + "/history", models.MemoryHistory, read=True)


def restore_memory(memory_id: str, version: int) -> Call[models.MemoryInfo]:
    return Call("POST", name_path("/v1/api/admin/memories", memory_id) + "/restore", models.MemoryInfo,
                json={"version": version})


def admin_delete_memory(memory_id: str) -> Call[models.StatusResponse]:
    return Call("DELETE", name_path("/v1/api/admin/memories", memory_id), models.StatusResponse)


def edit_memory(memory_id: str, content: str | None, description: str | None, mem_type: str | None,
                if_match: int | None) -> Call[models.AdminMemoryInfo]:
    body = {name: value for name, value in (("content", content), ("description", description), ("type", mem_type))
            if value is not None}
    return Call("PATCH", name_path("/v1/api/admin/memories", memory_id), models.AdminMemoryInfo, json=body,
                if_match=if_match)


def preview_erasure(selector: dict[str, str | None]) -> Call[models.ErasurePreview]:
    return Call("GET", "/v1/api/admin/erasures/preview", models.ErasurePreview,
                {name: value for name, value in selector.items() if value is not None})


def chain_page(after: int, digest: str, limit: int) -> Call[models.ChainPage]:
    return Call("GET", "/v1/api/admin/audit/chain", models.ChainPage,
                {"after": after, "limit": limit} | _given(hash=digest))


def erase(selector: dict[str, str | None], reason: str) -> Call[models.ErasureCertificate]:
    body = {name: value for name, value in selector.items() if value is not None} | {"reason": reason}
    return Call("POST", "/v1/api/admin/erasures", models.ErasureCertificate, json=body)


def audit(after: int, limit: int, action: str, actor: str, memory_id: str, project_id: str,
          since: str = "") -> Call[models.AuditPage]:
    params = {"after": after, "limit": limit} | _given(action=action, actor=actor, memory_id=memory_id,
                                                        project_id=project_id, since=since)
    return Call("GET", "/v1/api/admin/audit", models.AuditPage, params)


def events(after: int, limit: int) -> Call[models.EventPage]:
    return Call("GET", "/v1/api/admin/events", models.EventPage, {"after": after, "limit": limit})


def create_project(name: str, owner: str) -> Call[models.ProjectInfo]:
    return Call("POST", "/v1/api/admin/projects", models.ProjectInfo, json={"name": name, "owner": owner})


def get_project(project_id: str) -> Call[models.ProjectInfo]:
    return Call("GET", name_path("/v1/api/admin/projects", project_id), models.ProjectInfo)


def delete_project(project_id: str) -> Call[Any]:
    return Call("DELETE", name_path("/v1/api/admin/projects", project_id), None)


def grant_access(project_id: str, user_id: str, access: str) -> Call[models.ProjectInfo]:
    path = f"{name_path('/v1/api/admin/projects', project_id)}/members/{quote(user_id, safe='')}"
    return Call("PUT", path, models.ProjectInfo, json={"access": access})


def revoke_access(project_id: str, user_id: str) -> Call[models.ProjectInfo]:
    path = f"{name_path('/v1/api/admin/projects', project_id)}/members/{quote(user_id, safe='')}"
    return Call("DELETE", path, models.ProjectInfo)


def project_state(project_id: str, action: str) -> Call[models.ProjectInfo]:
    return Call("POST", f"{name_path('/v1/api/admin/projects', project_id)}/{action}", models.ProjectInfo)


def create_workstream(name: str, owner: str | None, project_id: str | None, memory: bool) -> Call[models.WorkstreamInfo]:
    body = {"name": name, "owner": owner, "project_id": project_id, "persona": {"memory": memory}}
    return Call("POST", "/v1/api/admin/workstreams", models.WorkstreamInfo, json=body)


def update_workstream(workstream_id: str, changes: dict[str, Any]) -> Call[models.WorkstreamInfo]:
    return Call("PATCH", name_path("/v1/api/admin/workstreams", workstream_id), models.WorkstreamInfo, json=changes)


def turns_showing(memory_id: str, limit: int) -> Call[models.ReceiptList]:
    return Call("GET", f"{name_path('/v1/api/admin/memories', memory_id)}/turns", models.ReceiptList, {"limit": limit})


def session_turns(session_id: str, after: int, limit: int) -> Call[models.ReceiptPage]:
    return Call("GET", f"{name_path('/v1/api/admin/sessions', session_id)}/turns", models.ReceiptPage,
                {"after": after, "limit": limit})


# -- identities: users, tokens, sessions; the project and workstream lists ---------------------


def current_token() -> Call[models.TokenInfo]:
    return Call("GET", "/v1/api/token", models.TokenInfo)


def _reason(reason: str) -> dict[str, str] | None:
    return {"reason": reason} if reason else None


def _listing(after: str, limit: int, **filters: str) -> dict[str, Any]:
    return _given(**filters, after=after) | {"limit": limit}


def list_users(state: str, name: str, after: str, limit: int) -> Call[models.UserPage]:
    return Call("GET", "/v1/api/admin/users", models.UserPage, _listing(after, limit, state=state, name=name))


def create_user(name: str) -> Call[models.UserInfo]:
    return Call("POST", "/v1/api/admin/users", models.UserInfo, json={"name": name})


def get_user(user_id: str) -> Call[models.UserInfo]:
    return Call("GET", name_path("/v1/api/admin/users", user_id), models.UserInfo)


def user_state(user_id: str, action: str, reason: str) -> Call[models.UserInfo]:
    return Call("POST", f"{name_path('/v1/api/admin/users', user_id)}/{action}", models.UserInfo,
                json=_reason(reason))


def list_tokens(user_id: str, state: str, after: str, limit: int) -> Call[models.TokenPage]:
    return Call("GET", "/v1/api/admin/tokens", models.TokenPage, _listing(after, limit, user_id=user_id, state=state))


def create_token(user_id: str, scopes: list[str], permissions: list[str], name: str, expires_at: str | None,
                 expires_in_days: int | None) -> Call[models.CreatedToken]:
    body: dict[str, Any] = {"user_id": user_id, "scopes": scopes, "permissions": permissions, "name": name}
    body |= {key: value for key, value in (("expires_at", expires_at), ("expires_in_days", expires_in_days))
             if value is not None}
    return Call("POST", "/v1/api/admin/tokens", models.CreatedToken, json=body)


def revoke_token(token_id: str, reason: str) -> Call[models.TokenInfo]:
    return Call("DELETE", name_path("/v1/api/admin/tokens", token_id), models.TokenInfo, json=_reason(reason))


def list_sessions(user_id: str, workstream_id: str, state: str, after: str, limit: int) -> Call[models.SessionPage]:
    return Call("GET", "/v1/api/admin/sessions", models.SessionPage,
                _listing(after, limit, user_id=user_id, workstream_id=workstream_id, state=state))


def close_session(session_id: str, reason: str) -> Call[models.ClosedSessions]:
    return Call("DELETE", name_path("/v1/api/sessions", session_id), models.ClosedSessions, json=_reason(reason))


def list_projects(owner: str, member: str, state: str, after: str, limit: int) -> Call[models.ProjectPage]:
    return Call("GET", "/v1/api/admin/projects", models.ProjectPage,
                _listing(after, limit, owner=owner, member=member, state=state))


def list_workstreams(owner: str, member: str, project_id: str, after: str, limit: int) -> Call[models.WorkstreamPage]:
    return Call("GET", "/v1/api/admin/workstreams", models.WorkstreamPage,
                _listing(after, limit, owner=owner, member=member, project_id=project_id))


# -- a session ---------------------------------------------------------------------------------


def tool(session_id: str, action: str, arguments: dict[str, Any]) -> Call[models.ToolResult]:
    return Call("POST", f"{name_path('/v1/api/sessions', session_id)}/memory", models.ToolResult,
                json={"action": action, **arguments})


def turn(session_id: str, body: dict[str, Any], timeout: float) -> Call[models.TurnContext]:
    """One attempt within ``timeout``: a turn must not hold the agent up. It names itself (``turn_id``)."""
    body = {name: value for name, value in body.items() if value is not None}
    body.setdefault("turn_id", f"turn_{uuid.uuid4().hex}")
    return Call("POST", f"{name_path('/v1/api/sessions', session_id)}/turns", models.TurnContext, json=body,
                read=True, key=body["turn_id"], timeout=timeout, retries=0)


def signal(session_id: str, event: str, results: list[dict[str, Any]] | None,
           tool_names: dict[str, str] | None) -> Call[Any]:
    body: dict[str, Any] = {"event": event}
    if results is not None:
        body["results"] = results
    if tool_names is not None:
        body["tool_names"] = tool_names
    # not retried: a lost answer's nudges were already delivered (their cooldown taken), so a retry gets none
    return Call("POST", f"{name_path('/v1/api/sessions', session_id)}/signals", None, json=body, retries=0)


def receipt(session_id: str, turn_id: str) -> Call[models.Receipt]:
    return Call("GET", f"{name_path('/v1/api/sessions', session_id)}/turns/{quote(turn_id, safe='')}",
                models.Receipt)


def turn_body(messages: list[dict[str, Any]] | None, query: str | None, system: str | None, placement: str,
              turn_id: str | None, tool_visible: bool, relevance_k: int | None, max_chars: int | None,
              min_score: float | None, preview: bool, tool_names: dict[str, str] | None) -> dict[str, Any]:
    return {"messages": messages, "query": query, "system": system, "placement": placement, "turn_id": turn_id,
            "tool_visible": tool_visible, "relevance_k": relevance_k, "max_chars": max_chars,
            "min_score": min_score, "preview": preview, "tool_names": tool_names}


def failed_turn(call: Call[models.TurnContext], error: Exception) -> models.TurnContext:
    """An empty context for a turn memoryd could not compose (fail open): the runtime's own prompt, untouched."""
    body = call.json or {}
    system = body.get("system") or ""
    placement = body.get("placement", "system")
    message = {"role": "system", "content": system} if placement == "system" else None
    return models.TurnContext(turn_id=body.get("turn_id"), placement=placement, system_message=message,
                              degraded=f"memoryd unavailable: {error}")
