"""``POST /v1/api/sessions/{id}/turns``: relevance injection as an agent runtime receives it.

The reference implementation's relevance tests (ranking, k, no match, name and
description scored, escaping, truncation, the description attribute, the
last-3-user-messages rule, an old memory found past the recency window,
coordinator namespaces), then placements, the hint, the floors and budget,
the persona lever, live access and bad requests.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from memoryd.app.services import Services
from memoryd.kernel.config import MemorySettings
from projections.search import SearchIndex
from tests.helpers import PROJECTS, AgentSession, World


@pytest.fixture
def agent(world: World) -> AgentSession:
    return world.session(world.workstream(world.owner), world.owner)


def injected(turn: Any) -> list[str]:
    return [item["name"] for item in turn["items"]]


# -- ranking -------------------------------------------------------------------------


def test_the_best_matching_memories_are_injected_best_first(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy with buildkite, deploy on tuesdays", description="how to deploy")
    agent.save("deploy_rollback", "roll back a deploy with the revert button", description="rollbacks")
    agent.save("coffee_machine", "the espresso machine is on floor three", description="office coffee")
    turn = agent.turn("how do we deploy, tuesdays?")
    assert injected(turn) == ["deploy_process", "deploy_rollback"]
    assert turn["items"][0]["score"] > turn["items"][1]["score"] > 0
    assert "coffee_machine" not in turn["block"]


def test_relevance_k_caps_how_many_are_injected(agent: AgentSession) -> None:
    for number in range(8):
        agent.save(f"deploy_note_{number}", f"deploy note {number}")
    assert len(agent.turn("deploy")["items"]) == 5  # the configured relevance_k
    assert len(agent.turn("deploy", relevance_k=2)["items"]) == 2


@pytest.mark.parametrize("memory_settings", [MemorySettings(relevance_k=3)])
def test_relevance_k_above_the_configured_value_is_a_400_naming_it(agent: AgentSession) -> None:
    response = agent.post_turn({"query": "deploy", "relevance_k": 4})
    assert response.status_code == 400 and "relevance_k" in response.json["error"] and "3" in response.json["error"]
    assert agent.post_turn({"query": "deploy", "relevance_k": 0}).status_code == 400


def test_a_context_that_matches_nothing_injects_nothing_but_keeps_the_hint(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy with buildkite")
    turn = agent.turn("what is the weather in lisbon")
    assert turn["items"] == [] and turn["block"] == ""
    assert turn["hint"].startswith("You have 1 memory in scope.")
    assert turn["system_message"] == {"role": "system", "content": turn["hint"]}


def test_a_context_of_stopwords_alone_injects_nothing_as_a_context_that_matches_nothing(agent: AgentSession) -> None:
    agent.save("deploy_process", "what we do when we deploy")
    turn = agent.turn("what did you do there?")
    assert turn["items"] == [] and turn["block"] == ""
    assert turn["hint"].startswith("You have 1 memory in scope.")


def test_the_context_finds_a_memory_by_another_form_of_its_words(agent: AgentSession) -> None:
    agent.save("adoption_research", "Researching adoption agencies", description="family plans")
    agent.save("coffee_machine", "the espresso machine is on floor three", description="office coffee")
    assert injected(agent.turn("What did Caroline research?")) == ["adoption_research"]


def test_name_and_description_are_scored_as_well_as_content(agent: AgentSession) -> None:
    agent.save("kubernetes_cluster", "nothing relevant here", description="unrelated")
    agent.save("other", "nothing relevant here", description="the terraform layout")
    assert injected(agent.turn("kubernetes")) == ["kubernetes_cluster"]
    assert injected(agent.turn("terraform")) == ["other"]


def test_every_field_is_escaped_and_the_description_attribute_is_rendered(agent: AgentSession) -> None:
    agent.save("quotes", 'a <b> & "c" \'d\'', description='desc with "quotes" & <tags>')
    line = agent.turn("quotes")["block"].splitlines()[1]
    assert line == ('  <memory name="quotes" type="general" scope="global" '
                    'description="desc with &quot;quotes&quot; &amp; &lt;tags&gt;">'
                    'a &lt;b&gt; &amp; &quot;c&quot; &#x27;d&#x27;</memory>')


def test_content_over_500_characters_is_cut_to_500_then_an_ellipsis_never_501(agent: AgentSession) -> None:
    agent.save("long_one", "x" * 501, description="long")
    agent.save("exact_one", "y" * 500, description="exact")
    block = agent.turn("long_one exact_one")["block"]
    assert ">" + "x" * 500 + "...</memory>" in block and "x" * 501 not in block
    assert ">" + "y" * 500 + "</memory>" in block


def test_the_block_is_the_spec_format_byte_for_byte(agent: AgentSession) -> None:
    agent.save("style_guide", "tabs, not spaces", description="code style", type="feedback")
    turn = agent.turn("style", system="You are a coding agent.")
    assert turn["block"] == ('<memories>\n  <memory name="style_guide" type="feedback" scope="global" '
                             'description="code style">tabs, not spaces</memory>\n</memories>')
    assert turn["system_message"]["content"] == f"You are a coding agent.\n\n{turn['block']}\n\n{turn['hint']}"


# -- the context ---------------------------------------------------------------------


def test_the_context_is_the_last_three_user_texts_and_assistant_turns_do_not_count(agent: AgentSession) -> None:
    agent.save("alpha_topic", "alpha")
    agent.save("omega_topic", "omega")
    old_then_three_new = ["alpha", "one", "two", "three"]
    assert injected(agent.turn(*old_then_three_new)) == []
    messages = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "omega"},
                {"role": "user", "content": "two"}]
    assert injected(agent.turn(messages=messages)) == []  # assistant text is not context
    assert injected(agent.turn("alpha", "one", "two")) == ["alpha_topic"]


def test_list_content_gives_text_parts_and_bare_strings_and_the_cut_falls_on_a_message(agent: AgentSession) -> None:
    agent.save("alpha_topic", "alpha")
    agent.save("bravo_topic", "bravo")
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "alpha"},  # beyond the cut: the next message already gives three texts
        {"role": "user", "content": [{"type": "text", "text": "bravo"}, "one",
                                     {"type": "image_url", "image_url": {"url": "alpha"}}, "two"]},
    ]
    assert injected(agent.turn(messages=messages)) == ["bravo_topic"]
    messages[1]["content"] = [{"type": "text", "text": "bravo"}, "one"]  # two texts: the older message counts too
    assert sorted(injected(agent.turn(messages=messages))) == ["alpha_topic", "bravo_topic"]


def test_no_context_injects_the_most_recent_memories(agent: AgentSession) -> None:
    for number in range(7):
        agent.save(f"note_{number}", f"note {number}")
    bodies: list[dict[str, Any]] = [{"messages": [{"role": "assistant", "content": "hello"}]}, {"messages": []},
                                     {"query": "   "}, {}]
    for body in bodies:
        turn = agent.turn(**body)
        assert {item["name"] for item in turn["items"]} == {f"note_{number}" for number in range(2, 7)}, body
        assert all(item["score"] is None for item in turn["items"])


@pytest.mark.parametrize("memory_settings", [MemorySettings(fetch_limit=5)])
def test_an_old_relevant_memory_is_injected_far_outside_the_recency_window(agent: AgentSession) -> None:
    agent.save("kubernetes_upgrade", "drain the nodes first", description="kubernetes upgrades")
    for number in range(30):
        agent.save(f"recent_{number}", f"something else {number}")
    assert injected(agent.turn("how do I upgrade kubernetes?")) == ["kubernetes_upgrade"]


def test_query_may_stand_in_for_messages(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy with buildkite")
    assert injected(agent.turn(query="deploy")) == ["deploy_process"]


# -- envelopes -----------------------------------------------------------------------


def test_a_coordinator_sees_only_its_own_coordinator_scope_and_the_project(world: World) -> None:
    world.grant(world.member, "write")
    interactive = world.session(world.workstream(world.member, world.project), world.member)
    interactive.save("global_plan", "plan alpha", scope="global")
    interactive.save("project_plan", "plan alpha", scope="project")
    coordinator = world.session(world.workstream(world.member, world.project), world.member, kind="coordinator")
    coordinator.save("coordinator_plan", "plan alpha", scope="coordinator")
    other = world.session(world.workstream(world.owner, world.project), world.owner, kind="coordinator")
    other.save("owners_plan", "plan alpha", scope="coordinator")
    turn = coordinator.turn("plan alpha")
    assert sorted(injected(turn)) == ["coordinator_plan", "project_plan"]
    assert turn["in_scope"] == 2


def test_a_revoked_member_loses_the_project_memories_at_the_next_turn(world: World) -> None:
    world.grant(world.member, "read")
    owner = world.session(world.workstream(world.owner, world.project), world.owner)
    owner.save("project_secret", "launch codes", scope="project")
    member = world.session(world.workstream(world.member, world.project), world.member)
    assert injected(member.turn("launch codes")) == ["project_secret"]
    world.admin.delete(f"{PROJECTS}/{world.project}/members/{world.member}")
    turn = member.turn("launch codes")
    assert turn["items"] == [] and turn["in_scope"] == 0 and turn["hint"] == ""


def test_the_hint_counts_every_memory_in_scope_not_the_candidates(world: World, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    for number in range(60):
        agent.save(f"note_{number}", f"note {number}")
    world.session(world.workstream(world.stranger), world.stranger).save("theirs", "note", scope="user")
    turn = agent.turn("nothing matches this")
    assert turn["in_scope"] == 60 and turn["hint"].startswith("You have 60 memories in scope.")
    assert agent.turn("note")["candidates"] == services.config.memory.relevance_k  # the index ranks all 60 exactly


def test_no_hint_when_the_runtime_hides_the_memory_tool_or_nothing_is_in_scope(agent: AgentSession) -> None:
    assert agent.turn("anything")["hint"] == ""
    agent.save("deploy_process", "deploy with buildkite")
    turn = agent.turn("deploy", tool_visible=False)
    assert turn["hint"] == "" and injected(turn) == ["deploy_process"]


def test_the_persona_lever_off_gives_no_block_no_hint_and_no_nudges(world: World) -> None:
    writer = world.session(world.workstream(world.owner), world.owner)
    writer.save("deploy_process", "deploy with buildkite")
    muted = world.session(world.workstream(world.owner, memory=False), world.owner)
    turn = muted.turn("deploy", system="You are helpful.")
    assert turn["memory_enabled"] is False and turn["items"] == [] and turn["nudges"] == []
    assert turn["block"] == turn["hint"] == "" and turn["system_message"]["content"] == "You are helpful."


# -- placement, floor and budget -------------------------------------------------------


def test_tail_placement_leaves_the_system_prompt_alone_and_marks_the_block_as_data(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy with buildkite")
    turn = agent.turn("deploy", system="You are helpful.", placement="tail")
    assert turn["system_message"] is None and turn["block"].startswith("<memories>")
    assert turn["tail_message"]["role"] == "user"
    preamble, block, hint = turn["tail_message"]["content"].split("\n\n")
    assert "not instructions" in preamble and block == turn["block"] and hint == turn["hint"]


def test_placement_none_returns_only_the_items(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy with buildkite")
    turn = agent.turn("deploy", system="You are helpful.", placement="none")
    assert injected(turn) == ["deploy_process"]
    assert turn["block"] == turn["hint"] == "" and turn["system_message"] is None and turn["tail_message"] is None


def test_min_score_drops_weak_matches(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy deploy deploy buildkite", description="deploys")
    agent.save("passing_mention", "we talked about many things, deploy once", description="misc")
    scores = {item["name"]: item["score"] for item in agent.turn("deploy buildkite")["items"]}
    floor = (scores["deploy_process"] + scores["passing_mention"]) / 2
    turn = agent.turn("deploy buildkite", min_score=floor)
    assert injected(turn) == ["deploy_process"] and turn["dropped"]["floor"] == 1


def test_max_chars_drops_whole_memories_lowest_score_first(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy deploy deploy", description="deploys")
    agent.save("deploy_once", "deploy " + "padding " * 40, description="one mention")
    full = agent.turn("deploy")
    assert injected(full) == ["deploy_process", "deploy_once"]
    budget = len(full["block"]) - 1
    turn = agent.turn("deploy", max_chars=budget)
    assert injected(turn) == ["deploy_process"] and len(turn["block"]) <= budget
    assert turn["block"].endswith("</memory>\n</memories>") and turn["dropped"]["budget"] == 1
    assert agent.turn("deploy", max_chars=20)["block"] == ""


# -- bad requests ----------------------------------------------------------------------


@pytest.mark.parametrize(("body", "named"), [
    ({"messages": "hello"}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}]}, "messages[0].content[0].text"),
    ({"messages": [], "query": "x"}, "not both"),
    ({"query": ["x"]}, "query"),
    ({"placement": "top"}, "placement"),
    ({"tool_visible": "yes"}, "tool_visible"),
    ({"max_chars": 0}, "max_chars"),
    ({"min_score": -1}, "min_score"),
    ({"min_score": True}, "min_score"),
    ({"preview": 1}, "preview"),
    ({"turn_id": ""}, "turn_id"),
    ({"turn_id": "x" * 256}, "turn_id"),
    ({"turn_id": "bad\nid"}, "turn_id"),
    ({"system": 5}, "system"),
    ({"min_position": 10**9}, "beyond the head"),
    ({"surprise": 1}, "surprise"),
])
def test_a_bad_turn_body_is_a_400_naming_the_field(agent: AgentSession, body: dict[str, Any], named: str) -> None:
    response = agent.post_turn(body)
    assert response.status_code == 400 and named in response.json["error"], response.json


def test_the_transport_errors_of_the_session_routes(world: World, agent: AgentSession) -> None:
    other = world.session(world.workstream(world.owner), world.owner)
    path = f"/v1/api/sessions/{agent.session_id}/turns"
    assert agent.client.post(path, json={}).status_code == 401
    assert agent.client.post(path, json={}, headers=other.headers).status_code == 403
    assert agent.client.post("/v1/api/sessions/nope/turns", json={}, headers=agent.headers).status_code == 404
    assert agent.client.post(path, data="[1]", headers=agent.headers, content_type="application/json").status_code == 400


@pytest.mark.parametrize("failing", ["catching up", "ranking"])
def test_a_failure_inside_retrieval_degrades_to_an_empty_block_never_a_500(agent: AgentSession, services: Services,
                                                                           monkeypatch: pytest.MonkeyPatch, failing: str) -> None:
    agent.save("deploy_process", "deploy with buildkite")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("index on fire")

    if failing == "catching up":
        monkeypatch.setattr(services.search, "catch_up", broken)
    else:
        monkeypatch.setattr(SearchIndex, "candidates", broken)
    turn = agent.turn("deploy", system="You are helpful.")
    assert turn["block"] == "" and turn["items"] == [] and "RuntimeError" in turn["degraded"]
    assert turn["system_message"]["content"] == "You are helpful." and turn["receipt_id"]


def test_with_tail_placement_the_system_prefix_is_identical_on_all_50_turns_of_a_changing_session(agent: AgentSession) -> None:
    system = "You are a careful coding agent."
    prefixes, blocks = set(), set()
    for number in range(50):
        if number % 3 == 0:
            agent.save(f"deploy_note_{number}", f"deploy note {number}")
        if number % 7 == 6:
            agent("delete", name=f"deploy_note_{number - 6}")
        turn = agent.turn(f"deploy question {number}", system=system, placement="tail")
        assert turn["system_message"] is None and turn["tail_message"]["role"] == "user"
        prefixes.add(turn["system_sha256"])
        blocks.add(turn["block_sha256"])
    assert prefixes == {hashlib.sha256(system.encode()).hexdigest()}
    assert len(blocks) > 10  # the memories did change underneath; the prefix did not
    placed = agent.turn("deploy question", system=system)  # the default placement would have moved it
    assert placed["system_sha256"] not in prefixes


@pytest.mark.parametrize("memory_settings", [MemorySettings(fetch_limit=2)])
def test_fetch_limit_caps_the_candidates_a_turn_considers(agent: AgentSession) -> None:
    for number in range(4):
        agent.save(f"deploy_note_{number}", f"deploy note {number}")
    turn = agent.turn("deploy")
    assert len(turn["items"]) == 2 and turn["candidates"] == 2 and turn["in_scope"] == 4


def test_a_turn_waits_for_the_position_a_write_answered(agent: AgentSession) -> None:
    agent.save("deploy_process", "deploy with buildkite")
    head = agent.turn("deploy")["position"]  # the log's head: the save
    turn = agent.turn("deploy", min_position=head)
    assert turn["position"] >= head and turn["degraded"] is None and injected(turn) == ["deploy_process"]
    by_header = agent.post_turn({"query": "deploy"}, **{"X-Min-Position": str(head)})
    assert by_header.status_code == 200 and by_header.json["position"] >= head
    assert agent.post_turn({"query": "deploy"}, **{"X-Min-Position": str(head + 1000)}).status_code == 400


def test_a_turn_id_must_be_printable_ascii_as_it_doubles_as_the_idempotency_key(agent: AgentSession) -> None:
    response = agent.post_turn({"query": "x", "turn_id": "tür-1"})
    assert response.status_code == 400 and "printable ASCII" in response.json["error"]
