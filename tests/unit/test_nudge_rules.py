"""Nudges: the reference heuristics that recognise a correction and a completion."""

from __future__ import annotations

import pytest

from memoryd.app.turn.nudges import is_completion, is_correction

CORRECTIONS = [
    "No, use tabs", "no. that is wrong", "please don't push to main", "I don't want that", "dont do that",
    "Stop using print", "Actually, use pytest", "instead, call the API", "not like that", "Wrong file",
    "that's not what I asked", "thats not it", "I said tabs", "I meant the other one", "never merge, always rebase",
    "no you should ask first", "no that breaks it", "no the other branch", "no not that one", "no do it again",
    "no but keep the tests",
]
NOT_CORRECTIONS = ["no problem", "no worries, go on", "I know", "what's next", "nothing else to add", "notes please",
                   "actually", "stopwatch readings", "", "   "]
COMPLETIONS = [
    "that's all", "thats all for today, and a long message that goes on and on past eighty characters easily", "LGTM",
    "lgtm, ship it", "thanks", "Thanks!", "perfect", "great job", "done", "looks good", "that works",
]
NOT_COMPLETIONS = [
    "thanks for the summary", "perfect, but can you also add tests", "looks good?", "done? can you check",
    "thanks, now the next file", "thanks " + "very " * 20 + "much", "great, what else", "well done is better than said",
]


@pytest.mark.parametrize("message", CORRECTIONS)
def test_corrections_are_recognised(message: str) -> None:
    assert is_correction(message)


@pytest.mark.parametrize("message", NOT_CORRECTIONS)
def test_ordinary_messages_are_not_corrections(message: str) -> None:
    assert not is_correction(message)


@pytest.mark.parametrize("message", COMPLETIONS)
def test_completions_are_recognised(message: str) -> None:
    assert is_completion(message)


@pytest.mark.parametrize("message", NOT_COMPLETIONS)
def test_acknowledgements_with_a_follow_up_are_not_completions(message: str) -> None:
    assert not is_completion(message)
