"""memoryd in the OpenAI Agents SDK (``openai-agents``): per-turn recall as a model-input filter, and the tools.

    recall = MemorydRecall(session)                       # a memoryd Session or AsyncSession
    agent = Agent(name="assistant", instructions="...", tools=memoryd_tools(session))
    result = await Runner.run(agent, "how do we deploy?", run_config=RunConfig(call_model_input_filter=recall))

The filter runs before every model call; it asks memoryd once per user turn (when the newest user message has
not been answered yet) and reuses that answer on the tool loop's later calls. ``placement="system"`` adds the
block and hint after the instructions; ``"tail"`` puts memoryd's reference-data message right after the
newest user message. What it adds is recomputed per call and never written to the run's history, and a copy
found in the input is replaced, not stacked. memoryd slow or down: no memories, the run goes on.
"""

from __future__ import annotations

from typing import Any

from memoryd_sdk.integrations._memory import (
    AnySession,
    Conversation,
    Placement,
    TurnRecall,
    memory_functions,
    strip_section,
    with_section,
)

try:
    from agents import FunctionTool, RunContextWrapper, function_tool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import default_tool_error_function
except ImportError as missing:  # pragma: no cover - the extra was not installed
    raise ImportError("memoryd_sdk.integrations.openai_agents needs the OpenAI Agents SDK: "
                      "pip install 'memoryd-sdk[openai-agents]'") from missing

__all__ = ["MemoryToolRefused", "MemorydRecall", "memoryd_tools"]


class MemoryToolRefused(Exception):
    """The memory tool refused a call (or memoryd could not be reached); its message is what the model reads."""


class MemorydRecall:
    """A ``RunConfig.call_model_input_filter`` that puts the session's memories in front of the model once per
    user turn. ``tool_visible=False`` when the agent has no ``memoryd_tools``: the hint that names them is left
    out. ``last_turn`` is memoryd's latest answer (its nudges, its ``turn_id`` for the receipt)."""

    def __init__(self, session: AnySession, *, placement: Placement = "system", timeout: float = 2.0,
                 relevance_k: int | None = None, max_chars: int | None = None, min_score: float | None = None,
                 tool_visible: bool = True) -> None:
        self._recall = TurnRecall(session, placement=placement, timeout=timeout, relevance_k=relevance_k,
                                  max_chars=max_chars, min_score=min_score, tool_visible=tool_visible)

    @property
    def last_turn(self) -> Any:
        return self._recall.last_turn

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = [item for item in data.model_data.input if not self._recall.injected(_text(item) or "")]
        conversation = conversation_of(items)
        instructions = data.model_data.instructions
        text = await self._recall.text_for(conversation, instructions)
        if self._recall.placement == "system":
            return ModelInputData(input=items, instructions=with_section(strip_section(instructions, text), text))
        if text and conversation.newest_user[0] >= 0:
            after = conversation.newest_user[0] + 1
            items = [*items[:after], {"role": "user", "content": text}, *items[after:]]
        return ModelInputData(input=items, instructions=instructions)


def conversation_of(items: list[Any]) -> Conversation:
    """The user and assistant texts of Responses-format input items, and where the newest user message is."""
    messages, newest_user = [], (-1, "")
    for index, item in enumerate(items):
        text = _text(item)
        if text is None:
            continue
        messages.append({"role": item["role"], "content": text})
        if item["role"] == "user":
            newest_user = (index, text)
    return Conversation(messages, newest_user, answered=newest_user[0] < len(items) - 1)


def _text(item: Any) -> str | None:
    """A user or assistant message's text (its text parts joined by spaces); None for anything else."""
    if not isinstance(item, dict) or item.get("role") not in ("user", "assistant"):
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    return " ".join(part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))


def memoryd_tools(session: AnySession) -> list[FunctionTool]:
    """The session's memory tool as function tools, one per verb (``memory_save``, ``memory_get``,
    ``memory_search``, ``memory_list``, ``memory_delete``); a refusal is the tool's output the model reads."""
    return [function_tool(function, name_override=name, failure_error_function=_refusal)
            for name, function in memory_functions(session, MemoryToolRefused).items()]


def _refusal(context: RunContextWrapper[Any], error: Exception) -> str:
    if isinstance(error, MemoryToolRefused):
        return f"Error: {error}"
    return default_tool_error_function(context, error)
