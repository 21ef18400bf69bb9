"""memoryd as an MCP server: the memory tool, the turn's context, a memory and the session as resources.

It is a client of a memoryd server (through the Python SDK), so it needs no
database and can front a remote memoryd. Every call acts as one memoryd session:
on stdio the one configured at start, over streamable HTTP the one whose token
the request's ``Authorization: Bearer`` carries (an unknown token is refused with
a 401, never mapped to another session).

Tools, one per verb so clients can allow-list them: ``memory_save``,
``memory_get``, ``memory_search``, ``memory_list``, ``memory_delete`` (the
session tool's parameters and text, with its result as structured content) and
``memory_context`` (the turn composer's block and hint for a query or messages,
placement ``tail``, as a preview: a look-up the model makes records no turn).
``single_tool`` exposes the spec's one ``memory`` tool with its five actions
instead. The turn's texts (the hint, the reference-data line) name the tools
this server shows. A refusal (scope rules, the persona's lever, limits) is an MCP tool
error carrying the tool's message.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from memoryd_sdk import AsyncMemorydServer, AsyncSession, AuthenticationError, MemorydError, PermissionDeniedError

log = logging.getLogger("memoryd.mcp")
SESSIONS_KEPT = 1_024
INSTRUCTIONS = ("Persistent, scoped memories for this agent. Search or list them before relying on what you "
                "remember; save what should outlive this conversation (a correction as type 'feedback').")
MemoryType = Literal["user", "general", "feedback", "reference"]
Scope = Literal["global", "workstream", "user", "coordinator", "project"]
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# What the turn's hint and nudges name: the tools this server shows (None: the spec's one memory tool, --single-tool)
PER_VERB_TOOLS = {action: f"memory_{action}" for action in ("save", "get", "search", "delete", "list")}


class SessionResolver:
    """Which memoryd session a call acts as: the configured one, or the one the bearer token names."""

    def __init__(self, server: AsyncMemorydServer, fixed: AsyncSession | None) -> None:
        self.server, self.fixed = server, fixed
        self._known: dict[str, AsyncSession] = {}

    async def session_of(self, token: str) -> AsyncSession | None:
        """The session this token acts as; None when memoryd does not know it as a session token."""
        if (known := self._known.get(token)) is not None:
            return known
        try:
            session = await self.server.session_of(token)
        except (AuthenticationError, PermissionDeniedError):
            return None
        if len(self._known) >= SESSIONS_KEPT:
            self._known.pop(next(iter(self._known)))
        self._known[token] = session
        return session

    async def for_call(self, ctx: Context) -> AsyncSession:
        if self.fixed is not None:
            return self.fixed
        session = await self.session_of(bearer(ctx.headers or {}))
        if session is None:
            raise ToolError("this request carries no memoryd session token (Authorization: Bearer mds_...)")
        return session


def bearer(headers: Any) -> str:
    value = str(headers.get("authorization") or headers.get("Authorization") or "")
    return value[7:].strip() if value[:7].lower() == "bearer " else ""


def build_server(resolver: SessionResolver, *, single_tool: bool = False) -> MCPServer:
    server = MCPServer("memoryd", instructions=INSTRUCTIONS)
    if single_tool:
        _one_tool(server, resolver)
    else:
        _tools(server, resolver)
    _context(server, resolver, None if single_tool else PER_VERB_TOOLS)
    _resources(server, resolver)
    return server


async def _tool_call(resolver: SessionResolver, ctx: Context, action: str, **arguments: Any) -> CallToolResult:
    """The session tool's call; its refusal becomes a tool error with the tool's own message."""
    session = await resolver.for_call(ctx)
    given = {name: value for name, value in arguments.items() if value is not None}
    try:
        result = await session.memory(action, **given)
    except MemorydError as error:
        log.error("memory %s failed: %s", action, error)
        raise ToolError(f"memoryd could not run memory {action}: {error}") from None
    if not result.ok:
        raise ToolError(result.text)
    structured = result.model_dump(mode="json", exclude_none=True)
    return CallToolResult(content=[TextContent(type="text", text=result.text)], structured_content=structured)


def _tools(server: MCPServer, resolver: SessionResolver) -> None:
    async def per_verb(ctx: Context, action: str, **arguments: Any) -> CallToolResult:
        """A call of one verb's tool, whose answers name these tools (``memory_get``, not ``memory``)."""
        return await _tool_call(resolver, ctx, action, tool_names=PER_VERB_TOOLS, **arguments)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                             open_world_hint=False))
    async def memory_save(name: str, content: str, description: str, ctx: Context, type: MemoryType | None = None,
                          scope: Scope | None = None, expected_version: int | None = None) -> CallToolResult:
        """Save a memory, or update the one of this name in its scope. Without a scope: the attached project,
        else global (coordinators: their coordinator scope). The description is a one-line relevance summary.
        With expected_version (a get shows it), only if nobody changed the memory since."""
        return await per_verb(ctx, "save", name=name, content=content, description=description,
                                type=type, scope=scope, expected_version=expected_version)

    @server.tool(annotations=READS)
    async def memory_get(name: str, ctx: Context, scope: Scope | None = None) -> CallToolResult:
        """A memory's full content, by the name (and scope) a search or list showed."""
        return await per_verb(ctx, "get", name=name, scope=scope)

    @server.tool(annotations=READS)
    async def memory_search(query: str, ctx: Context, type: MemoryType | None = None, scope: Scope | None = None,
                            limit: int | None = None) -> CallToolResult:
        """The memories that best match the query (BM25), across every scope this session sees unless one is given."""
        return await per_verb(ctx, "search", query=query, type=type, scope=scope, limit=limit)

    @server.tool(annotations=READS)
    async def memory_list(ctx: Context, type: MemoryType | None = None, scope: Scope | None = None,
                          limit: int | None = None) -> CallToolResult:
        """The most recently updated memories this session sees (limit: default 20, at most 50)."""
        return await per_verb(ctx, "list", type=type, scope=scope, limit=limit)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                             open_world_hint=False))
    async def memory_delete(name: str, ctx: Context, scope: Scope | None = None,
                            expected_version: int | None = None) -> CallToolResult:
        """Delete a memory by name (and scope); with expected_version, only at that version. It stays in
        memoryd's audit log."""
        return await per_verb(ctx, "delete", name=name, scope=scope, expected_version=expected_version)


def _one_tool(server: MCPServer, resolver: SessionResolver) -> None:
    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False))
    async def memory(action: Literal["save", "get", "search", "delete", "list"], ctx: Context,
                     name: str | None = None, content: str | None = None, description: str | None = None,
                     type: MemoryType | None = None, scope: Scope | None = None, query: str | None = None,
                     limit: int | None = None, expected_version: int | None = None) -> CallToolResult:
        """The spec's memory tool: save, get, search, delete or list persistent, scoped memories."""
        return await _tool_call(resolver, ctx, action, name=name, content=content, description=description,
                                type=type, scope=scope, query=query, limit=limit, expected_version=expected_version)


async def _turn_text(resolver: SessionResolver, ctx: Context, query: str | None, messages: list[dict[str, Any]] | None,
                     tool_names: dict[str, str] | None) -> tuple[str, dict[str, Any]]:
    session = await resolver.for_call(ctx)  # a look-up the model asked for, like a search: not a turn of its own
    turn = await session.turn(messages, query=query, placement="tail", preview=True, timeout=10.0, fail_open=False,
                              tool_names=tool_names)
    return (turn.tail_message or {}).get("content", ""), turn.model_dump(mode="json")


def _context(server: MCPServer, resolver: SessionResolver, tool_names: dict[str, str] | None) -> None:
    @server.tool(annotations=READS)
    async def memory_context(ctx: Context, query: str | None = None,
                             messages: list[dict[str, Any]] | None = None) -> CallToolResult:
        """The memories most relevant to a query or to the conversation's last three user messages, as a
        <memories> block to read as reference data, with how many memories are in scope."""
        text, turn = await _guarded(lambda: _turn_text(resolver, ctx, query, messages, tool_names))
        return CallToolResult(content=[TextContent(type="text", text=text or "No memories match.")],
                              structured_content=turn)

    @server.prompt(name="memory_context")
    async def memory_context_prompt(ctx: Context, query: str = "") -> list[dict[str, Any]]:
        """A ready user message holding the memories relevant to the query (or the most recent ones)."""
        text, _ = await _guarded(lambda: _turn_text(resolver, ctx, query or None, None, tool_names))
        return [{"role": "user", "content": {"type": "text", "text": text or "No memories in scope."}}]


def _resources(server: MCPServer, resolver: SessionResolver) -> None:
    @server.resource("memoryd://memories/{scope}/{name}", mime_type="application/json")
    async def memory_resource(scope: str, name: str, ctx: Context) -> str:
        """One memory, by scope and name, as this session sees it."""
        result = await _tool_call(resolver, ctx, "get", name=name, scope=scope)
        return json.dumps((result.structured_content or {}).get("memory", {}))

    @server.resource("memoryd://session/{which}", mime_type="application/json")
    async def session_resource(which: str, ctx: Context) -> str:
        """This session (``current``, or its own id): kind, user, workstream, attached project, memories in scope."""
        session = await resolver.for_call(ctx)
        info = await _guarded(session.describe)
        if which not in ("current", info.session_id):
            raise ToolError("only this session can be read here: memoryd://session/current")
        turn = await _guarded(lambda: session.turn(query="", placement="none", preview=True, fail_open=False))
        scopes = ["coordinator"] if info.kind == "coordinator" else ["global", "workstream"] + (
            ["user"] if info.user_id else [])
        scopes += ["project"] if info.project_id else []  # while the acting user may read it
        return json.dumps(info.model_dump(mode="json", exclude={"token"}) | {
            "scopes": scopes, "in_scope": turn.in_scope, "memory_enabled": turn.memory_enabled})


async def _guarded(call: Callable[[], Awaitable[Any]]) -> Any:
    """Run a call to memoryd; its failure is an MCP error with memoryd's message, logged on standard error."""
    try:
        return await call()
    except MemorydError as error:
        log.error("memoryd call failed: %s", error)
        raise ToolError(f"memoryd: {error}") from None


async def serve_http(server: MCPServer, resolver: SessionResolver, host: str, port: int) -> None:
    """Streamable HTTP at ``/mcp`` (uvicorn, which the mcp package brings), behind the session-token check."""
    import uvicorn

    app = server.streamable_http_app(host=host)
    await uvicorn.Server(uvicorn.Config(token_checked(app, resolver), host=host, port=port, log_level="warning")).serve()


def token_checked(app: Any, resolver: SessionResolver) -> Any:
    """The app, answering 401 to any HTTP request whose bearer token is not a memoryd session's."""

    async def checked(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
            token = bearer(headers)
            try:
                known = bool(token) and await resolver.session_of(token) is not None
            except MemorydError as error:
                return await _refuse(send, 503, f"memoryd is unavailable: {error}")
            if not known:
                return await _refuse(send, 401, "a memoryd session token is required: Authorization: Bearer mds_...")
        await app(scope, receive, send)

    return checked


async def _refuse(send: Any, status: int, message: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="memoryd"')]})
    await send({"type": "http.response.body", "body": json.dumps({"error": message}).encode()})
