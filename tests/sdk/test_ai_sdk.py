"""The Vercel AI SDK integration (``@memoryd/sdk/ai-sdk``) against a live memoryd: its node tests and the docs' example."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LiveServer, build_typescript_sdk, example_environment

DOCS = Path(__file__).resolve().parents[2] / "docs"


def examples() -> list[tuple[str, str, str]]:
    """Each docs example that uses the integration: (page#number, the script, the ```text block after it)."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        fenced = re.findall(r"```(\w*)\n(.*?)```", page.read_text(), re.S)
        for number, ((language, script), (after, printed)) in enumerate(zip(fenced, fenced[1:] + [("", "")])):
            if language == "js" and "@memoryd/sdk/ai-sdk" in script:
                found.append((f"{page.name}#{number}", script, printed if after == "text" else ""))
    return found


EXAMPLES = examples()


def test_the_docs_have_an_ai_sdk_example() -> None:
    assert EXAMPLES


def test_the_ai_sdk_tests_pass_against_a_live_memoryd(live_server: LiveServer) -> None:
    env = {**os.environ, **example_environment(live_server, "aisdk")}
    done = subprocess.run(["node", "--test", "--test-reporter=tap", "test/ai-sdk.test.mjs"], cwd=build_typescript_sdk(),
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "# skipped 0" in done.stdout, done.stdout  # the live tests ran


@pytest.mark.parametrize(("label", "example", "printed"), EXAMPLES, ids=[label for label, _, _ in EXAMPLES])
def test_the_ai_sdk_example_prints_what_its_page_says(live_server: LiveServer, label: Any, example: Any, printed: Any) -> None:
    built = build_typescript_sdk()
    script = built / "scripts" / f".readme-docs-{label.replace('#', '-')}.mjs"  # inside the package, where
    script.write_text(example)  # "@memoryd/sdk" resolves to itself
    try:
        done = subprocess.run(["node", str(script)], cwd=built, capture_output=True, text=True, timeout=120,
                              env={**os.environ, **example_environment(live_server, f"aisdk_docs_{label[-1]}")})
    finally:
        script.unlink()
    assert done.returncode == 0, f"{label}:\n{done.stdout}\n{done.stderr}"
    assert printed, f"{label} is followed by no ```text block of what it prints"
    assert printed in done.stdout
