"""The SDK installs and imports without any framework; each integration comes with its own extra."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "sdk" / "python"
FRAMEWORKS = ("langgraph", "langchain_core")


def test_importing_the_sdk_imports_no_framework():
    check = ("import sys, memoryd_sdk; "
             f"print(sorted(name for name in sys.modules if name.split('.')[0] in {FRAMEWORKS!r}))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(SDK)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_framework_is_an_extra_and_every_sdk_package_is_packaged():
    project = tomllib.loads((SDK / "pyproject.toml").read_text())
    assert not [dependency for dependency in project["project"]["dependencies"] if dependency.startswith("lang")]
    assert project["project"]["optional-dependencies"]["langgraph"] == ["langgraph>=1,<2"]
    found = {".".join(init.parent.relative_to(SDK).parts) for init in (SDK / "memoryd_sdk").rglob("__init__.py")}
    assert found == set(project["tool"]["setuptools"]["packages"])
