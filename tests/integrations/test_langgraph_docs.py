"""The LangGraph example of the docs (whichever page holds it) runs against a live memoryd and prints what its
page's ```text block after it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sdk.test_readme_examples import environment

DOCS = Path(__file__).resolve().parents[2] / "docs"


def examples() -> list[tuple[str, str, str]]:
    """Each docs example that uses the integration: (page#number, the script, the ```text block after it)."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        fenced = re.findall(r"```(\w*)\n(.*?)```", page.read_text(), re.S)
        for number, ((language, script), (after, printed)) in enumerate(zip(fenced, fenced[1:] + [("", "")])):
            if language == "python" and "memoryd_sdk.integrations.langgraph" in script:
                found.append((f"{page.name}#{number}", script, printed if after == "text" else ""))
    return found


EXAMPLES = examples()


def test_the_docs_have_a_langgraph_example_that_says_what_it_prints():
    assert EXAMPLES and all(printed for _, _, printed in EXAMPLES)


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")  # create_react_agent
@pytest.mark.parametrize(("label", "example", "printed"), EXAMPLES, ids=[label for label, _, _ in EXAMPLES])
def test_the_langgraph_example_prints_what_its_page_says(live_server, monkeypatch, capsys, label, example, printed):
    for name, value in environment(live_server, f"langgraph_docs_{label[-1]}").items():
        monkeypatch.setenv(name, value)
    exec(compile(example, label, "exec"), {})  # noqa: S102 - our own docs
    assert capsys.readouterr().out == printed
