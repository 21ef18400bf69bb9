"""``memoryd mcp`` driven by the official MCP client, over stdio and over streamable HTTP, against a live server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, ReadResourceResult, TextContent, TextResourceContents

from tests.helpers import LiveServer, free_port, present, until

TOOLS = {"memory_save", "memory_get", "memory_search", "memory_list", "memory_delete", "memory_context"}


@pytest.fixture(scope="module")
def agent(live_server: LiveServer) -> dict[str, str]:
    return live_server.agent("mcp agent")


def stdio(live_server: LiveServer, agent: dict[str, str], *extra: str, env: dict[str,
          str] | None = None) -> StdioServerParameters:
    settings = {"MEMORYD_URL": live_server.base_url, "MEMORYD_SESSION_TOKEN": agent["session_token"]}
    return StdioServerParameters(command=sys.executable, args=["-m", "memoryd", "mcp", *extra],
                                 env={**os.environ, **(env if env is not None else settings)})


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def resource_text(result: ReadResourceResult) -> str:
    contents = result.contents[0]
    assert isinstance(contents, TextResourceContents)
    return contents.text


def text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


def test_the_tools_have_their_names_schemas_and_annotations(live_server: LiveServer, agent: dict[str, str]) -> None:
    async def scenario() -> None:
        async with Client(stdio(live_server, agent)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            save = tools["memory_save"]
            assert set(save.input_schema["required"]) == {"name", "content", "description"}
            assert save.input_schema["properties"]["type"]["anyOf"][0]["enum"] == ["user", "general", "feedback",
                                                                                  "reference"]
            assert present(tools["memory_get"].annotations).read_only_hint is True
            assert present(tools["memory_search"].annotations).read_only_hint is True
            assert present(tools["memory_delete"].annotations).destructive_hint is True
            assert present(tools["memory_save"].annotations).read_only_hint is False

    run(scenario)


def test_every_tool_over_stdio_with_refusals_as_tool_errors(live_server: LiveServer, agent: dict[str, str]) -> None:
    async def scenario() -> None:
        async with Client(stdio(live_server, agent)) as client:
            saved = await client.call_tool("memory_save", {"name": "mcp_style", "content": "tabs, not spaces",
                                                           "description": "code style", "scope": "workstream"})
            assert not saved.is_error and text(saved) == "Saved memory 'mcp_style' (scope=workstream)"
            assert saved.structured_content["memory"]["name"] == "mcp_style"
            assert saved.structured_content["memory"]["version"] == 1
            stale = await client.call_tool("memory_save", {"name": "mcp_style", "content": "lost", "description": "d",
                                                           "scope": "workstream", "expected_version": 2})
            assert stale.is_error and "at version 1, not 2" in text(stale)
            got = await client.call_tool("memory_get", {"name": "mcp_style", "scope": "workstream"})
            assert "tabs, not spaces" in text(got)
            found = await client.call_tool("memory_search", {"query": "tabs"})
            assert [m["name"] for m in found.structured_content["memories"]] == ["mcp_style"]
            listed = await client.call_tool("memory_list", {"scope": "workstream"})
            assert "[general:workstream] mcp_style" in text(listed)
            assert text(listed).endswith("Call memory_get() with the displayed name and scope for the full content.")
            refused = await client.call_tool("memory_save", {"name": "x", "content": "y", "description": "d",
                                                             "scope": "coordinator"})
            assert refused.is_error and "unavailable to this interactive session" in text(refused)
            missing = await client.call_tool("memory_get", {"name": "nope"})
            assert missing.is_error and "no memory named 'nope'" in text(missing)
            resource = await client.read_resource("memoryd://memories/workstream/mcp_style")
            assert json.loads(resource_text(resource))["content"] == "tabs, not spaces"
            session = json.loads(resource_text(await client.read_resource("memoryd://session/current")))
            assert session["session_id"] == agent["session_id"] and session["in_scope"] >= 1
            prompt = await client.get_prompt("memory_context", {"query": "tabs or spaces"})
            assert isinstance(prompt.messages[0].content, TextContent) and "mcp_style" in prompt.messages[0].content.text
            deleted = await client.call_tool("memory_delete", {"name": "mcp_style", "scope": "workstream",
                                                               "expected_version": 1})
            assert not deleted.is_error and text(deleted).startswith("Deleted memory 'mcp_style'")

    run(scenario)


def test_memory_context_is_the_http_turn_for_the_same_session_and_query(live_server: LiveServer, agent: dict[str, str]) -> None:
    headers = {"Authorization": f"Bearer {agent['session_token']}"}
    saved = httpx.post(f"{live_server.base_url}/v1/api/sessions/{agent['session_id']}/memory", headers=headers,
                       json={"action": "save", "name": "mcp_deploy", "content": "we deploy with buildkite",
                             "description": "how we deploy", "scope": "workstream"})
    assert saved.json()["ok"]

    async def scenario() -> dict[str, Any]:
        async with Client(stdio(live_server, agent)) as client:
            result = await client.call_tool("memory_context", {"query": "how do we deploy"})
            assert not result.is_error
            return {"text": text(result), "turn": result.structured_content}

    context = anyio.run(scenario)
    turn = httpx.post(f"{live_server.base_url}/v1/api/sessions/{agent['session_id']}/turns", headers=headers,
                      json={"query": "how do we deploy", "placement": "tail", "preview": True,
                            "tool_names": {action: f"memory_{action}" for action in ("save", "get", "search", "delete",
                                                                                     "list")}}).json()
    assert "verify with memory_get() before" in context["text"]  # the tools this server shows, by their names
    assert "Use memory_search() or memory_list() to find more." in context["text"]
    assert context["turn"]["turn"] is None and context["turn"]["receipt_id"] is None  # a look-up, not a turn
    assert context["text"] == turn["tail_message"]["content"] and "mcp_deploy" in context["text"]
    assert context["turn"]["block"] == turn["block"] and context["turn"]["block_sha256"] == turn["block_sha256"]


def test_the_single_tool_mode_exposes_the_specs_memory_tool(live_server: LiveServer, agent: dict[str, str]) -> None:
    async def scenario() -> None:
        async with Client(stdio(live_server, agent, "--single-tool")) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {"memory", "memory_context"}
            saved = await client.call_tool("memory", {"action": "save", "name": "deploy_steps", "scope": "workstream",
                                                      "content": "we deploy with a blue-green switch",
                                                      "description": "how we deploy"})
            assert not saved.is_error
            listed = await client.call_tool("memory", {"action": "list"})
            assert text(listed).endswith("Call memory(action='get') with the displayed name and scope for the full "
                                         "content.")
            bad = await client.call_tool("memory", {"action": "save", "name": "x"})
            assert bad.is_error and "content" in text(bad)
            context = text(await client.call_tool("memory_context", {"query": "how do we deploy"}))
            assert "verify with memory(action='get') before" in context  # the one tool, as the spec names it

    run(scenario)


def test_a_missing_setting_stops_it_with_a_message_naming_it(live_server: LiveServer) -> None:
    done = subprocess.run([sys.executable, "-m", "memoryd", "mcp"], capture_output=True, text=True, timeout=60,
                          env={key: value for key, value in os.environ.items() if not key.startswith("MEMORYD_")})
    assert done.returncode != 0 and "MEMORYD_SESSION_TOKEN" in done.stderr
    done = subprocess.run([sys.executable, "-m", "memoryd", "mcp"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MEMORYD_URL": live_server.base_url, "MEMORYD_SESSION_TOKEN": "mds_nope"})
    assert done.returncode != 0 and "HTTP 401" in done.stderr


@pytest.fixture(scope="module")
def http_server(live_server: LiveServer) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "memoryd", "mcp", "--http", "--port", str(port)],
                              env={**os.environ, "MEMORYD_URL": live_server.base_url},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/mcp").status_code == 401
        except httpx.TransportError:
            return False

    try:
        until(listening, "memoryd mcp --http to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(10)


@asynccontextmanager
async def http_client(url: str, token: str) -> AsyncIterator[Client]:
    """The official client over streamable HTTP, sending the session's token as a bearer token."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(_Transport(streamable_http_client(url, http_client=http))) as client:
        yield client


class _Transport:
    """A transport context ``Client`` can enter (the streamable HTTP one, made with our HTTP client)."""

    def __init__(self, context: Any) -> None:
        self.context = context

    async def __aenter__(self) -> Any:
        return await self.context.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self.context.__aexit__(*exc_info)


def test_over_streamable_http_each_request_acts_as_its_bearer_tokens_session(http_server: str, agent: dict[str, str]) -> None:
    async def scenario() -> None:
        async with http_client(http_server, agent["session_token"]) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            saved = await client.call_tool("memory_save", {"name": "http_note", "content": "over http",
                                                           "description": "d", "scope": "workstream"})
            assert not saved.is_error
            session = json.loads(resource_text(await client.read_resource("memoryd://session/current")))
            assert session["session_id"] == agent["session_id"]

    run(scenario)
    refused = httpx.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                         headers={"Authorization": "Bearer mds_not_a_session", "Accept": "application/json"})
    assert refused.status_code == 401 and "session token" in refused.json()["error"]
    assert httpx.post(http_server, json={}).status_code == 401
