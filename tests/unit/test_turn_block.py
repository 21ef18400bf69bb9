"""The ``<memories>`` block cannot be broken out of, whatever the memories say; budgets hold exactly."""

from __future__ import annotations

import html
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.app.turn.block import CONTENT_CHARS, hint, render, system_content
from memoryd.kernel.domain import Memory

STRUCTURE = st.sampled_from(['<', '>', '&', '"', "'", "\n", " ", "/", "=", "memory", "memories", "&lt;", "&#x27;"])
TEXT = st.lists(STRUCTURE | st.characters(blacklist_categories=["Cs"]), max_size=300).map("".join)
SHAPE = re.compile(r'  <memory name="([^"<>]*)" type="([^"<>]*)" scope="([^"<>]*)"(?: description="([^"<>]*)")?>'
                   r"([^<>]*)</memory>\n")


def memories_of(fields: list[tuple[str, str, str, str, str]]) -> list[Memory]:
    return [Memory(f"id-{number}", name, description, kind, scope, "", content, "2026-01-01T00:00:00",
                   "2026-01-01T00:00:00") for number, (name, description, kind, scope, content) in enumerate(fields)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT, TEXT, TEXT, TEXT), min_size=1, max_size=6))
def test_no_memory_text_closes_the_block_leaves_an_attribute_or_forges_a_line(fields: Any) -> None:
    memories = memories_of(fields)
    block = render(memories).text
    assert block.startswith("<memories>\n") and block.endswith("</memories>") and block.count("</memories>") == 1
    body = block[len("<memories>\n"): -len("</memories>")]
    parsed = list(SHAPE.finditer(body))
    assert "".join(match.group(0) for match in parsed) == body  # every memory is exactly one element, in order
    assert len(parsed) == len(memories)
    for match, memory in zip(parsed, memories):
        name, kind, scope, description, content = (html.unescape(group) if group is not None else None
                                                    for group in match.groups())
        assert (name, kind, scope) == (memory.name, memory.type or "general", memory.scope or "global")
        assert description == (memory.description or None)
        cut = memory.content[:CONTENT_CHARS] + "..." if len(memory.content) > CONTENT_CHARS else memory.content
        assert content == cut


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(TEXT, TEXT, TEXT, TEXT, TEXT), max_size=6), st.integers(1, 5_000))
def test_a_budget_is_never_overrun_and_drops_whole_memories_from_the_lowest(fields: Any, max_chars: Any) -> None:
    memories = memories_of(fields)
    rendered = render(memories, max_chars)
    assert len(rendered.text) <= max_chars
    assert rendered.text == render(memories[: rendered.kept]).text  # a prefix of the ranking, whole
    if rendered.kept < len(memories):
        assert len(render(memories[: rendered.kept + 1]).text) > max_chars  # nothing dropped that would fit


def test_an_empty_description_leaves_the_attribute_out_and_empty_parts_leave_no_blank_lines() -> None:
    (memory,) = memories_of([("n", "", "general", "global", "c")])
    assert render([memory]).text == '<memories>\n  <memory name="n" type="general" scope="global">c</memory>\n</memories>'
    assert render([]).text == "" and system_content("", "", "") == ""
    assert system_content("sys", "", hint(2)) == f"sys\n\n{hint(2)}"
