"""Every SDK example in docs/sdks-mcp-hooks.md and in each SDK's own README runs, against a live server."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import LiveServer, build_typescript_sdk, example_environment

ROOT = Path(__file__).resolve().parents[2]
PYTHON_READMES = [ROOT / "docs" / "sdks-mcp-hooks.md", ROOT / "sdk" / "python" / "README.md"]
TYPESCRIPT_READMES = [ROOT / "docs" / "sdks-mcp-hooks.md", ROOT / "sdk" / "typescript" / "README.md"]


def blocks(paths: list[Path], language: str, needle: str) -> list[tuple[str, str]]:
    return [(f"{path.relative_to(ROOT)}#{number}", block) for path in paths
            for number, block in enumerate(re.findall(rf"```{language}\n(.*?)```", path.read_text(), re.S))
            if needle in block]


PYTHON_EXAMPLES = blocks(PYTHON_READMES, "python", "memoryd_sdk")
TYPESCRIPT_EXAMPLES = blocks(TYPESCRIPT_READMES, "js", "@memoryd/sdk")


def test_there_are_examples_in_every_readme() -> None:
    assert {label.split("#")[0] for label, _ in PYTHON_EXAMPLES} == {"docs/sdks-mcp-hooks.md", "sdk/python/README.md"}
    assert {label.split("#")[0] for label, _ in TYPESCRIPT_EXAMPLES} == {"docs/sdks-mcp-hooks.md", "sdk/typescript/README.md"}


@pytest.mark.parametrize(("label", "example"), PYTHON_EXAMPLES, ids=[label for label, _ in PYTHON_EXAMPLES])
def test_a_python_example_runs(live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                               label: Any, example: Any) -> None:
    for name, value in example_environment(live_server, f"readme_py_{len(label)}_{label[-1]}").items():
        monkeypatch.setenv(name, value)
    exec(compile(example, label, "exec"), {})  # noqa: S102 - our own README
    assert "deploy_steps" in capsys.readouterr().out


@pytest.mark.parametrize(("label", "example"), TYPESCRIPT_EXAMPLES, ids=[label for label, _ in TYPESCRIPT_EXAMPLES])
def test_a_typescript_example_runs(live_server: LiveServer, tmp_path: Path, label: Any, example: Any) -> None:
    built = build_typescript_sdk()
    script = built / "scripts" / f".readme-{label.replace('/', '-').replace('#', '-')}.mjs"  # inside the package:
    script.write_text(example)  # "@memoryd/sdk" resolves to itself there
    try:
        done = subprocess.run(["node", str(script)], cwd=built, capture_output=True, text=True, timeout=120,
                              env={**os.environ, **example_environment(live_server, f"readme_ts_{len(label)}_{label[-1]}")})
    finally:
        script.unlink()
    assert done.returncode == 0, f"{label}:\n{done.stdout}\n{done.stderr}"
    assert "deploy_steps" in done.stdout
