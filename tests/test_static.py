"""ruff and mypy (strict on the product packages and on tests/) pass: run as part of the suite, so CI runs them too.

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


def test_mypy_strict_finds_nothing_in_the_packages_or_the_tests() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_package_in_the_tree_is_packaged() -> None:
    """A package pyproject.toml leaves out works in the editable install and is missing from ``pip install .``."""
    import tomllib

    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts)
             for top in ("memoryd", "api", "commands", "events", "projections", "workers")
             for init in (ROOT / top).rglob("__init__.py")}
    assert found == declared
