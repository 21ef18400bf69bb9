"""Each docs example of the Python framework integrations runs against a live memoryd and prints the ```text
block that follows it (found on any page: the framework pages gather in docs/frameworks.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LiveServer, example_environment

DOCS = Path(__file__).resolve().parents[2] / "docs"
MODULES = ("memoryd_sdk.integrations.langgraph", "memoryd_sdk.integrations.openai_agents",
           "memoryd_sdk.integrations.pydantic_ai")


def examples() -> list[tuple[str, str, str]]:
    """(page#number, the script, the ```text block after it) for each example that imports an integration."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        fenced = re.findall(r"```(\w*)\n(.*?)```", page.read_text(), re.S)
        for number, ((language, script), (after, printed)) in enumerate(zip(fenced, fenced[1:] + [("", "")])):
            if language == "python" and any(f"from {module} import" in script for module in MODULES):
                found.append((f"{page.name}#{number}", script, printed if after == "text" else ""))
    return found


EXAMPLES = examples()


def test_each_integration_has_an_example() -> None:
    assert [[module in script for _, script, _ in EXAMPLES].count(True) for module in MODULES] == [1, 1, 1]


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")  # create_react_agent
@pytest.mark.parametrize(("label", "example", "printed"), EXAMPLES, ids=[label for label, _, _ in EXAMPLES])
def test_an_example_runs_and_prints_what_its_page_says(live_server: LiveServer, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], label: Any, example: Any,
                                                       printed: Any) -> None:
    for name, value in example_environment(live_server, f"frameworks_docs_{label[-1]}").items():
        monkeypatch.setenv(name, value)
    exec(compile(example, label, "exec"), {"__name__": "__docs__"})  # noqa: S102 - our own docs
    assert printed, f"{label} is followed by no ```text block of what it prints"
    assert capsys.readouterr().out == printed
