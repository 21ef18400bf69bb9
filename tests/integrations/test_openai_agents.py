"""The OpenAI Agents SDK adapter against a live memoryd: an Agent and Runner with a scripted model that records
exactly what it was sent, over multi-step tool loops (memoryd_sdk.integrations.openai_agents)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import nullcontext
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Tool, Usage
from memoryd_sdk import MemorydConsole, MemorydServer, Session
from memoryd_sdk.integrations.openai_agents import MemorydRecall, memoryd_tools
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from tests.helpers import LiveServer
from tests.integrations.outages import outage
from tests.integrations.scenario import DEPLOY_BLOCK, GET, HINT, INSTRUCTIONS, SAVE


class ScriptedModel(Model):
    """Answers each call with the next scripted step (a tool call, or the final text) and records what it was
    sent: the instructions and the input items, as the Runner handed them over."""

    def __init__(self, *steps: tuple[str, dict[str, Any]] | str) -> None:
        self.steps, self.calls = list(steps), list[dict[str, Any]]()

    async def get_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                           **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[self._next(system_instructions, input)], usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions: str | None, input: str | list[Any], *args: Any,
                              **kwargs: Any) -> AsyncIterator[Any]:
        """The same step, streamed as the one event the Runner needs: the completed response."""
        response = Response(id="resp", created_at=0, model="scripted", object="response", tool_choice="auto",
                            tools=[], parallel_tool_calls=False, output=[self._next(system_instructions, input)])
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)

    def _next(self, system_instructions: str | None, input: str | list[Any]) -> Any:
        self.calls.append({"instructions": system_instructions, "input": json.loads(json.dumps(input))})
        step = self.steps.pop(0)
        if isinstance(step, str):
            return ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed", content=[
                ResponseOutputText(type="output_text", text=step, annotations=[])])
        name, arguments = step
        return ResponseFunctionToolCall(id=f"fc_{len(self.calls)}", call_id=f"call_{len(self.calls)}",
                                        type="function_call", name=name, arguments=json.dumps(arguments))


@pytest.fixture
def agent_session(live_server: LiveServer) -> Iterator[Session]:
    agent = live_server.agent("openai agents")
    with MemorydServer(live_server.base_url) as server:
        yield server.session(agent["session_id"], agent["session_token"])


def run(model: ScriptedModel, session: Any, user_input: Any, recall: Callable[..., Any]) -> Any:
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=list[Tool](memoryd_tools(session)))
    config = RunConfig(call_model_input_filter=recall, tracing_disabled=True)
    return asyncio.run(Runner.run(agent, user_input, run_config=config))


def turns_recorded(live_server: LiveServer, session_id: str) -> int:
    with MemorydConsole(live_server.base_url, token=live_server.admin_token) as console:
        return len(console.session_turns(session_id).receipts)


def test_a_memory_saved_in_one_turn_is_in_the_instructions_of_every_step_of_the_next(live_server: LiveServer,
                                                                                     agent_session: Session) -> None:
    recall = MemorydRecall(agent_session)
    first = ScriptedModel(SAVE, ("memory_search", {"query": "buildkite"}), "Saved.")
    result = run(first, agent_session, "Remember: we deploy with buildkite.", recall)
    assert result.final_output == "Saved."
    assert [call["instructions"] for call in first.calls] == [INSTRUCTIONS] * 3  # nothing found, nothing added
    assert "deploy_steps" in first.calls[2]["input"][-1]["output"]  # the search's text reached the model

    second = ScriptedModel(GET, ("memory_list", {}), "With buildkite.")
    run(second, agent_session, [*result.to_input_list(), {"role": "user", "content": "How do we deploy?"}], recall)
    expected = f"{INSTRUCTIONS}\n\n{DEPLOY_BLOCK}\n\n{HINT}"
    assert [call["instructions"] for call in second.calls] == [expected] * 3  # one block, every step, never two
    assert not any("<memories>" in json.dumps(call["input"]) for call in first.calls + second.calls)
    assert turns_recorded(live_server, agent_session.session_id) == 2  # memoryd asked once per user turn
    assert recall.last_turn.items[0].name == "deploy_steps"


def test_a_streamed_run_gets_the_block_once_on_every_step(live_server: LiveServer, agent_session: Session) -> None:
    agent_session.memory("save", **SAVE[1])
    model = ScriptedModel(GET, "With buildkite.")
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=list[Tool](memoryd_tools(agent_session)))
    config = RunConfig(call_model_input_filter=MemorydRecall(agent_session), tracing_disabled=True)

    async def streamed() -> Any:
        result = Runner.run_streamed(agent, "How do we deploy?", run_config=config)
        async for _ in result.stream_events():
            pass
        return result.final_output

    assert asyncio.run(streamed()) == "With buildkite."
    assert [call["instructions"] for call in model.calls] == [f"{INSTRUCTIONS}\n\n{DEPLOY_BLOCK}\n\n{HINT}"] * 2
    assert turns_recorded(live_server, agent_session.session_id) == 1


def test_the_tail_placement_puts_one_reference_message_after_the_users_in_every_step(live_server: LiveServer,
                                                                                     agent_session: Session) -> None:
    agent_session.memory("save", **SAVE[1])
    model = ScriptedModel(GET, "With buildkite.")
    stale = {"role": "user", "content": "Reference data from memoryd, retrieved for this turn. <memories></memories>"}
    run(model, agent_session, [stale, {"role": "user", "content": "How do we deploy?"}],
        MemorydRecall(agent_session, placement="tail"))
    for call in model.calls:
        assert call["instructions"] == INSTRUCTIONS
        user_messages = [item["content"] for item in call["input"] if item.get("role") == "user"]
        assert user_messages[0] == "How do we deploy?"  # the stale copy is gone: replaced, not stacked
        assert len(user_messages) == 2 and user_messages[1].startswith("Reference data from memoryd")
        assert DEPLOY_BLOCK in user_messages[1] and call["input"][1]["content"] == user_messages[1]
    assert turns_recorded(live_server, agent_session.session_id) == 1


def test_a_refusal_is_a_tool_output_the_model_reads(agent_session: Session) -> None:
    model = ScriptedModel(("memory_save", {**SAVE[1], "scope": "coordinator"}), "Sorry.")
    run(model, agent_session, "Remember how we deploy, for the coordinator.", MemorydRecall(agent_session))
    output = model.calls[1]["input"][-1]
    assert output["type"] == "function_call_output"
    assert output["output"].startswith("Error: ") and "coordinator" in output["output"]


def test_the_tools_schemas_name_the_memory_types_and_scopes(agent_session: Session) -> None:
    tools = {tool.name: tool for tool in memoryd_tools(agent_session)}
    assert set(tools) == {"memory_save", "memory_get", "memory_search", "memory_list", "memory_delete"}
    save = tools["memory_save"].params_json_schema
    assert save["properties"]["type"]["anyOf"][0]["enum"] == ["user", "general", "feedback", "reference"]
    assert tools["memory_save"].strict_json_schema


@pytest.mark.parametrize("where", ["down", "silent", "refusing"])
def test_memoryd_down_silent_or_refusing_leaves_the_instructions_alone_and_the_run_goes_on(live_server: LiveServer,
                                                                                           caplog: pytest.LogCaptureFixture,
                                                                                           where: str) -> None:
    agent = live_server.agent(f"openai agents {where}")
    token = "mds_revoked" if where == "refusing" else agent["session_token"]  # a 401, which the SDK raises
    with outage(where) if where != "refusing" else nullcontext(live_server.base_url) as url:
        with MemorydServer(url, max_retries=0) as server:
            session = server.session(agent["session_id"], token)
            model = ScriptedModel("Fine.")
            with caplog.at_level(logging.WARNING, "memoryd_sdk.integrations"):
                result = run(model, session, "How do we deploy? secret-word", MemorydRecall(session, timeout=0.3))
    assert result.final_output == "Fine." and model.calls[0]["instructions"] == INSTRUCTIONS
    assert "failed open" in caplog.text and "secret-word" not in caplog.text
