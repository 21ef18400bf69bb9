"""Each example in docs/frameworks-agents.md runs against a live memoryd and prints the block shown after it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "frameworks-agents.md"
EXAMPLES = re.findall(r"```python\n(.*?)```\n\nIt prints:\n\n```text\n(.*?)```", PAGE.read_text(), re.S)


def test_every_python_example_on_the_page_shows_what_it_prints():
    assert len(EXAMPLES) == PAGE.read_text().count("```python") == 2


@pytest.mark.parametrize(("example", "printed"), EXAMPLES, ids=["openai-agents", "pydantic-ai"])
def test_an_example_runs_and_prints_what_the_page_says(live_server, monkeypatch, capsys, example, printed):
    caller = live_server.caller("frameworks_docs")
    for name, value in {"MEMORYD_URL": live_server.base_url, "MEMORYD_ADMIN_TOKEN": live_server.admin_token,
                        "MEMORYD_USER_ID": caller["user_id"]}.items():
        monkeypatch.setenv(name, value)
    exec(compile(example, str(PAGE), "exec"), {"__name__": "__docs__"})  # noqa: S102 - our own docs
    assert capsys.readouterr().out == printed
