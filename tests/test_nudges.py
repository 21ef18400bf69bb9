"""Nudges: the reference heuristics, their gates and priority, and a cooldown that holds across processes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from api.app import create_app
from memoryd.app.services import Services
from memoryd.kernel.config import MemorySettings
from tests.helpers import AgentSession, World, free_port, http_call, make_services, wait_until_serving


@pytest.fixture
def agent(world: World) -> AgentSession:
    agent = world.session(world.workstream(world.owner), world.owner)
    agent.save("style_guide", "tabs, not spaces", scope="user")  # the owner's: a stranger sees nothing
    return agent


def kinds(answer: Any) -> list[str]:
    return [nudge["type"] for nudge in answer["nudges"]]


def test_start_fires_on_a_sessions_first_message_only_when_memories_are_visible(world: World, agent: AgentSession) -> None:
    first = agent.turn("hello")
    assert kinds(first) == ["start"] and first["nudges"][0]["deliver"] == "after_user"
    assert kinds(agent.turn("hello", "and now?")) == []  # not a first message
    empty = world.session(world.workstream(world.stranger), world.stranger)
    assert kinds(empty.turn("hello")) == []  # nothing to recall
    asking = world.session(world.workstream(world.owner), world.owner)
    assert kinds(asking.turn(query="hello")) == ["start"] and kinds(asking.turn(query="hello")) == []


def test_one_nudge_per_message_start_before_correction_before_completion(agent: AgentSession) -> None:
    assert kinds(agent.turn("no, that's all")) == ["start"]  # a first message
    assert kinds(agent.turn("hi", "no, that's all")) == ["correction"]
    assert kinds(agent.turn("hi", "thanks")) == ["completion"]
    assert kinds(agent.turn("hi", "what about the tests")) == []


def test_a_nudge_type_waits_out_its_cooldown_and_only_deliveries_charge_it(agent: AgentSession, services: Services) -> None:
    now = [1_000_000.0]
    services.turns.clock = lambda: now[0]
    assert kinds(agent.turn("hi", "no, wrong file")) == ["correction"]
    now[0] += 299
    assert kinds(agent.turn("hi", "no, wrong again")) == []
    assert kinds(agent.turn("hi", "thanks")) == ["completion"]  # another type has its own cooldown
    now[0] += 1
    assert kinds(agent.turn("hi", "no, still wrong")) == ["correction"]


@pytest.mark.parametrize("memory_settings", [MemorySettings(nudge_cooldown=0)])
def test_a_zero_cooldown_does_not_space_nudges(agent: AgentSession) -> None:
    assert [kinds(agent.turn("hi", "no, wrong")) for _ in range(3)] == [["correction"]] * 3


@pytest.mark.parametrize("memory_settings", [MemorySettings(nudges=False)])
def test_nudges_false_turns_every_nudge_off(agent: AgentSession) -> None:
    assert kinds(agent.turn("hello")) == [] and kinds(agent.turn("hi", "no, wrong")) == []
    assert agent.signal({"event": "resume"}).json == {"nudges": []}


def test_the_persona_lever_off_turns_memory_nudges_off(world: World, agent: AgentSession) -> None:
    muted = world.session(world.workstream(world.owner, memory=False), world.owner)
    assert kinds(muted.turn("hello")) == [] and kinds(muted.turn("hi", "no, wrong")) == []
    assert muted.signal({"event": "tool_results", "results": [{"tool": "bash", "denied": True}]}).json["nudges"] == []


def test_signals_resume_denial_and_tool_error_with_their_gates(world: World, agent: AgentSession) -> None:
    assert kinds(agent.signal({"event": "resume"}).json) == ["resume"]
    answer = agent.signal({"event": "tool_results", "results": [{"tool": "bash", "error": True},
                                                                 {"tool": "edit", "denied": True}]}).json
    assert kinds(answer) == ["denial", "tool_error"]
    assert {nudge["deliver"] for nudge in answer["nudges"]} == {"after_tool_results"}
    empty = world.session(world.workstream(world.stranger), world.stranger)
    assert kinds(empty.signal({"event": "resume"}).json) == []
    errors = empty.signal({"event": "tool_results", "results": [{"tool": "bash", "error": True, "denied": True}]}).json
    assert kinds(errors) == ["denial"]  # tool_error needs memories to point to


@pytest.mark.parametrize(("body", "named"), [
    ({}, "event"), ({"event": "wake"}, "event"), ({"event": "resume", "results": []}, "results"),
    ({"event": "tool_results"}, "results"), ({"event": "tool_results", "results": [1]}, "results[0]"),
    ({"event": "tool_results", "results": [{"error": "yes"}]}, "results[0].error"),
    ({"event": "tool_results", "results": [{"tool": 3}]}, "results[0].tool"),
])
def test_a_bad_signal_is_a_400_naming_the_field(agent: AgentSession, body: dict[str, Any], named: str) -> None:
    response = agent.signal(body)
    assert response.status_code == 400 and named in response.json["error"], response.json


def test_the_cooldown_survives_a_restart(world: World, agent: AgentSession, sqlite_url: str) -> None:
    assert kinds(agent.turn("hi", "no, wrong")) == ["correction"]
    restarted = make_services(sqlite_url)
    try:
        client = create_app(restarted).test_client()
        response = client.post(f"/v1/api/sessions/{agent.session_id}/turns", headers=agent.headers,
                               json={"messages": [{"role": "user", "content": "hi"},
                                                  {"role": "user", "content": "no, wrong again"}]})
        assert response.status_code == 200 and kinds(response.json) == []
    finally:
        restarted.database.dispose()


@pytest.mark.postgres
def test_two_api_processes_never_deliver_one_nudge_type_twice_inside_its_cooldown(built_postgres: Callable[..., Services],
                                                                                  postgres_url: str) -> None:
    services = built_postgres()
    user = services.directory.create_user("agent")
    services.directory.create_token(user, ["read", "write"], [])  # so neither server makes an admin token
    workstream = services.directory.create_workstream(user, "ws")
    session, token = services.sessions.create("interactive", workstream, user)
    services.tool.run(session, {"action": "save", "name": "style_guide", "content": "tabs", "description": "d"})
    ports = [free_port(), free_port()]
    env = {**os.environ, "MEMORYD_DATABASE_URL": postgres_url}
    servers = [subprocess.Popen([sys.executable, "-m", "memoryd", "serve", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for port in ports]
    try:
        for port in ports:
            assert wait_until_serving(f"http://127.0.0.1:{port}/healthz"), "memoryd serve did not come up"
        body = {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "no, wrong"}]}
        answers: list[list[str]] = []

        def send(port: int) -> None:
            status, answer, _ = http_call(port, token, "POST", f"/v1/api/sessions/{session.session_id}/turns", body)
            assert status == 200, answer
            answers.append(kinds(answer) or [answer.get("degraded") or ""])

        threads = [threading.Thread(target=send, args=(ports[number % 2],)) for number in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(answers) == 16 and sorted(answers).count(["correction"]) == 1, answers
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
