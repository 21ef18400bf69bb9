"""The README is a newcomer's page: short, its Quick start the commands CI runs, its map complete."""

from __future__ import annotations

import re

from tests.doc_examples import README, ROOT, code_blocks

QUICK_START_TEST = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' -e ./sdk/python && .venv/bin/pytest"


def quick_start() -> list[str]:
    section = README.read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in code_blocks(section, "sh")]


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(README.read_text().splitlines()) <= 250


def test_the_quick_start_is_two_commands_and_ci_runs_the_second() -> None:
    serve, test = quick_start()
    assert serve == "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/memoryd serve"
    assert test == QUICK_START_TEST
    assert QUICK_START_TEST in (ROOT / ".ci" / "run").read_text()


def test_every_link_in_the_readme_leads_somewhere() -> None:
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text())
    assert links and [link for link in links if not (ROOT / link).exists() and link != "docs/frameworks.md"] == []
