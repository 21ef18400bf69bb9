"""The README's walk-through ("Using it"), pasted into bash beside a live ``memoryd serve``, does what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import LiveServer, http_call

README = Path(__file__).resolve().parent.parent / "README.md"
CAPTURED = ("ADMIN", "USER_ID", "MEMORY_ID", "PROJECT", "SESSION", "SESSION_TOKEN")


def walkthrough() -> str:
    """The shell blocks of "Using it", in order, up to the SDKs (which need installing first)."""
    section = README.read_text().split("\n## Using it\n", 1)[1].split("\n### SDKs", 1)[0]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))


def a_venv(directory: Path) -> None:
    """``.venv`` as the Quick start makes it: ``source .venv/bin/activate`` puts this memoryd on the PATH."""
    bin_dir = directory / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    (bin_dir / "memoryd").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memoryd "$@"\n')
    (bin_dir / "memoryd").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)


def test_the_walkthrough_never_assigns_the_shells_user_variable() -> None:
    assert not re.search(r"^\s*(export\s+)?USER=", walkthrough(), re.M)


def test_the_walkthrough_runs_when_pasted_into_bash(live_server: LiveServer, tmp_path: Path) -> None:
    a_venv(tmp_path)
    script = walkthrough().replace("http://127.0.0.1:8080", live_server.base_url)
    report = "".join(f'echo "{name}=${name}"\n' for name in CAPTURED)
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script + "\n" + report], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MEMORYD_DATABASE_URL": live_server.database_url})
    assert done.returncode == 0, done.stdout + done.stderr  # set -u: every id it uses was captured
    assert "Error" not in done.stderr, done.stderr
    captured = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.split("=", 1)[0] in CAPTURED)
    assert set(captured) == set(CAPTURED) and all(captured.values()), captured

    port = int(live_server.base_url.rsplit(":", 1)[1])
    assert "Saved memory 'deploy_steps' (scope=project)" in done.stdout  # the memory tool saved where it says
    status, project, _ = http_call(port, captured["ADMIN"], "GET",
                                   f"/v1/api/admin/memories?scope=project&scope_id={captured['PROJECT']}")
    assert status == 200 and [memory["name"] for memory in project["memories"]] == ["deploy_steps"]
    status, receipt, _ = http_call(port, captured["SESSION_TOKEN"], "GET",
                                   f"/v1/api/sessions/{captured['SESSION']}/turns/t-7")
    assert status == 200 and [item["name"] for item in receipt["items"]] == ["deploy_steps"]  # the turn found it
    memory = captured["MEMORY_ID"]  # saved, updated, deleted, restored, deleted, then erased: gone for good
    assert f'"selector":{{"memory_id":"{memory}"}}' in done.stdout and f'"memories":["{memory}"]' in done.stdout
    assert http_call(port, captured["ADMIN"], "GET", f"/v1/api/admin/memories/{memory}")[0] == 404
