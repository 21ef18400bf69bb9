"""The SDK installs without any framework; each integration needs its extra and says so; CI installs the extras."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = tomllib.loads((ROOT / "sdk" / "python" / "pyproject.toml").read_text())["project"]
EXTRAS = {"langgraph": ("memoryd_sdk.integrations.langgraph", "langgraph"),
          "openai-agents": ("memoryd_sdk.integrations.openai_agents", "agents"),
          "pydantic-ai": ("memoryd_sdk.integrations.pydantic_ai", "pydantic_ai")}


def python(code: str) -> subprocess.CompletedProcess[str]:
    path = f"{ROOT}:{ROOT / 'sdk' / 'python'}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"})


def test_the_default_install_names_no_framework_and_each_extra_names_its_own() -> None:
    assert not any(name.startswith(("langgraph", "langchain", "openai-agents", "pydantic-ai")) for name in SDK["dependencies"])
    assert [requirement.split(">")[0] for requirement in SDK["optional-dependencies"]["langgraph"]] == ["langgraph"]
    assert [requirement.split(">")[0] for requirement in SDK["optional-dependencies"]["openai-agents"]] == ["openai-agents"]
    assert [requirement.split(">")[0] for requirement in SDK["optional-dependencies"]["pydantic-ai"]] == ["pydantic-ai-slim"]


def test_the_test_extra_installs_the_frameworks_at_the_sdk_extras_versions() -> None:
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    for extra in EXTRAS:
        assert set(SDK["optional-dependencies"][extra]) <= set(test_extra)


def test_importing_the_sdk_loads_no_framework() -> None:
    done = python("import sys, memoryd_sdk, memoryd_sdk.integrations; "
                  "print(sorted({'agents', 'pydantic_ai', 'openai', 'langgraph', 'langchain_core'} & set(sys.modules)))")
    assert done.stdout.strip() == "[]", done.stderr


@pytest.mark.parametrize("extra", EXTRAS)
def test_an_integration_without_its_framework_names_the_extra_to_install(extra: Any) -> None:
    module, framework = EXTRAS[extra]
    done = python(f"import sys; sys.modules[{framework!r}] = None\n"
                  f"try:\n    import {module}\nexcept ImportError as error:\n    print(error)")
    assert f"pip install 'memoryd-sdk[{extra}]'" in done.stdout, done.stderr


def test_every_sdk_package_is_packaged() -> None:
    """The integrations ship with ``pip install ./sdk/python``, not only in an editable install."""
    sdk = ROOT / "sdk" / "python"
    declared = set(tomllib.loads((sdk / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(sdk).parts) for init in (sdk / "memoryd_sdk").rglob("__init__.py")}
    assert found == declared
