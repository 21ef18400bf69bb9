"""ruff and mypy (strict on the product packages) pass: run as part of the suite, so CI runs them too.

Their settings are in pyproject.toml; a finding fails the test with the tool's own report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=240)


def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing_in_the_product_packages() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
