"""The examples in docs/ run and print what the page says they print."""

from __future__ import annotations

import re
from pathlib import Path

from memoryd.bootstrap import analyzer_for
from memoryd.config import load_config

DOCS = Path(__file__).resolve().parent.parent / "docs"


def blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (DOCS / page).read_text(), re.S)


def promised(example: str) -> list[str]:
    """What each ``print`` is said to print: its trailing comment, or the comment line after it."""
    lines = []
    for line in example.splitlines():
        if line.startswith("print(") and "  # " in line:
            lines.append(line.split("  # ", 1)[1])
        elif line.startswith("# "):
            lines.append(line[2:])
    return lines


def test_the_analyzer_examples_print_what_the_search_page_says(capsys):
    [example] = blocks("search.md", "python")
    exec(example, {})  # noqa: S102 - our own docs
    assert capsys.readouterr().out.splitlines() == promised(example)


def test_the_search_pages_configuration_is_valid(tmp_path):
    [example] = blocks("search.md", "toml")
    (tmp_path / "config.toml").write_text(example)
    config = load_config(tmp_path / "config.toml", environ={})
    assert (config.search.language, config.search.k1, config.search.b) == ("german", 1.2, 0.5)
    assert analyzer_for(config).language == "german"
