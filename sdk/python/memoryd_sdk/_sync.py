"""The synchronous clients: ``MemorydServer`` (the public API), ``MemorydConsole`` (admins) and ``Session``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx

from memoryd_sdk import _calls as calls
from memoryd_sdk import models
from memoryd_sdk._transport import SyncTransport, TokenFactory, client_options
from memoryd_sdk.errors import APIConnectionError, MemorydAPIError

UNSET: Any = object()


class _Client:
    def __init__(self, base_url: str = "http://localhost:8080", token: str = "", timeout: float = 30.0,
                 httpx_client: httpx.Client | None = None, ca_cert: str | None = None, client_cert: str | None = None,
                 client_key: str | None = None, token_factory: TokenFactory | None = None, *,
                 max_retries: int = 2, retry_deadline: float = 30.0, read_your_writes: bool = True) -> None:
        client = httpx_client or httpx.Client(**client_options(timeout, ca_cert, client_cert, client_key))
        self._transport = SyncTransport(client, httpx_client is None, base_url=base_url, token=token,
                                        token_factory=token_factory, max_retries=max_retries,
                                        retry_deadline=retry_deadline, read_your_writes=read_your_writes)

    def open_session(self, kind: str, workstream_id: str, *, user_id: str = "",
                     parent_session_id: str = "") -> Session:
        """Open an agent session (a service token or an admin); the handle acts with the session's own token."""
        info = self._transport.send(calls.open_session(kind, workstream_id, user_id, parent_session_id))
        return Session(self._transport, info.session_id, info.token, info)

    def session(self, session_id: str, token: str) -> Session:
        """A handle on a session opened earlier."""
        return Session(self._transport, session_id, token)

    def session_of(self, token: str) -> Session:
        """A handle on the session a session token acts as (all an MCP server or a hook may hold)."""
        info = Session(self._transport, "", token).describe()
        return Session(self._transport, info.session_id, token, info)

    def current_token(self) -> models.TokenInfo:
        """The caller's own token as a list shows it (its user, scopes, expiry; never its secret)."""
        return self._transport.send(calls.current_token())

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class MemorydServer(_Client):
    """The public memory API, with the reference SDK's method names and parameters."""

    def list_memories(self, *, mem_type: str = "", scope: str = "", scope_id: str = "",
                      limit: int = 100, after: str = "") -> models.ListMemoriesResponse:
        """A page of the list, newest first; ``after`` is the previous page's ``next_after`` (None on the last)."""
        return self._transport.send(calls.list_memories(mem_type, scope, scope_id, limit, after))

    def iter_memories(self, *, mem_type: str = "", scope: str = "", scope_id: str = "",
                      page: int = 200) -> Iterator[models.MemoryInfo]:
        """Every memory of the list, newest first, fetched ``page`` at a time. Writes meanwhile move what they
        touch to the front: it may be met again, or not at all; every other memory is met once."""
        after = ""
        while True:
            found = self._transport.send(calls.list_memories(mem_type, scope, scope_id, page, after))
            yield from found.memories
            if found.next_after is None:
                return
            after = found.next_after

    def save_memory(self, name: str, content: str, *, description: str, mem_type: str | None = "general",
                    scope: str = "global", scope_id: str = "") -> models.MemoryInfo:
        """Save or update; ``mem_type=None`` sends no type, so an update keeps the stored one."""
        return self._transport.send(calls.save_memory(name, content, description, mem_type, scope, scope_id))

    def search_memories(self, query: str, *, mem_type: str = "", scope: str = "", scope_id: str = "",
                        limit: int = 20, offset: int = 0) -> models.ListMemoriesResponse:
        """The ``limit`` best hits after the ``offset`` best (``offset`` at most 10,000)."""
        return self._transport.send(calls.search_memories(query, mem_type, scope, scope_id, limit, offset))

    def iter_search_memories(self, query: str, *, mem_type: str = "", scope: str = "", scope_id: str = "",
                             page: int = 50) -> Iterator[models.MemoryInfo]:
        """Every hit, best first, fetched ``page`` at a time by offset, as deep as the offset cap allows (10,000
        and one page). Each page is ranked when it is read: a write meanwhile may shift a hit across pages."""
        offset = 0
        while True:
            found = self._transport.send(calls.search_memories(query, mem_type, scope, scope_id, page, offset))
            yield from found.memories
            offset += page
            if len(found.memories) < page or offset > calls.SEARCH_OFFSET_CAP:
                return

    def get_memory(self, name: str, *, scope: str = "global", scope_id: str = "") -> models.MemoryInfo:
        return self._transport.send(calls.get_memory(name, scope, scope_id))

    def write_memories(self, writes: list[dict[str, Any]]) -> models.WriteResult:
        """Saves and deletes in order, all or none, in one append: each write is ``{"action": "save", "name",
        "content", "description", "type", "scope", "scope_id", "expected_version"}`` or ``{"action": "delete",
        "name", "scope", "scope_id", "expected_version", "missing_ok"}``. A refusal names the write (``writes[2]:
        ...``) and nothing is written."""
        return self._transport.send(calls.write_memories(writes))

    def delete_memory(self, name: str, *, scope: str = "global", scope_id: str = "") -> models.StatusResponse:
        return self._transport.send(calls.delete_memory(name, scope, scope_id))

    def health(self) -> dict[str, Any]:
        """``/readyz``: ready, or why not (raises ``NotCaughtUpError`` while a projection lags or is stopped)."""
        return self._transport.send(calls.health())


class MemorydConsole(_Client):
    """The admin API: every scope, by memory id; projects, workstreams, sessions' receipts, the audit log and the log itself."""

    def list_memories(self, *, mem_type: str = "", scope: str = "", scope_id: str = "", limit: int = 100,
                      as_of: int | str | datetime | None = None, offset: int = 0) -> models.ListMemoriesResponse:
        """Every scope's memories, newest first, from ``offset`` on; with ``as_of`` (a log position, an ISO 8601
        time or an aware ``datetime``), as the list was then, built from the log."""
        return self._transport.send(calls.admin_list_memories(mem_type, scope, scope_id, limit, as_of, offset))

    def search_memories(self, query: str, *, mem_type: str = "", scope: str = "", scope_id: str = "",
                        limit: int = 20, as_of: int | str | datetime | None = None) -> models.ListMemoriesResponse:
        """Search every scope; with ``as_of``, over the memories as they were then, ranked as they were then."""
        return self._transport.send(calls.admin_search_memories(query, mem_type, scope, scope_id, limit, as_of))

    def get_memory(self, memory_id: str, *, as_of: int | str | datetime | None = None) -> models.AdminMemoryInfo:
        """A memory by id; with ``as_of``, as it was then (``NotFoundError`` if it did not exist then)."""
        return self._transport.send(calls.admin_get_memory(memory_id, as_of))

    def delete_memory(self, memory_id: str) -> models.StatusResponse:
        return self._transport.send(calls.admin_delete_memory(memory_id))

    def memory_history(self, memory_id: str) -> models.MemoryHistory:
        """Every write of one memory, oldest first, from the log (deleted memories too)."""
        return self._transport.send(calls.memory_history(memory_id))

    def restore_memory(self, memory_id: str, version: int) -> models.MemoryInfo:
        """Bring a version back (as its history lists it), as a new write audited like any save."""
        return self._transport.send(calls.restore_memory(memory_id, version))

    def edit_memory(self, memory_id: str, *, content: str | None = None, description: str | None = None,
                    mem_type: str | None = None, if_match: int | None = None) -> models.AdminMemoryInfo:
        """Change a memory's content, description or type (those given), in whichever scope it is; at the
        ``if_match`` version (else a ``MemorydAPIError`` with status 412 and the current version), else at the one
        memoryd reads."""
        return self._transport.send(calls.edit_memory(memory_id, content, description, mem_type, if_match))

    def preview_erasure(self, *, user_id: str | None = None, memory_id: str | None = None, scope: str | None = None,
                        scope_id: str | None = None) -> models.ErasurePreview:
        """What ``erase`` with the same selector would take now: the memories and the log positions."""
        selector = {"user_id": user_id, "memory_id": memory_id, "scope": scope, "scope_id": scope_id}
        return self._transport.send(calls.preview_erasure(selector))

    def verify_chain(self, *, page: int = 2000) -> Iterator[models.ChainPage]:
        """Walk the log's hash chain ``page`` events a request, yielding each page (its ``reached`` position
        is the progress); the last one is ``complete``, or names where the chain is ``broken``."""
        after, digest = 0, ""
        while True:
            found = self._transport.send(calls.chain_page(after, digest, page))
            yield found
            if found.complete or found.broken is not None:
                return
            after, digest = found.reached.position, found.reached.hash

    def erase(self, *, reason: str, user_id: str | None = None, memory_id: str | None = None,
              scope: str | None = None, scope_id: str | None = None) -> models.ErasureCertificate:
        """Erase a user's memories, one memory, or a namespace's (``scope`` and ``scope_id``) from the log and
        every read model; name exactly one. The certificate lists what was erased and each store read back."""
        selector = {"user_id": user_id, "memory_id": memory_id, "scope": scope, "scope_id": scope_id}
        return self._transport.send(calls.erase(selector, reason))

    def iter_audit(self, *, action: str = "", actor: str = "", memory_id: str = "", project_id: str = "",
                   after: int = 0, since: str = "", page: int = 100) -> Iterator[models.AuditRecord]:
        """Every audit record after ``after`` (and from the ISO 8601 time ``since``), oldest first, fetched
        ``page`` at a time."""
        while True:
            found = self._transport.send(calls.audit(after, page, action, actor, memory_id, project_id, since))
            yield from found.records
            if len(found.records) < page:
                return
            after = found.next_after

    def iter_events(self, *, after: int = 0, page: int = 100) -> Iterator[models.LoggedEvent]:
        """The log itself after position ``after``, oldest first, fetched ``page`` at a time (a change feed:
        resume from the last ``position`` seen)."""
        while True:
            found = self._transport.send(calls.events(after, page))
            yield from found.events
            if len(found.events) < page:
                return
            after = found.next_after

    def create_project(self, name: str, owner: str) -> models.ProjectInfo:
        return self._transport.send(calls.create_project(name, owner))

    def get_project(self, project_id: str) -> models.ProjectInfo:
        return self._transport.send(calls.get_project(project_id))

    def delete_project(self, project_id: str) -> dict[str, Any]:
        """Delete a project and every memory in its scope."""
        return self._transport.send(calls.delete_project(project_id))

    def grant_access(self, project_id: str, user_id: str, access: str) -> models.ProjectInfo:
        return self._transport.send(calls.grant_access(project_id, user_id, access))

    def revoke_access(self, project_id: str, user_id: str) -> models.ProjectInfo:
        return self._transport.send(calls.revoke_access(project_id, user_id))

    def archive_project(self, project_id: str) -> models.ProjectInfo:
        return self._transport.send(calls.project_state(project_id, "archive"))

    def reactivate_project(self, project_id: str) -> models.ProjectInfo:
        return self._transport.send(calls.project_state(project_id, "reactivate"))

    def create_workstream(self, name: str, *, owner: str | None = None, project_id: str | None = None,
                          memory: bool = True) -> models.WorkstreamInfo:
        return self._transport.send(calls.create_workstream(name, owner, project_id, memory))

    def update_workstream(self, workstream_id: str, *, project_id: str | None = UNSET,
                          memory: bool | None = None) -> models.WorkstreamInfo:
        """Attach (a project id) or detach (None) a project, or set the persona's memory lever."""
        changes: dict[str, Any] = {} if project_id is UNSET else {"project_id": project_id}
        if memory is not None:
            changes["persona"] = {"memory": memory}
        return self._transport.send(calls.update_workstream(workstream_id, changes))

    def session_turns(self, session_id: str, *, after: int = 0, limit: int = 50) -> models.ReceiptPage:
        """A session's turn receipts in turn order, after turn ``after``."""
        return self._transport.send(calls.session_turns(session_id, after, limit))

    def turns_showing(self, memory_id: str, *, limit: int = 20) -> models.ReceiptList:
        """The newest turns' receipts, in any session, that put this memory in front of the model."""
        return self._transport.send(calls.turns_showing(memory_id, limit))

    def list_projects(self, *, owner: str = "", member: str = "", state: str = "", after: str = "",
                      limit: int = 100) -> models.ProjectPage:
        """Projects by id, a page at a time (pass ``next_after`` as ``after``); ``state``: active or archived."""
        return self._transport.send(calls.list_projects(owner, member, state, after, limit))

    def list_workstreams(self, *, owner: str = "", member: str = "", project_id: str = "", after: str = "",
                         limit: int = 100) -> models.WorkstreamPage:
        """Workstreams by id, a page at a time; ``member``: attached to a project this user is in."""
        return self._transport.send(calls.list_workstreams(owner, member, project_id, after, limit))

    def list_users(self, *, state: str = "", name: str = "", after: str = "", limit: int = 100) -> models.UserPage:
        """Users by id, a page at a time; ``state``: active or deactivated."""
        return self._transport.send(calls.list_users(state, name, after, limit))

    def create_user(self, name: str) -> models.UserInfo:
        """A new user (a name taken is a ``ConflictError``)."""
        return self._transport.send(calls.create_user(name))

    def get_user(self, user_id: str) -> models.UserInfo:
        return self._transport.send(calls.get_user(user_id))

    def deactivate_user(self, user_id: str, *, reason: str = "") -> models.UserInfo:
        """The user's tokens and sessions are refused at once (``reason`` goes in the audit trail)."""
        return self._transport.send(calls.user_state(user_id, "deactivate", reason))

    def reactivate_user(self, user_id: str, *, reason: str = "") -> models.UserInfo:
        """The user's tokens and sessions work again."""
        return self._transport.send(calls.user_state(user_id, "reactivate", reason))

    def list_tokens(self, *, user_id: str = "", state: str = "", after: str = "",
                    limit: int = 100) -> models.TokenPage:
        """Tokens by id (never their secret), a page at a time; ``state``: active, revoked or expired."""
        return self._transport.send(calls.list_tokens(user_id, state, after, limit))

    def create_token(self, user_id: str, scopes: list[str], *, permissions: list[str] | None = None, name: str = "",
                     expires_at: str | None = None, expires_in_days: int | None = None) -> models.CreatedToken:
        """A new token for a user; its secret (``token``) is in this answer only. Without ``expires_at`` or
        ``expires_in_days`` it expires as the server's ``[auth] default_token_days`` says."""
        return self._transport.send(calls.create_token(user_id, scopes, list(permissions or []), name, expires_at,
                                                       expires_in_days))

    def revoke_token(self, token_id: str, *, reason: str = "") -> models.TokenInfo:
        """Revoke a token: its next request, to any memoryd process, is refused."""
        return self._transport.send(calls.revoke_token(token_id, reason))

    def list_sessions(self, *, user_id: str = "", workstream_id: str = "", state: str = "", after: str = "",
                      limit: int = 100) -> models.SessionPage:
        """Sessions by id (never their token), a page at a time; ``state``: open or closed."""
        return self._transport.send(calls.list_sessions(user_id, workstream_id, state, after, limit))

    def close_session(self, session_id: str, *, reason: str = "") -> models.ClosedSessions:
        """Close a session and a coordinator's children: their tokens are refused from then on."""
        return self._transport.send(calls.close_session(session_id, reason))


class Session:
    """An agent session: its memory tool, its turns, its tool-loop signals and its receipts.

    ``token`` is the session's own token, what acts as this session and nothing else: hand it to an MCP
    server or a prompt hook (``MEMORYD_SESSION_TOKEN``). ``info`` is what memoryd answered when it was
    opened or looked up (None for ``session(session_id, token)``)."""

    def __init__(self, parent: SyncTransport, session_id: str, token: str, info: models.SessionInfo | None = None):
        self._transport = SyncTransport(parent.client, False, **parent.options(token))
        self.session_id, self.token, self.info = session_id, token, info

    def describe(self) -> models.SessionInfo:
        """The session as memoryd has it (kind, user, workstream, attached project); never its token."""
        return self._transport.send(calls.current_session())

    def memory(self, action: str, **arguments: Any) -> models.ToolResult:
        """One memory tool call (save, get, search, delete, list); a refusal is ``ok=False``, not an exception."""
        return self._transport.send(calls.tool(self.session_id, action, arguments))

    def turn(self, messages: list[dict[str, Any]] | None = None, *, query: str | None = None,
             system: str | None = None, placement: str = "system", turn_id: str | None = None,
             tool_visible: bool = True, relevance_k: int | None = None, max_chars: int | None = None,
             min_score: float | None = None, preview: bool = False, timeout: float = 2.0,
             fail_open: bool = True, tool_names: dict[str, str] | None = None) -> models.TurnContext:
        """What to put in front of the model this turn. With ``fail_open`` an unreachable or failing memoryd
        gives an empty context (``degraded`` says why) within ``timeout`` instead of raising. ``tool_names``: the
        memory tool as the model sees it, which the hint and nudges name (``{"search": "memory_search", ...}``;
        None: the spec's one ``memory`` tool)."""
        call = calls.turn(self.session_id, calls.turn_body(messages, query, system, placement, turn_id, tool_visible,
                                                           relevance_k, max_chars, min_score, preview, tool_names),
                          timeout)
        try:
            return self._transport.send(call)
        except (APIConnectionError, MemorydAPIError) as error:
            if not fail_open or (isinstance(error, MemorydAPIError) and error.status_code < 500):
                raise
            return calls.failed_turn(call, error)

    def signal(self, event: str, *, results: list[dict[str, Any]] | None = None,
               tool_names: dict[str, str] | None = None) -> list[models.Nudge]:
        """``resume``, or ``tool_results`` with ``[{"tool", "error", "denied"}]``: the nudges it earns (naming the
        tool as ``tool_names`` says, as in ``turn``)."""
        answer = self._transport.send(calls.signal(self.session_id, event, results, tool_names))
        return [models.Nudge.model_validate(nudge) for nudge in answer["nudges"]]

    def receipt(self, turn_id: str) -> models.Receipt:
        return self._transport.send(calls.receipt(self.session_id, turn_id))
