"""``memoryd hook claude-code user-prompt-submit`` (and ``session-start``): automatic recall for hook-driven runtimes.

Reads the hook's JSON from standard input, asks memoryd for this turn's context
(the turn composer, placement ``tail``, whole memories within 10,000 characters)
and prints the hook's answer with it, and the nudge the prompt earns, as
additional context. It fails open: on any error, or once ``TIMEOUT`` seconds
have passed, it prints nothing and exits 0, so a memory outage never blocks the
user's prompt.

Standard library only: a hook runs before every prompt and must start in tens of
milliseconds, so ``memoryd hook`` is dispatched before the rest of the CLI (which
imports the server) and speaks HTTP itself rather than through the SDK.

Settings, from the environment: ``MEMORYD_URL`` (default http://127.0.0.1:8080),
``MEMORYD_SESSION_TOKEN`` (required) and ``MEMORYD_SESSION_ID`` (optional: saves
one request); ``MEMORYD_HOOK_DEBUG=1`` reports failures on standard error.
``MEMORYD_MCP_SERVER`` (default ``memoryd``) is the name ``memoryd mcp`` has in
the runtime's MCP configuration: Claude Code shows its tools to the model as
``mcp__<name>__memory_search``, ..., and the hint and nudges name them so.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any, TextIO

EVENTS = {("claude-code", "user-prompt-submit"): "UserPromptSubmit", ("claude-code", "session-start"): "SessionStart"}
MAX_CHARS = 10_000  # the whole additional context
BLOCK_CHARS = 9_000  # the block within it, leaving room for the reference-data line, the hint and a nudge
TIMEOUT = 1.5
USAGE = "usage: memoryd hook claude-code user-prompt-submit|session-start  (the hook's JSON on standard input)"


def main(arguments: list[str], stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    event = EVENTS.get(tuple(arguments[:2]))  # type: ignore[arg-type]
    if event is None or len(arguments) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    deadline = time.monotonic() + TIMEOUT
    answer: list[str] = []
    failure: list[BaseException] = []

    def ask() -> None:
        try:
            answer.append(_context(event, json.load(stdin) if not stdin.isatty() else {}, deadline))
        except Exception as error:  # fail open: the prompt goes ahead without memories
            failure.append(error)

    worker = threading.Thread(target=ask, daemon=True)  # a hard deadline: a slow answer is abandoned
    worker.start()
    worker.join(TIMEOUT)
    if failure and os.environ.get("MEMORYD_HOOK_DEBUG"):
        print(f"memoryd hook: {type(failure[0]).__name__}: {failure[0]}", file=sys.stderr)
    if answer and answer[0]:
        stdout.write(json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": answer[0]}})
                     + "\n")
    return 0


def _context(event: str, payload: dict[str, Any], deadline: float) -> str:
    base = os.environ.get("MEMORYD_URL", "http://127.0.0.1:8080").rstrip("/")
    token = os.environ["MEMORYD_SESSION_TOKEN"]
    session_id = os.environ.get("MEMORYD_SESSION_ID") or _call(base, token, "GET", "/v1/api/session", None,
                                                                deadline)["session_id"]
    body: dict[str, Any] = {"placement": "tail", "max_chars": BLOCK_CHARS, "tool_names": _tool_names()}
    if event == "UserPromptSubmit":  # a turn: recorded, with the nudges this prompt earns
        prompt = payload.get("prompt")
        body["query"] = prompt if isinstance(prompt, str) else ""
    else:  # a session starting: the newest memories, recording nothing (its first prompt is the first turn)
        body["preview"] = True
    path = f"/v1/api/sessions/{urllib.parse.quote(session_id, safe='')}/turns"
    turn = _call(base, token, "POST", path, body, deadline)
    parts = [(turn.get("tail_message") or {}).get("content", "")]
    if event == "UserPromptSubmit":
        parts += [nudge["text"] for nudge in turn.get("nudges", []) if nudge.get("deliver") == "after_user"]
    context = "\n\n".join(part for part in parts if isinstance(part, str) and part)
    return context if len(context) <= MAX_CHARS else ""


def _tool_names() -> dict[str, str]:
    """The memory tools as Claude Code shows them: ``memoryd mcp``'s, under its MCP server's name."""
    server = os.environ.get("MEMORYD_MCP_SERVER") or "memoryd"
    return {action: f"mcp__{server}__memory_{action}" for action in ("save", "get", "search", "delete", "list")}


def _call(base: str, token: str, method: str, path: str, body: Any, deadline: float) -> Any:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the hook's time is up")
    request = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=remaining) as response:  # noqa: S310 - the configured memoryd
        return json.loads(response.read())
