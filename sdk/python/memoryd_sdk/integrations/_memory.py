"""What every framework adapter shares: one recall per user turn, failing open, and the memory tool's five verbs.

An adapter reads its framework's conversation into a ``Conversation`` (the user and assistant texts memoryd
reads, where the newest user message is, and whether the model has answered it yet); ``TurnRecall`` asks
memoryd's turn endpoint when a user message is new and hands the same text to every later model call of
that turn's tool loop. ``memory_functions`` are the session's memory tool as plain async functions with
typed parameters, which each framework turns into its own tools.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from memoryd_sdk._async import AsyncSession
from memoryd_sdk._sync import Session
from memoryd_sdk.errors import MemorydError
from memoryd_sdk.models import ToolResult, TurnContext

log = logging.getLogger("memoryd_sdk.integrations")

AnySession = Session | AsyncSession
Placement = Literal["system", "tail"]
MemoryType = Literal["user", "general", "feedback", "reference"]
Scope = Literal["global", "workstream", "user", "coordinator", "project"]
ACTIONS = ("save", "get", "search", "list", "delete")
# How the model sees the tool, one per verb: the turn's hint and the tail's reference line name these
TOOL_NAMES = {action: f"memory_{action}" for action in ACTIONS}
# The first words of memoryd's tail message: how an adapter knows a message it injected, to drop it
TAIL_MARK = "Reference data from memoryd"
TURNS_KEPT = 32


@dataclass(frozen=True)
class Conversation:
    """A framework's conversation as memoryd reads it, with the newest user message located."""

    messages: list[dict[str, str]]  # {"role": "user" | "assistant", "content": text}, oldest first
    newest_user: tuple[int, str]  # where the newest user message is in the framework's history, and its text
    answered: bool  # the model has already been called after it (a later step of the same user turn)


class TurnRecall:
    """The memories for each user turn: memoryd's turn endpoint asked once per turn, its text reused by every
    later model call of the turn (the tool loop), and nothing at all when memoryd is slow, down or refusing."""

    def __init__(self, session: AnySession, *, placement: Placement = "system", timeout: float = 2.0,
                 relevance_k: int | None = None, max_chars: int | None = None, min_score: float | None = None,
                 tool_visible: bool = True) -> None:
        if placement not in ("system", "tail"):
            raise ValueError("placement must be 'system' (the instructions) or 'tail' (a message after the user's)")
        self.session, self.placement, self.timeout = session, placement, timeout
        self._options = {"relevance_k": relevance_k, "max_chars": max_chars, "min_score": min_score,
                         "tool_visible": tool_visible}  # the hint, which names the tools, only when the model has them
        self._texts: OrderedDict[tuple[int, str], str] = OrderedDict()
        self.last_turn: TurnContext | None = None  # memoryd's answer for the newest turn asked (nudges, receipt id)

    async def text_for(self, conversation: Conversation, instructions: str | None = None) -> str:
        """The block and hint (``system``) or the reference-data message (``tail``) for this conversation's turn;
        "" when nothing matched or memoryd failed. A user message the model has not answered yet starts a turn."""
        key = conversation.newest_user
        if conversation.answered and key in self._texts:
            return self._texts[key]
        turn = await self._ask(conversation, instructions)
        text = _text_of(turn) if turn is not None else ""
        self._texts[key] = text
        self._texts.move_to_end(key)
        while len(self._texts) > TURNS_KEPT:
            self._texts.popitem(last=False)
        return text

    def injected(self, text: str) -> bool:
        """Whether a text is one this recall handed out (so an adapter strips it instead of stacking a second)."""
        return bool(text) and (text in self._texts.values() or text.startswith(TAIL_MARK))

    async def _ask(self, conversation: Conversation, instructions: str | None) -> TurnContext | None:
        call = _session_call(self.session, "turn", conversation.messages or None,
                             query=None if conversation.messages else "", system=instructions or None,
                             placement=self.placement, timeout=self.timeout, tool_names=TOOL_NAMES, **self._options)
        try:
            turn: TurnContext = await asyncio.wait_for(call, self.timeout + 1.0)
        except Exception as error:  # whatever went wrong, recall must not stop the agent
            _failed_open(type(error).__name__)
            return None
        if turn.degraded:  # the SDK's own fail-open (memoryd unreachable or failing), or memoryd's
            _failed_open(f"degraded, a reason of {len(turn.degraded)} characters")
        self.last_turn = turn
        return turn


def _failed_open(why: str) -> None:
    """One line, with no memory or conversation text in it: those may be secrets."""
    log.warning("memoryd recall failed open (%s); the turn goes on without memories", why)


def _text_of(turn: TurnContext) -> str:
    if turn.placement == "tail":
        return (turn.tail_message or {}).get("content", "")
    return "\n\n".join(part for part in (turn.block, turn.hint) if part)


async def _session_call(session: AnySession, method: str, *args: Any, **kwargs: Any) -> Any:
    """A session's method; a sync session's runs in a thread, so memoryd never holds up the framework's event loop."""
    if isinstance(session, AsyncSession):
        return await getattr(session, method)(*args, **kwargs)
    return await asyncio.to_thread(getattr(session, method), *args, **kwargs)


def strip_section(instructions: str | None, section: str) -> str | None:
    """Instructions without an earlier copy of this section (and the blank line before it)."""
    if not instructions or not section:
        return instructions
    return instructions.replace(f"\n\n{section}", "").replace(section, "") or None


def with_section(instructions: str | None, section: str) -> str | None:
    """The section after the instructions and a blank line, as memoryd's ``system`` placement composes it."""
    if not section:
        return instructions
    return f"{instructions}\n\n{section}" if instructions else section


MemoryFunction = Callable[..., Awaitable[str]]


def memory_functions(session: AnySession, refusal: Callable[[str], Exception]) -> dict[str, MemoryFunction]:
    """The session's memory tool, one async function per verb, answering the tool's text. A refusal (scope rules,
    limits, the persona's lever) or memoryd being unreachable raises ``refusal(message)``, which the framework
    shows the model as the tool's error."""

    async def call(action: str, **arguments: Any) -> str:
        given = {name: value for name, value in arguments.items() if value is not None}
        given["tool_names"] = TOOL_NAMES  # the tool's texts name the tools the model has ("call memory_get(...)")
        try:
            result: ToolResult = await _session_call(session, "memory", action, **given)
        except MemorydError as error:
            raise refusal(f"memoryd could not run memory {action}: {error}") from None
        if not result.ok:
            raise refusal(result.text)
        return result.text

    async def memory_save(name: str, content: str, description: str, type: MemoryType | None = None,
                          scope: Scope | None = None, expected_version: int | None = None) -> str:
        """Save a memory, or update the one of this name in its scope. Without a scope: the attached project,
        else global. The description is a one-line relevance summary. With expected_version (a get shows it),
        only if nobody changed the memory since."""
        return await call("save", name=name, content=content, description=description, type=type, scope=scope,
                          expected_version=expected_version)

    async def memory_get(name: str, scope: Scope | None = None) -> str:
        """A memory's full content, by the name (and scope) a search or list showed."""
        return await call("get", name=name, scope=scope)

    async def memory_search(query: str, type: MemoryType | None = None, scope: Scope | None = None,
                            limit: int | None = None) -> str:
        """The memories that best match the query (BM25), across every scope this session sees unless one is given."""
        return await call("search", query=query, type=type, scope=scope, limit=limit)

    async def memory_list(type: MemoryType | None = None, scope: Scope | None = None, limit: int | None = None) -> str:
        """The most recently updated memories this session sees (limit: default 20, at most 50)."""
        return await call("list", type=type, scope=scope, limit=limit)

    async def memory_delete(name: str, scope: Scope | None = None, expected_version: int | None = None) -> str:
        """Delete a memory by name (and scope); with expected_version, only at that version. It stays in
        memoryd's audit log."""
        return await call("delete", name=name, scope=scope, expected_version=expected_version)

    functions = (memory_save, memory_get, memory_search, memory_list, memory_delete)
    return {function.__name__: function for function in functions}

