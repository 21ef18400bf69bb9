"""Per-turn recall for LangGraph agents: the session's memories in front of the model, once per user turn.

A tool loop calls the model several times for one user message; memoryd is asked on the first call
only (the turn is the newest human message), and the later calls reuse its answer. The block goes
where ``placement`` says: in the system message (``system``) or as a user-role message right after
the newest human message (``tail``, so tool calls and their results stay together). A memoryd
message already in the list (a graph that kept one) is replaced, never stacked; an empty one is
never sent. When memoryd is slow or down the agent runs without memories (fail open): the turn
gives up after ``timeout`` and only lengths are logged.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda

from memoryd_sdk._async import AsyncSession
from memoryd_sdk._sync import Session
from memoryd_sdk.errors import MemorydError
from memoryd_sdk.models import TurnContext

BLOCK_ID = "memoryd-turn-block"  # the message memoryd's block travels in: found, and replaced, by this id
CONVERSATION = 20  # the newest messages a turn sends (memoryd reads the last user texts of them)
log = logging.getLogger("memoryd_sdk.langgraph")


class MemorydRecall:
    """Recall for one memoryd session. ``compose(messages)`` is what the model should receive; ``prompt``
    and ``pre_model_hook`` are the Runnables ``create_react_agent`` takes. ``system`` is the agent's own
    system prompt (else the leading system message of the conversation, which the composed one replaces).
    ``tool_names`` are the memory tools as the model sees them (``memoryd_tools``'s, by default), which the
    hint names."""

    def __init__(self, session: Session, async_session: AsyncSession | None = None, *, system: str = "",
                 placement: Literal["system", "tail"] = "system", timeout: float = 2.0,
                 max_chars: int | None = None, tool_names: dict[str, str] | None = None) -> None:
        if placement not in ("system", "tail"):
            raise ValueError("placement must be 'system' or 'tail'")
        self.session, self.async_session = session, async_session
        self.system, self.placement, self.timeout, self.max_chars = system, placement, timeout, max_chars
        self.tool_names = tool_names if tool_names is not None else {
            action: f"memory_{action}" for action in ("save", "get", "search", "delete", "list")}
        self._lock = threading.Lock()
        self._turn: tuple[str, TurnContext | None] | None = None  # the user turn asked for, and its answer
        self.prompt = RunnableLambda(self.compose_state, afunc=self.acompose_state, name="memoryd_prompt")
        self.pre_model_hook = RunnableLambda(lambda state: {"llm_input_messages": self.compose_state(state)},
                                             afunc=self._ahook, name="memoryd_pre_model_hook")

    def compose(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        conversation, system = self._split(messages)
        key = _turn_key(conversation)
        with self._lock:
            if key is not None and (self._turn is None or self._turn[0] != key):
                self._turn = (key, self._ask(conversation, system, key))
            context = self._turn[1] if self._turn is not None and key is not None else None
        return _placed(conversation, system, context, self.placement)

    async def acompose(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        if self.async_session is None:
            return await asyncio.to_thread(self.compose, messages)
        conversation, system = self._split(messages)
        key = _turn_key(conversation)
        if key is not None and (self._turn is None or self._turn[0] != key):
            self._turn = (key, await self._aask(conversation, system, key))
        context = self._turn[1] if self._turn is not None and key is not None else None
        return _placed(conversation, system, context, self.placement)

    def compose_state(self, state: Any) -> list[BaseMessage]:
        return self.compose(_messages_of(state))

    async def acompose_state(self, state: Any) -> list[BaseMessage]:
        return await self.acompose(_messages_of(state))

    async def _ahook(self, state: Any) -> dict[str, Any]:
        return {"llm_input_messages": await self.acompose_state(state)}

    def _split(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], str]:
        """The conversation without any memoryd message, and the system prompt to compose with."""
        conversation = [message for message in messages if message.id != BLOCK_ID]
        if not self.system and conversation and isinstance(conversation[0], SystemMessage):
            return conversation[1:], str(conversation[0].text)
        return conversation, self.system

    def _ask(self, conversation: list[BaseMessage], system: str, key: str) -> TurnContext | None:
        try:
            return self.session.turn(_wire(conversation), **self._options(system, key))
        except MemorydError as error:
            _failed(error, conversation)
            return None

    async def _aask(self, conversation: list[BaseMessage], system: str, key: str) -> TurnContext | None:
        assert self.async_session is not None
        try:
            return await self.async_session.turn(_wire(conversation), **self._options(system, key))
        except MemorydError as error:
            _failed(error, conversation)
            return None

    def _options(self, system: str, key: str) -> dict[str, Any]:
        turn_id = f"lg_{key}" if key.isascii() and key.isprintable() and len(key) <= 120 else None
        return {"system": system, "placement": self.placement, "turn_id": turn_id, "timeout": self.timeout,
                "max_chars": self.max_chars, "tool_names": self.tool_names}


def _failed(error: MemorydError, conversation: list[BaseMessage]) -> None:
    """Fail open: no block this turn; the log says what failed and how long the turn was, never its text."""
    log.warning("memoryd recall skipped for this turn (%s; %d messages)", type(error).__name__, len(conversation))


def _placed(conversation: list[BaseMessage], system: str, context: TurnContext | None,
            placement: str) -> list[BaseMessage]:
    if context is not None and context.degraded:
        log.warning("memoryd recall degraded for this turn (%d characters of reason)", len(context.degraded))
    if placement == "system":
        composed = (context.system_message or {}).get("content", "") if context is not None else ""
        content = composed or system
        return ([SystemMessage(content, id=BLOCK_ID if composed else None)] if content else []) + conversation
    head = [SystemMessage(system)] if system else []
    tail = (context.tail_message or {}).get("content", "") if context is not None else ""
    if not tail:
        return head + conversation
    newest = max(index for index, message in enumerate(conversation) if isinstance(message, HumanMessage))
    return head + conversation[:newest + 1] + [HumanMessage(tail, id=BLOCK_ID)] + conversation[newest + 1:]


def _turn_key(conversation: Sequence[BaseMessage]) -> str | None:
    """The user turn: the newest human message (its id; else its place and text). None: no user message yet."""
    for index in range(len(conversation) - 1, -1, -1):
        message = conversation[index]
        if isinstance(message, HumanMessage):
            return message.id or f"{index}:{hash(str(message.text))}"
    return None


def _wire(conversation: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The conversation's user and assistant texts, as memoryd's turn reads them."""
    wired = [{"role": "user" if isinstance(message, HumanMessage) else "assistant", "content": str(message.text)}
             for message in conversation[-CONVERSATION:] if isinstance(message, HumanMessage | AIMessage)]
    return [message for message in wired if message["content"]]


def _messages_of(state: Any) -> list[BaseMessage]:
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", state)
    return list(messages)

