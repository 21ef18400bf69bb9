"""LangGraph agents with memoryd: ``create_react_agent`` over a fake chat model and a live memoryd.

The model is langchain's ``GenericFakeChatModel`` (canned answers, tool calls included) recording every
list of messages it was sent; the assertions are on those lists: one memoryd block, in the place the
placement says, composed once per user turn, replaced and never stacked, and none at all (the agent
still answering) when memoryd is down or too slow.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from memoryd_sdk import AsyncMemorydServer, MemorydConsole, MemorydServer, Session
from memoryd_sdk.integrations.langgraph import BLOCK_ID, MemorydRecall, memoryd_tools
from pydantic import Field

from tests.helpers import LiveServer, free_port

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")  # create_react_agent
SYSTEM = "You are a coding agent."


class RecordingModel(GenericFakeChatModel):
    """Answers in order from ``messages``; ``received`` holds what each call was sent."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingModel:
        return self


def call(tool: str, call_id: str, **arguments: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": tool, "args": arguments, "id": call_id, "type": "tool_call"}])


def shape(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(message.type, str(message.text)) for message in messages]


@pytest.fixture
def agent_session(live_server: LiveServer) -> Iterator[tuple[Session, MemorydConsole]]:
    agent = live_server.agent("langgraph")
    with MemorydServer(live_server.base_url, token=agent["token"]) as server, \
            MemorydConsole(live_server.base_url, token=live_server.admin_token) as console:
        yield server.session(agent["session_id"], agent["session_token"]), console


def test_a_memory_saved_in_one_turn_is_recalled_once_in_the_next(agent_session: tuple[Session, MemorydConsole]) -> None:
    session, console = agent_session
    model = RecordingModel(messages=iter([
        call("memory_save", "c1", name="code_style", content="tabs, not spaces", description="code style",
             scope="workstream"),
        "Saved.",
        call("memory_search", "c2", query="tabs"),
        "Tabs.",
    ]))
    recall = MemorydRecall(session, system=SYSTEM)
    agent = create_react_agent(model, memoryd_tools(session), prompt=recall.prompt, checkpointer=InMemorySaver())
    thread: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [("user", "remember: I use tabs")]}, thread)
    agent.invoke({"messages": [("user", "tabs or spaces?")]}, thread)

    first, second = console.session_turns(session.session_id).receipts  # one turn per user message, not per call
    assert len(model.received) == 4
    before = "\n\n".join(part for part in [SYSTEM, first.block, first.hint] if part)  # memoryd's composition
    after = "\n\n".join(part for part in [SYSTEM, second.block, second.hint] if part)
    assert first.block == "" and first.hint == ""  # nothing to recall yet
    assert "tabs, not spaces" in second.block
    assert shape(model.received[0]) == [("system", before), ("human", "remember: I use tabs")]
    assert model.received[1][0].text == before and isinstance(model.received[1][-1], ToolMessage)
    assert shape(model.received[2])[0] == ("system", after) and shape(model.received[2])[-1] == ("human",
                                                                                                  "tabs or spaces?")
    assert shape(model.received[3])[0] == ("system", after)
    for received in model.received:  # one system message, memoryd's, and no block anywhere else
        assert [message.type for message in received].count("system") == 1
        assert sum("<memories>" in str(message.text) for message in received) <= 1


def test_tail_placement_puts_the_block_after_the_user_message_and_replaces_an_old_one(
        agent_session: tuple[Session, MemorydConsole]) -> None:
    session, _ = agent_session
    session.memory("save", name="deploy", content="we deploy with buildkite", description="deploys",
                   scope="workstream")
    recall = MemorydRecall(session, placement="tail")  # the system prompt: the conversation's own
    old_block = HumanMessage("<memories>last turn's block</memories>", id=BLOCK_ID)
    question = HumanMessage("how do we deploy?", id="q1")
    composed = recall.compose([SystemMessage(SYSTEM), HumanMessage("hi", id="q0"), old_block, AIMessage("hello"),
                               question])
    again = recall.compose([*composed, AIMessage("", tool_calls=[]), ToolMessage("result", tool_call_id="x")])
    tail = composed[4]
    assert [message.type for message in composed] == ["system", "human", "ai", "human", "human"]
    assert composed[3] is question and tail.id == BLOCK_ID and "we deploy with buildkite" in str(tail.text)
    assert "last turn's block" not in "".join(str(message.text) for message in composed)
    assert [message.id for message in again].count(BLOCK_ID) == 1 and again[4].text == tail.text


def test_a_refused_tool_call_reaches_the_model_as_a_tool_error(agent_session: tuple[Session, MemorydConsole]) -> None:
    session, _ = agent_session
    model = RecordingModel(messages=iter([call("memory_get", "c1", name="never_saved"), "Nothing there."]))
    create_react_agent(model, memoryd_tools(session), prompt=MemorydRecall(session).prompt).invoke(
        {"messages": [("user", "what did I save?")]})
    answer = model.received[1][-1]
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert answer.text == session.memory("get", name="never_saved").text


def unreachable(server: MemorydServer) -> Session:
    return server.session("ses_nowhere", "mdt_nothing")


def test_the_agent_runs_without_memories_when_memoryd_is_down() -> None:
    with MemorydServer(f"http://127.0.0.1:{free_port()}", max_retries=0) as server:
        assert_fails_open(unreachable(server), memoryd_tools(unreachable(server)))


def test_the_agent_runs_without_memories_when_memoryd_does_not_answer_in_time() -> None:
    with socket.socket() as silent:  # takes connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        with MemorydServer(f"http://127.0.0.1:{silent.getsockname()[1]}", max_retries=0) as server:
            assert_fails_open(unreachable(server), [], timeout=0.2)


def assert_fails_open(session: Session, tools: list[Any], timeout: float = 2.0) -> None:
    model = RecordingModel(messages=iter(["Hello."]))
    result = create_react_agent(model, tools, prompt=MemorydRecall(session, system=SYSTEM, timeout=timeout).prompt
                                ).invoke({"messages": [("user", "hi")]})
    assert shape(model.received[0]) == [("system", SYSTEM), ("human", "hi")]
    assert result["messages"][-1].text == "Hello."


def test_an_async_run_recalls_and_saves_through_the_async_session(live_server: LiveServer,
                                                                   agent_session: tuple[Session, MemorydConsole]) -> None:
    session, console = agent_session
    session.memory("save", name="editor", content="we use helix", description="editor", scope="workstream")
    model = RecordingModel(messages=iter([
        call("memory_save", "c1", name="shell", content="we use fish", description="shell", scope="workstream"),
        "Saved."]))

    async def run() -> None:
        async with AsyncMemorydServer(live_server.base_url, token="") as server:
            async_session = server.session(session.session_id, session.token)
            agent = create_react_agent(model, memoryd_tools(session, async_session),
                                       prompt=MemorydRecall(session, async_session, system=SYSTEM).prompt)
            await agent.ainvoke({"messages": [("user", "which editor and shell?")]})

    asyncio.run(run())
    (receipt,) = console.session_turns(session.session_id).receipts
    assert [model.received[0][0].text] * 2 == [message[0].text for message in model.received]
    assert "we use helix" in receipt.block and "we use helix" in str(model.received[0][0].text)
    assert session.memory("get", name="shell", scope="workstream").ok
