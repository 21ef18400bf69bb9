"""memoryd in Pydantic AI (``pydantic-ai``): one capability that recalls per user turn and brings the tools.

    agent = Agent(model, instructions="...", capabilities=[MemorydMemory(session)])  # a Session or AsyncSession
    result = await agent.run("how do we deploy?")

Before each model request the capability asks memoryd once per user turn (when the newest user prompt has no
answer yet) and reuses the answer for the tool loop's later requests. ``placement="system"`` adds the block
and hint to the request's instructions; ``"tail"`` adds memoryd's reference-data message as a user part
right after the newest user prompt. Both are request-only: nothing is written to the message history, and a
copy found there is replaced, not stacked. memoryd slow or down: no memories, the run goes on. The memory
tools (``memory_save``, ``memory_get``, ``memory_search``, ``memory_list``, ``memory_delete``) come with it
(``tools=False`` leaves them out; ``memoryd_toolset(session)`` gives them alone); a refusal is a ``ToolFailed``
the model reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from memoryd_sdk.integrations._memory import AnySession, Conversation, Placement, TurnRecall, memory_functions

try:
    from pydantic_ai import FunctionToolset, RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.toolsets import AbstractToolset
except ImportError as missing:  # pragma: no cover - the extra was not installed
    raise ImportError("memoryd_sdk.integrations.pydantic_ai needs Pydantic AI: "
                      "pip install 'memoryd-sdk[pydantic-ai]'") from missing

__all__ = ["MemorydMemory", "memoryd_toolset"]


def memoryd_toolset(session: AnySession) -> FunctionToolset[Any]:
    """The session's memory tool as Pydantic AI tools, one per verb; a refusal raises ``ToolFailed``."""
    return FunctionToolset([Tool(function, takes_ctx=False, name=name)
                            for name, function in memory_functions(session, ToolFailed).items()])


@dataclass
class MemorydMemory(AbstractCapability[Any]):
    """The session's memories in front of the model once per user turn, and its memory tools.
    ``last_turn`` is memoryd's latest answer (its nudges, its ``turn_id`` for the receipt)."""

    session: AnySession
    _: KW_ONLY
    placement: Placement = "system"
    timeout: float = 2.0
    relevance_k: int | None = None
    max_chars: int | None = None
    min_score: float | None = None
    tools: bool = True
    _recall: TurnRecall = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._recall = TurnRecall(self.session, placement=self.placement, timeout=self.timeout,
                                  relevance_k=self.relevance_k, max_chars=self.max_chars, min_score=self.min_score,
                                  tool_visible=self.tools)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live memoryd session: not spec-serializable

    @property
    def last_turn(self) -> Any:
        return self._recall.last_turn

    def get_toolset(self) -> AbstractToolset[Any] | None:
        return memoryd_toolset(self.session) if self.tools else None

    async def before_model_request(self, ctx: RunContext[Any],
                                   request_context: ModelRequestContext) -> ModelRequestContext:
        messages = [self._without_injected(message) for message in request_context.messages]
        conversation = conversation_of(messages)
        parameters = request_context.model_request_parameters
        instruction_parts = [part for part in parameters.instruction_parts or []
                             if not self._recall.injected(part.content)]
        text = await self._recall.text_for(conversation, InstructionPart.join(instruction_parts))
        if text and self.placement == "system":
            instruction_parts.append(InstructionPart(text, dynamic=True))
        elif text and conversation.newest_user[0] >= 0:
            at = conversation.newest_user[0]
            messages[at] = _with_part_after_prompt(messages[at], text)
        if parameters.instruction_parts is not None or instruction_parts:
            parameters = replace(parameters, instruction_parts=instruction_parts)
        return replace(request_context, messages=messages, model_request_parameters=parameters)

    def _without_injected(self, message: ModelMessage) -> ModelMessage:
        """The message without a tail part this capability injected (request-only: history is never changed)."""
        if not isinstance(message, ModelRequest):
            return message
        kept = [part for part in message.parts
                if not (isinstance(part, UserPromptPart) and self._recall.injected(_prompt_text(part.content)))]
        return message if len(kept) == len(message.parts) else replace(message, parts=kept)


def conversation_of(messages: Sequence[ModelMessage]) -> Conversation:
    """User prompts and the model's text as memoryd reads them, and where the newest user prompt is."""
    texts, newest_user = [], (-1, "")
    for index, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                newest_user = (index, _prompt_text(part.content))
                texts.append({"role": "user", "content": newest_user[1]})
            elif isinstance(message, ModelResponse) and isinstance(part, TextPart) and part.content:
                texts.append({"role": "assistant", "content": part.content})
    return Conversation(texts, newest_user, answered=newest_user[0] < len(messages) - 1)


def _prompt_text(content: str | Sequence[Any]) -> str:
    if isinstance(content, str):
        return content
    return " ".join(item for item in content if isinstance(item, str))


def _with_part_after_prompt(message: ModelMessage, text: str) -> ModelMessage:
    """A copy of the request with the reference-data part right after its (last) user prompt."""
    assert isinstance(message, ModelRequest)  # the newest user prompt is in a request
    parts = list(message.parts)
    last_prompt = max(index for index, part in enumerate(parts) if isinstance(part, UserPromptPart))
    parts.insert(last_prompt + 1, UserPromptPart(text))
    return replace(message, parts=parts)
