"""Reading the examples out of the README and docs/, and running their shell as a reader pastes it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EXAMPLE_URL = "http://127.0.0.1:8080"  # where the examples expect memoryd; the tests swap in a live server's


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def readme_walkthrough() -> str:
    """The shell blocks of the README's "Five minutes with memoryd", in order."""
    section = README.read_text().split("\n## Five minutes with memoryd\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(code_blocks(section, "sh"))


def a_venv(directory: Path) -> None:
    """``.venv`` as the Quick start makes it: ``source .venv/bin/activate`` puts this memoryd on the PATH."""
    bin_dir = directory / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    (bin_dir / "memoryd").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memoryd "$@"\n')
    (bin_dir / "memoryd").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)


def run_pasted(script: str, directory: Path, base_url: str, database_url: str,
               replacements: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``script`` pasted into bash (``set -euo pipefail``) in ``directory``, beside the server at ``base_url``."""
    a_venv(directory)
    for example, actual in {EXAMPLE_URL: base_url, **(replacements or {})}.items():
        script = script.replace(example, actual)
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=directory, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "MEMORYD_DATABASE_URL": database_url})


def error_messages(output: str) -> list[str]:
    """The ``error`` of every JSON answer printed (compact or spaced)."""
    return [json.loads(f'"{message}"') for message in re.findall(r'"error":\s?"((?:[^"\\]|\\.)*)"', output)]
