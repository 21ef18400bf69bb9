"""The hint, the nudges and the tail's reference line name the memory tool as the model sees it (``tool_names``)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.helpers import AgentSession, World

PER_VERB = {action: f"memory_{action}" for action in ("save", "get", "search", "delete", "list")}


@pytest.fixture
def agent(world: World) -> AgentSession:
    agent = world.session(world.workstream(world.owner), world.owner)
    agent.save("style_guide", "tabs, not spaces", scope="user")
    return agent


def test_without_tool_names_the_texts_name_the_specs_memory_tool(agent: AgentSession) -> None:
    turn = agent.turn("what style do we use", placement="tail")
    assert turn["hint"] == "You have 1 memory in scope. Use memory(action='search') or memory(action='list') to find more."
    assert "Consider memory(action='search') with keywords" in turn["nudges"][0]["text"]
    assert "verify with memory(action='get') before relying on it" in turn["tail_message"]["content"]


def test_one_tool_per_verb_is_named_as_the_model_sees_it(agent: AgentSession) -> None:
    turn = agent.turn("what style do we use", placement="tail", tool_names=PER_VERB)
    assert turn["hint"] == "You have 1 memory in scope. Use memory_search() or memory_list() to find more."
    assert "Consider memory_search() with keywords" in turn["nudges"][0]["text"]
    assert "verify with memory_get() before relying on it" in turn["tail_message"]["content"]
    correction = agent.turn("hi", "no, use spaces", tool_names=PER_VERB)["nudges"][0]["text"]
    assert correction.endswith("save it as a feedback memory: memory_save(type='feedback').")
    receipt = agent.receipt(turn["turn_id"]).json  # the receipt's nudges read as delivered
    assert receipt["nudges"] == turn["nudges"] and "memory(" not in receipt["hint"] + receipt["nudges"][0]["text"]


def test_a_name_given_to_every_action_is_one_tool_taking_action(agent: AgentSession) -> None:
    renamed = dict.fromkeys(PER_VERB, "mcp__memoryd__memory")
    turn = agent.turn("what style do we use", tool_names=renamed)
    assert turn["hint"].endswith("Use mcp__memoryd__memory(action='search') or mcp__memoryd__memory(action='list') "
                                 "to find more.")


def test_signals_name_the_tool_too(agent: AgentSession) -> None:
    nudge = agent.signal({"event": "resume", "tool_names": PER_VERB}).json["nudges"][0]
    assert "use memory_search() to find saved preferences" in nudge["text"]


def test_a_retry_with_other_tool_names_is_another_request(agent: AgentSession) -> None:
    assert agent.post_turn({"turn_id": "t1", "query": "style"}).status_code == 200
    assert agent.post_turn({"turn_id": "t1", "query": "style"}).json["replayed"]
    assert agent.post_turn({"turn_id": "t1", "query": "style", "tool_names": PER_VERB}).status_code == 409


@pytest.mark.parametrize(("tool_names", "named"), [
    ("memory", "tool_names must be an object"), ({"recall": "memory_recall"}, "unknown action 'recall'"),
    ({"search": ""}, "tool_names.search"), ({"search": "memory search"}, "tool_names.search"),
    ({"search": 3}, "tool_names.search"),
])
def test_bad_tool_names_are_a_400_naming_the_field(agent: AgentSession, tool_names: Any, named: str) -> None:
    for response in (agent.post_turn({"query": "x", "tool_names": tool_names}),
                     agent.signal({"event": "resume", "tool_names": tool_names})):
        assert response.status_code == 400 and named in response.json["error"], response.json


def test_the_openapi_document_describes_tool_names(app: Flask) -> None:
    document: Any = app.test_client().get("/v1/api/openapi.json").json
    schemas = document["components"]["schemas"]
    for request in ("TurnRequest", "SignalRequest"):
        assert schemas[request]["properties"]["tool_names"]["allOf"] == [{"$ref": "#/components/schemas/ToolNames"}]
    assert set(schemas["ToolNames"]["properties"]) == set(PER_VERB)


def test_the_tools_answers_name_the_tool_the_model_sees(agent: AgentSession) -> None:
    listed = agent("list", tool_names=PER_VERB)["text"]
    assert listed.endswith("Call memory_get() with the displayed name and scope for the full content.")
    missed = agent("get", name="style_guide", scope="global", tool_names=PER_VERB)
    assert missed["error"] == ("no memory named 'style_guide' in scope 'global'. It exists in scope 'user': "
                               "call memory_get(name='style_guide', scope='user').")
    found = agent("search", query="style", tool_names=dict.fromkeys(PER_VERB, "mcp__memoryd__memory"))["text"]
    assert found.endswith("Call mcp__memoryd__memory(action='get') with the displayed name and scope for the full "
                          "content.")


def test_without_tool_names_the_tools_answers_name_the_specs_tool(agent: AgentSession) -> None:
    assert agent("list")["text"].endswith("Call memory(action='get') with the displayed name and scope for the full "
                                          "content.")
    assert agent("get", name="style_guide", scope="global")["error"].endswith(
        "call memory(action='get', name='style_guide', scope='user').")


def test_bad_tool_names_on_a_tool_call_are_a_refusal_the_model_reads(agent: AgentSession) -> None:
    refused = agent("list", tool_names={"recall": "memory_recall"})
    assert not refused["ok"] and "unknown action 'recall'" in refused["error"]
