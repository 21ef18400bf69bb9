"""The Python shown in the README runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.domain import Namespace
from tests.helpers import make_services

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_embedding_example_in_the_readme_runs(sqlite_url: str, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    [example] = [block for block in re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
                 if "build_services" in block]
    services = make_services(sqlite_url)
    user_id = services.directory.create_user("agent")
    workstream_id = services.directory.create_workstream(user_id, "ws")
    services.bus.handle(SaveMemory("deploy_steps", "we deploy with buildkite", "how we deploy", None,
                                   Namespace("global", "")), EventMetadata())
    monkeypatch.setenv("MEMORYD_DATABASE_URL", sqlite_url)
    exec(example, {"workstream_id": workstream_id, "user_id": user_id})  # noqa: S102 - our own README
    printed = capsys.readouterr().out
    assert "[general:global] deploy_steps - how we deploy" in printed  # the tool's search
    assert '<memories>\n  <memory name="deploy_steps" type="general" scope="global"' in printed  # the turn's block
    assert "You are a coding agent.\n\n<memories>" in printed and "You have 1 memory in scope." in printed
