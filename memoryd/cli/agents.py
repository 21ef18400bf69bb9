"""Commands for agent runtimes: ``memoryd mcp`` (an MCP server) and ``memoryd hook`` (prompt hooks).

Both are clients of a memoryd server over HTTP (``MEMORYD_URL``), so they need no
database and can front a remote memoryd.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from memoryd.cli.base import main
from memoryd.cli.hook import main as answer_hook

MCP_MISSING = "memoryd mcp needs the mcp extra: pip install ./sdk/python 'memoryd[mcp]' (from a clone of memoryd)"


@main.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def hook(arguments: tuple[str, ...]) -> None:
    """Answer an agent runtime's prompt hook: memoryd hook claude-code user-prompt-submit|session-start.

    Reads the hook's JSON on standard input and prints the memories for this prompt as additional context;
    on any failure it prints nothing and exits 0. Settings: MEMORYD_URL, MEMORYD_SESSION_TOKEN.
    """
    raise SystemExit(answer_hook(list(arguments)))


@main.command()
@click.option("--url", envvar="MEMORYD_URL", default="http://127.0.0.1:8080", show_default=True,
              help="The memoryd server (MEMORYD_URL).")
@click.option("--session-token", envvar="MEMORYD_SESSION_TOKEN", default="",
              help="Act as this session (MEMORYD_SESSION_TOKEN); stdio only.")
@click.option("--token", envvar="MEMORYD_TOKEN", default="",
              help="Or open a session with this service or admin token (MEMORYD_TOKEN) ...")
@click.option("--workstream", envvar="MEMORYD_WORKSTREAM", default="", help="... in this workstream (MEMORYD_WORKSTREAM),")
@click.option("--kind", envvar="MEMORYD_SESSION_KIND", default="interactive", show_default=True,
              type=click.Choice(["interactive", "coordinator"]), help="... of this kind (MEMORYD_SESSION_KIND),")
@click.option("--user", envvar="MEMORYD_USER_ID", default="", help="... acting as this user (MEMORYD_USER_ID).")
@click.option("--http", "over_http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio; each "
              "request acts as the session its Authorization: Bearer token names.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --http: the address to listen on.")
@click.option("--port", default=8765, show_default=True, type=int, help="With --http: the port.")
@click.option("--single-tool", is_flag=True, help="Expose the spec's one memory tool instead of one tool per verb.")
def mcp(url: str, session_token: str, token: str, workstream: str, kind: str, user: str, over_http: bool,
        host: str, port: int, single_tool: bool) -> None:
    """Serve memoryd's memory tools to an MCP client (stdio by default)."""
    try:
        from memoryd_sdk import AsyncMemorydServer, MemorydError

        import memoryd.cli.mcp_server as mcp_server
    except ImportError:
        raise click.ClickException(MCP_MISSING) from None
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("MEMORYD_LOG_LEVEL", "INFO"))  # stdout is MCP's
    import anyio

    async def serve() -> None:
        async with AsyncMemorydServer(url, token=token) as client:
            fixed = None
            if not over_http:
                fixed = await _stdio_session(client, session_token, token, workstream, kind, user)
            resolver = mcp_server.SessionResolver(client, fixed)
            server = mcp_server.build_server(resolver, single_tool=single_tool)
            if over_http:
                await mcp_server.serve_http(server, resolver, host, port)
            else:
                await server.run_stdio_async()

    try:
        anyio.run(serve)
    except MemorydError as error:
        raise click.ClickException(f"memoryd at {url}: {error}") from None


async def _stdio_session(client: Any, session_token: str, token: str, workstream: str, kind: str, user: str) -> Any:
    """The session a stdio server acts as: the given session token's, or one opened now."""
    if session_token:
        return await client.session_of(session_token)
    if not token or not workstream:
        raise click.UsageError("set MEMORYD_SESSION_TOKEN (--session-token), or MEMORYD_TOKEN (--token) with "
                               "MEMORYD_WORKSTREAM (--workstream) to open a session")
    return await client.open_session(kind, workstream, user_id=user)
