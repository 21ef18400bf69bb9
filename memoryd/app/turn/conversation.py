"""What a turn is about: the text of the conversation's newest user messages.

The spec's rule, as the reference implementation applies it: walk the
messages newest first, user messages only; a string content is one text, a
list content gives each ``{"type": "text"}`` part's text and each bare
string (other parts, such as images, are ignored). Stop after the message at
which three texts have been collected, so the cut falls on a message
boundary and one message may give more than one text. The texts are joined
newest message first (a message's parts in their order) by single spaces;
blank texts count for nothing, and nothing left means "no context".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.kernel.errors import ValidationError

CONTEXT_TEXTS = 3
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass(frozen=True)
class Message:
    role: str
    texts: tuple[str, ...]  # the content's texts, in order


def messages_from(raw: Any, field: str = "messages") -> list[Message]:
    """Validated messages (OpenAI/Anthropic shape), or a ``ValidationError`` naming the bad item."""
    if not isinstance(raw, list):
        raise ValidationError(f"{field} must be a list of messages")
    return [_message(item, f"{field}[{number}]") for number, item in enumerate(raw)]


def context_of(messages: Sequence[Message]) -> str:
    """The last three user texts, newest first, joined by single spaces ("" when there are none)."""
    collected: list[str] = []
    for message in reversed(messages):
        if message.role != "user":
            continue
        collected += [text for text in message.texts if text.strip()]  # a message's parts stay in order
        if len(collected) >= CONTEXT_TEXTS:
            break
    return " ".join(collected)


def newest_user_text(messages: Sequence[Message]) -> str:
    """The newest user message's text (the nudge heuristics read it)."""
    for message in reversed(messages):
        if message.role == "user":
            return " ".join(text.strip() for text in message.texts if text.strip())
    return ""


def conversation_length(messages: Sequence[Message]) -> int:
    """Messages other than system and developer ones, the new user message included."""
    return sum(message.role not in ("system", "developer") for message in messages)


def _message(item: Any, where: str) -> Message:
    if not isinstance(item, dict):
        raise ValidationError(f"{where} must be an object with 'role' and 'content'")
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ValidationError(f"{where}.role must be one of {', '.join(ROLES)}")
    content = item.get("content")
    if content is None:
        return Message(role, ())
    if isinstance(content, str):
        return Message(role, (content,))
    if not isinstance(content, list):
        raise ValidationError(f"{where}.content must be a string or a list of parts")
    texts = []
    for number, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ValidationError(f"{where}.content[{number}].text must be a string")
            texts.append(text)
    return Message(role, tuple(texts))
