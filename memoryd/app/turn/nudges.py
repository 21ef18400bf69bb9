"""Nudges: short reminders that help the model use its memory at the right moments.

The rules are the reference implementation's (metacognition):

* ``start``: the first user message of a session, when it can see memories;
* ``correction``: the newest user message reads like a correction ("no, ...",
  "don't ...", "actually ...", "I meant ...");
* ``completion``: it reads like the end of a task ("that's all", "lgtm", or a
  short "thanks" / "perfect" / "looks good" with no follow-up request);
* at most one of start > correction > completion per user message, and
  nothing but ``start`` (and ``resume``) on a conversation's first message;
* from the tool loop: ``resume`` (a session continues earlier history, with
  memories visible), ``denial`` (the user rejected a tool call) and
  ``tool_error`` (a tool failed, with memories visible).

Which nudges may fire is decided here, purely; the cooldown that spaces
them is charged by the composer, only when a nudge is actually delivered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.app.turn.tools import SPEC_TOOLS, ToolNames

AFTER_USER, AFTER_TOOL_RESULTS = "after_user", "after_tool_results"
TEXTS = {  # {search}, {save}, {save_feedback}: the calls, named as the model sees the tool (``tools``)
    "start": "You have memories saved in earlier sessions that may bear on this request. Consider "
             "{search} with keywords from it before you start.",
    "correction": "The user may be correcting you or stating a preference. If it should hold in future "
                  "sessions, save it as a feedback memory: {save_feedback}.",
    "completion": "The task may be wrapping up. If this session produced decisions, learnings or preferences "
                  "worth keeping, save them as memories: {save}.",
    "resume": "This session continues earlier history. Before going on, use {search} to find "
              "saved preferences, project notes or decisions that apply.",
    "denial": "The user rejected a tool action. If the reason is a lasting preference (for example 'never "
              "force-push'), save it as a feedback memory: {save_feedback}.",
    "tool_error": "A tool returned an error. Before retrying, use {search}: earlier sessions "
                  "may have left guidance about this tool or error.",
}

_STRONG_CORRECTION = re.compile(
    r"^no[,.]|\bdon'?t\b|^stop\b|^actually[,\s]|^instead[,\s]|\bnot like that\b|^wrong\b|\bthat'?s not\b"
    r"|^i said\b|^i meant\b|\bnever\b.*\balways\b|^please don'?t\b", re.IGNORECASE)
_WEAK_CORRECTION = re.compile(  # "no" then a word that redirects: not "no problem"
    r"^no\s+(?:i|you|we|they|it|he|she|that|this|those|these|the|a|an|not|do|did|but)\b", re.IGNORECASE)
_STRONG_COMPLETION = re.compile(r"\bthat'?s all\b|^lgtm\b", re.IGNORECASE)
_WEAK_COMPLETION = re.compile(
    r"^thanks\b(?!\s+for\b)|\blooks good\b|^perfect\b|^great job\b|\bthat works\b|^done\b", re.IGNORECASE)
_FOLLOW_UP = re.compile(
    r"\?|can you|could you|please\s|also\s|but\s|now\s|next\s|and\s+then|after\s+that|one\s+more|however",
    re.IGNORECASE)
WEAK_COMPLETION_CHARS = 80


@dataclass(frozen=True)
class Nudge:
    type: str
    text: str
    deliver: str  # after_user | after_tool_results


def nudge(kind: str, tools: ToolNames = SPEC_TOOLS) -> Nudge:
    text = TEXTS[kind].format(search=tools.call("search"), save=tools.call("save"),
                              save_feedback=tools.call("save", type="feedback"))
    return Nudge(kind, text, AFTER_TOOL_RESULTS if kind in ("denial", "tool_error") else AFTER_USER)


def is_correction(message: str) -> bool:
    text = message.strip()
    return bool(text) and bool(_STRONG_CORRECTION.search(text) or _WEAK_CORRECTION.search(text))


def is_completion(message: str) -> bool:
    text = message.strip()
    if not text:
        return False
    if _STRONG_COMPLETION.search(text):
        return True
    return len(text) <= WEAK_COMPLETION_CHARS and not _FOLLOW_UP.search(text) and bool(_WEAK_COMPLETION.search(text))


def for_user_message(message: str, conversation_length: int, in_scope: int) -> str | None:
    """The one nudge type a new user message may earn (start > correction > completion), if any."""
    if conversation_length == 1:
        return "start" if in_scope > 0 else None
    if conversation_length < 1:
        return None
    if is_correction(message):
        return "correction"
    if is_completion(message):
        return "completion"
    return None


def for_resume(in_scope: int) -> list[str]:
    return ["resume"] if in_scope > 0 else []


def for_tool_results(denied: bool, failed: bool, in_scope: int) -> list[str]:
    """``denial`` when the user rejected a call; ``tool_error`` when one failed and memories are visible."""
    return [kind for kind, fires in (("denial", denied), ("tool_error", failed and in_scope > 0)) if fires]
