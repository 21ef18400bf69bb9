"""The examples in docs/ run and print what the page says they print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memoryd.bootstrap import analyzer_for
from memoryd.config import load_config
from tests.helpers import LiveServer

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


def test_the_analyzer_examples_print_what_the_search_page_says(capsys: pytest.CaptureFixture[str]) -> None:
    [example] = blocks("search.md", "python")
    exec(example, {})  # noqa: S102 - our own docs
    assert capsys.readouterr().out.splitlines() == promised(example)


def test_the_search_pages_configuration_is_valid(tmp_path: Path) -> None:
    [example] = blocks("search.md", "toml")
    (tmp_path / "config.toml").write_text(example)
    config = load_config(tmp_path / "config.toml", environ={})
    assert (config.search.language, config.search.k1, config.search.b) == ("german", 1.2, 0.5)
    assert analyzer_for(config).language == "german"


def test_the_identities_pages_configuration_is_valid(tmp_path: Path) -> None:
    [example] = blocks("identities.md", "toml")
    (tmp_path / "config.toml").write_text(example)
    config = load_config(tmp_path / "config.toml", environ={})
    assert (config.auth.default_token_days, config.auth.session_idle_days) == (0, 30)


def test_the_identities_pages_walk_through_runs_against_a_live_server(live_server: LiveServer) -> None:
    """The token's life, as written (the server's address swapped in), in bash with set -e."""
    import os
    import subprocess
    import sys

    walk_through = blocks("identities.md", "sh")[0].replace("http://127.0.0.1:8080", live_server.base_url)
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "ADMIN": live_server.admin_token, "MEMORYD_DATABASE_URL": live_server.database_url,
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-ec", walk_through], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert '"reason": "token revoked"' in done.stdout.replace('"reason":"', '"reason": "')
    assert '"action": "token.revoke"' in done.stdout.replace('"action":"', '"action": "')
    assert "laptop stolen" in done.stdout
