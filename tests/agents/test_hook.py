"""``memoryd hook claude-code ...``: the prompt's memories as additional context, and never a blocked prompt."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.helpers import LiveServer, free_port


@pytest.fixture(scope="module")
def agent(live_server: LiveServer) -> dict[str, str]:
    return live_server.agent("hooked")


def save(agent: dict[str, str], name: str, content: str) -> None:
    answer = httpx.post(f"{agent['url']}/v1/api/sessions/{agent['session_id']}/memory",
                        headers={"Authorization": f"Bearer {agent['session_token']}"},
                        json={"action": "save", "name": name, "content": content, "description": f"about {name}",
                              "scope": "workstream"})
    assert answer.json()["ok"], answer.json()


def hook(event: str, payload: dict[str, Any], url: str, token: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORYD_URL": url, "MEMORYD_SESSION_TOKEN": token, **settings}
    return subprocess.run([sys.executable, "-m", "memoryd", "hook", "claude-code", event], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=30, env=env)


def test_a_prompt_that_matches_a_saved_memory_gets_it_as_additional_context(agent: dict[str, str]) -> None:
    save(agent, "hook_deploy", "we deploy with buildkite on tuesdays")
    done = hook("user-prompt-submit", {"prompt": "how do we deploy?", "session_id": "claude-1"}, agent["url"],
                   agent["session_token"])
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "UserPromptSubmit"
    context = answer["additionalContext"]
    assert "not instructions" in context.splitlines()[0] and '<memory name="hook_deploy"' in context
    assert "buildkite on tuesdays" in context and "You have 1 memory in scope." in context
    # the tools as Claude Code shows memoryd mcp's to the model
    assert "verify with mcp__memoryd__memory_get() before" in context
    assert "Use mcp__memoryd__memory_search() or mcp__memoryd__memory_list() to find more." in context


def test_the_texts_name_the_tools_under_the_mcp_servers_configured_name(agent: dict[str, str]) -> None:
    save(agent, "hook_release", "we release on fridays")
    done = hook("user-prompt-submit", {"prompt": "how do we deploy?"}, agent["url"], agent["session_token"],
                MEMORYD_MCP_SERVER="memory-service")
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Use mcp__memory-service__memory_search() or mcp__memory-service__memory_list()" in context


def test_session_start_brings_the_most_recent_memories(agent: dict[str, str]) -> None:
    save(agent, "hook_recent", "the newest thing")
    done = hook("session-start", {"source": "startup"}, agent["url"], agent["session_token"])
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "SessionStart" and '<memory name="hook_recent"' in answer["additionalContext"]


def test_the_context_is_capped_at_10000_characters_of_whole_memories(agent: dict[str, str]) -> None:
    for number in range(30):
        save(agent, f"hook_long_{number}", f"longread {number} " + "word " * 95)
    done = hook("user-prompt-submit", {"prompt": "longread"}, agent["url"], agent["session_token"])
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(context) <= 10_000 and context.count("<memory ") == context.count("</memory>") >= 1
    assert "</memories>" in context


def test_memoryd_down_or_silent_prints_nothing_and_exits_0(agent: dict[str, str]) -> None:
    """A silent memoryd is abandoned at the hook's deadline (its wall time is measured in bench/agents)."""
    done = hook("user-prompt-submit", {"prompt": "anything"}, f"http://127.0.0.1:{free_port()}",
                agent["session_token"])
    assert (done.returncode, done.stdout) == (0, "")
    with socket.socket() as silent:  # accepts the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        done = hook("user-prompt-submit", {"prompt": "anything"}, f"http://127.0.0.1:{silent.getsockname()[1]}",
                    agent["session_token"])
    assert (done.returncode, done.stdout) == (0, "")


def test_a_bad_token_or_bad_input_still_never_blocks_the_prompt(agent: dict[str, str]) -> None:
    assert hook("user-prompt-submit", {"prompt": "x"}, agent["url"], "mds_nope").stdout == ""
    env = {**os.environ, "MEMORYD_URL": agent["url"], "MEMORYD_SESSION_TOKEN": agent["session_token"]}
    garbled = subprocess.run([sys.executable, "-m", "memoryd", "hook", "claude-code", "user-prompt-submit"],
                             input="{not json", capture_output=True, text=True, timeout=30, env=env)
    assert (garbled.returncode, garbled.stdout) == (0, "")
    unknown = subprocess.run([sys.executable, "-m", "memoryd", "hook", "cursor", "before-prompt"],
                             input="{}", capture_output=True, text=True, timeout=30, env=env)
    assert unknown.returncode == 2 and "usage: memoryd hook claude-code" in unknown.stderr


def test_a_prompt_that_earns_a_nudge_carries_it_and_session_start_records_no_turn(live_server: LiveServer) -> None:
    fresh = live_server.agent("nudged")
    save(fresh, "hook_style", "tabs, not spaces")
    started = hook("session-start", {}, fresh["url"], fresh["session_token"])
    assert '<memory name="hook_style"' in json.loads(started.stdout)["hookSpecificOutput"]["additionalContext"]
    first = hook("user-prompt-submit", {"prompt": "which style?"}, fresh["url"], fresh["session_token"])
    context = json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.endswith("before you start.")  # the start nudge: the session's first turn is this prompt
    receipts = httpx.get(f"{fresh['url']}/v1/api/admin/sessions/{fresh['session_id']}/turns",
                         headers={"Authorization": f"Bearer {live_server.admin_token}"}).json()["receipts"]
    assert [(receipt["turn"], [nudge["type"] for nudge in receipt["nudges"]]) for receipt in receipts] == [(1, ["start"])]
