"""The Pydantic AI capability against a live memoryd: an Agent driven by FunctionModel (and TestModel), which
record exactly what the model was sent, over multi-step tool loops (memoryd_sdk.integrations.pydantic_ai)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from memoryd_sdk import AsyncMemorydServer, MemorydConsole
from memoryd_sdk.integrations.pydantic_ai import MemorydMemory
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.test import TestModel

from tests.helpers import LiveServer
from tests.integrations.outages import outage
from tests.integrations.scenario import DEPLOY_BLOCK, GET, HINT, INSTRUCTIONS, SAVE


class Script:
    """A FunctionModel's function (``respond``, or ``stream``): each call answers the next step (a tool call, or
    the final text) and records the instructions, the messages and the tools the model was sent."""

    def __init__(self, *steps: tuple[str, dict[str, Any]] | str) -> None:
        self.steps, self.calls = list(steps), list[dict[str, Any]]()

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append({"instructions": info.instructions, "messages": list(messages),
                           "tools": [tool.name for tool in info.function_tools]})
        step = self.steps.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(step[0], step[1])])

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        """The same script, streamed: a step's text, or its tool call, as one chunk."""
        response = self.respond(messages, info)
        for part in response.parts:
            if isinstance(part, TextPart):
                yield part.content
            else:
                assert isinstance(part, ToolCallPart)
                yield {0: DeltaToolCall(part.tool_name, json.dumps(part.args))}

    def user_texts(self, call: int) -> list[str]:
        return [part.content for message in self.calls[call]["messages"] if isinstance(message, ModelRequest)
                for part in message.parts if isinstance(part, UserPromptPart) and isinstance(part.content, str)]

    def tool_returns(self, call: int) -> list[str]:
        return [str(part.content) for message in self.calls[call]["messages"] if isinstance(message, ModelRequest)
                for part in message.parts if isinstance(part, ToolReturnPart)]


@pytest.fixture
def agent_session(live_server: LiveServer) -> dict[str, str]:
    return live_server.agent("pydantic ai")


def with_session(url: str, agent: dict[str, str], scenario: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run a scenario on an AsyncSession of the agent's session, through memoryd at ``url``."""
    async def run() -> Any:
        async with AsyncMemorydServer(url, max_retries=0) as server:
            return await scenario(server.session(agent["session_id"], agent["session_token"]))

    return asyncio.run(run())


def turns_recorded(live_server: LiveServer, session_id: str) -> int:
    with MemorydConsole(live_server.base_url, token=live_server.admin_token) as console:
        return len(console.session_turns(session_id).receipts)


def test_a_memory_saved_in_one_turn_is_in_the_instructions_of_every_step_of_the_next(live_server: LiveServer,
                                                                                     agent_session: dict[str, str]) -> None:
    first = Script(SAVE, ("memory_search", {"query": "buildkite"}), "Saved.")
    second = Script(GET, ("memory_list", {}), "With buildkite.")

    async def scenario(session: Any) -> Any:
        memory = MemorydMemory(session)
        one = await Agent(FunctionModel(first.respond), instructions=INSTRUCTIONS, capabilities=[memory]).run(
            "Remember: we deploy with buildkite.")
        two = await Agent(FunctionModel(second.respond), instructions=INSTRUCTIONS, capabilities=[memory]).run(
            "How do we deploy?", message_history=one.all_messages())
        return one, two, memory

    one, two, memory = with_session(live_server.base_url, agent_session, scenario)
    assert one.output == "Saved." and two.output == "With buildkite."
    assert [call["instructions"] for call in first.calls] == [INSTRUCTIONS] * 3  # nothing found, nothing added
    assert "deploy_steps" in first.tool_returns(2)[-1]
    assert set(first.calls[0]["tools"]) == {"memory_save", "memory_get", "memory_search", "memory_list", "memory_delete"}
    expected = f"{INSTRUCTIONS}\n\n{DEPLOY_BLOCK}\n\n{HINT}"
    assert [call["instructions"] for call in second.calls] == [expected] * 3  # one block, every step, never two
    assert second.user_texts(2) == ["Remember: we deploy with buildkite.", "How do we deploy?"]
    # the history records each request's instructions as sent; its parts never hold a block
    assert [message.instructions for message in two.new_messages() if isinstance(message, ModelRequest)] == [expected] * 3
    assert "we deploy with buildkite" in second.tool_returns(2)[-2]  # memory_get's text
    assert turns_recorded(live_server, agent_session["session_id"]) == 2  # memoryd asked once per user turn
    assert memory.last_turn.items[0].name == "deploy_steps"


def test_a_streamed_run_gets_the_block_once_on_every_step(live_server: LiveServer, agent_session: dict[str, str]) -> None:
    script = Script(GET, "With buildkite.")

    async def scenario(session: Any) -> Any:
        await session.memory("save", **SAVE[1])
        agent = Agent(FunctionModel(stream_function=script.stream), instructions=INSTRUCTIONS,
                      capabilities=[MemorydMemory(session)])
        async with agent.run_stream("How do we deploy?") as streamed:
            return await streamed.get_output()

    assert with_session(live_server.base_url, agent_session, scenario) == "With buildkite."
    assert [call["instructions"] for call in script.calls] == [f"{INSTRUCTIONS}\n\n{DEPLOY_BLOCK}\n\n{HINT}"] * 2
    assert turns_recorded(live_server, agent_session["session_id"]) == 1


def test_the_tail_placement_adds_one_reference_part_after_the_users_and_never_to_the_history(live_server: LiveServer,
                                                                                            agent_session: dict[str,
                                                                                            str]) -> None:
    script = Script(GET, "With buildkite.")

    async def scenario(session: Any) -> Any:
        await session.memory("save", **SAVE[1])
        agent = Agent(FunctionModel(script.respond), instructions=INSTRUCTIONS,
                      capabilities=[MemorydMemory(session, placement="tail")])
        stale = "Reference data from memoryd, retrieved for this turn. <memories></memories>"  # persisted elsewhere
        return await agent.run("How do we deploy?", message_history=[ModelRequest(parts=[UserPromptPart(stale)]),
                                                                     ModelResponse(parts=[TextPart("Noted.")])])

    result = with_session(live_server.base_url, agent_session, scenario)
    for call, _ in enumerate(script.calls):  # the stale copy is gone: replaced, not stacked
        assert script.calls[call]["instructions"] == INSTRUCTIONS
        asked, reference = script.user_texts(call)
        assert asked == "How do we deploy?"
        assert reference.startswith("Reference data from memoryd") and DEPLOY_BLOCK in reference
    history = [part for message in result.new_messages() for part in message.parts]
    assert not any("Reference data from memoryd" in str(getattr(part, "content", "")) for part in history)
    assert turns_recorded(live_server, agent_session["session_id"]) == 1


def test_without_its_tools_the_block_comes_without_the_hint_that_names_them(live_server: LiveServer, agent_session: dict[str,
                                                                            str]) -> None:
    script = Script("With buildkite.")

    async def scenario(session: Any) -> Any:
        await session.memory("save", **SAVE[1])
        agent = Agent(FunctionModel(script.respond), instructions=INSTRUCTIONS,
                      capabilities=[MemorydMemory(session, tools=False)])
        return await agent.run("How do we deploy?")

    with_session(live_server.base_url, agent_session, scenario)
    assert script.calls[0]["instructions"] == f"{INSTRUCTIONS}\n\n{DEPLOY_BLOCK}"
    assert script.calls[0]["tools"] == []


def test_a_refusal_is_a_failed_tool_result_the_model_reads(live_server: LiveServer, agent_session: dict[str, str]) -> None:
    script = Script(("memory_save", {**SAVE[1], "scope": "coordinator"}), "Sorry.")

    async def scenario(session: Any) -> Any:
        agent = Agent(FunctionModel(script.respond), instructions=INSTRUCTIONS, capabilities=[MemorydMemory(session)])
        return await agent.run("Remember how we deploy, for the coordinator.")

    assert with_session(live_server.base_url, agent_session, scenario).output == "Sorry."
    [failure] = script.calls[1]["messages"][-1].parts
    assert (failure.tool_name, failure.outcome) == ("memory_save", "failed")  # the provider's error channel
    assert "coordinator" in failure.model_response_str()


def test_a_miss_points_the_model_at_this_frameworks_get_tool(live_server: LiveServer, agent_session: dict[str, str]) -> None:
    script = Script(("memory_get", {"name": "deploy_steps"}), "Found it elsewhere.")

    async def scenario(session: Any) -> Any:
        await session.memory("save", **SAVE[1])
        agent = Agent(FunctionModel(script.respond), instructions=INSTRUCTIONS, capabilities=[MemorydMemory(session)])
        return await agent.run("What are the deploy steps?")

    with_session(live_server.base_url, agent_session, scenario)
    [miss] = script.calls[1]["messages"][-1].parts
    assert miss.outcome == "failed"
    assert "call memory_get(name='deploy_steps', scope='workstream')" in miss.model_response_str()


def test_test_model_calls_every_tool_and_the_run_completes(live_server: LiveServer, agent_session: dict[str, str]) -> None:
    async def scenario(session: Any) -> Any:
        agent = Agent(TestModel(call_tools=["memory_list", "memory_search"]), capabilities=[MemorydMemory(session)])
        return await agent.run("What do you remember?")

    result = with_session(live_server.base_url, agent_session, scenario)
    called = [part.tool_name for message in result.all_messages() for part in message.parts
              if isinstance(part, ToolCallPart)]
    assert sorted(called) == ["memory_list", "memory_search"]


@pytest.mark.parametrize("where", ["down", "silent"])
def test_memoryd_down_or_silent_leaves_the_instructions_alone_and_the_run_goes_on(agent_session: dict[str, str],
                                                                                  caplog: pytest.LogCaptureFixture,
                                                                                  where: str) -> None:
    script = Script("Fine.")

    async def scenario(session: Any) -> Any:
        agent = Agent(FunctionModel(script.respond), instructions=INSTRUCTIONS,
                      capabilities=[MemorydMemory(session, timeout=0.3)])
        return await agent.run("How do we deploy? secret-word")

    with outage(where) as url, caplog.at_level(logging.WARNING, "memoryd_sdk.integrations"):
        result = with_session(url, agent_session, scenario)
    assert result.output == "Fine." and script.calls[0]["instructions"] == INSTRUCTIONS
    assert "failed open" in caplog.text and "secret-word" not in caplog.text
