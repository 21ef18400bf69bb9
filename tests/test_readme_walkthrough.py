"""The README's walk-through ("Five minutes with memoryd"), pasted into bash beside a live ``memoryd serve``,
does what it says."""

from __future__ import annotations

import re
from pathlib import Path

from tests.doc_examples import README, error_messages, readme_walkthrough, run_pasted
from tests.helpers import LiveServer, http_call

CAPTURED = ("ADMIN", "USER_ID", "MEMORY_ID", "PROJECT", "SESSION", "SESSION_TOKEN")


def test_the_walkthrough_never_assigns_the_shells_user_variable() -> None:
    assert not re.search(r"^\s*(export\s+)?USER=", readme_walkthrough(), re.M)


def test_the_walkthrough_runs_when_pasted_into_bash(live_server: LiveServer, tmp_path: Path) -> None:
    report = "".join(f'echo "{name}=${name}"\n' for name in CAPTURED)
    done = run_pasted(readme_walkthrough() + "\n" + report, tmp_path, live_server.base_url, live_server.database_url)
    assert done.returncode == 0, done.stdout + done.stderr  # set -u: every id it uses was captured
    assert "Error" not in done.stderr, done.stderr
    assert error_messages(done.stdout) == [], done.stdout  # no answer was an error
    captured = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.split("=", 1)[0] in CAPTURED)
    assert set(captured) == set(CAPTURED) and all(captured.values()), captured

    port = int(live_server.base_url.rsplit(":", 1)[1])
    assert '"version":2' in done.stdout.replace('"version": ', '"version":')  # the conditional update was written
    assert "Saved memory 'deploy_steps' (scope=project)" in done.stdout  # the memory tool saved where it says
    status, project, _ = http_call(port, captured["ADMIN"], "GET",
                                   f"/v1/api/admin/memories?scope=project&scope_id={captured['PROJECT']}")
    assert status == 200 and [memory["name"] for memory in project["memories"]] == ["deploy_steps"]
    status, receipt, _ = http_call(port, captured["SESSION_TOKEN"], "GET",
                                   f"/v1/api/sessions/{captured['SESSION']}/turns/t-7")
    assert status == 200 and [item["name"] for item in receipt["items"]] == ["deploy_steps"]  # the turn found it
    memory = captured["MEMORY_ID"]  # saved, updated, deleted, restored, then erased: gone for good
    assert f'"selector":{{"memory_id":"{memory}"}}' in done.stdout and f'"memories":["{memory}"]' in done.stdout
    assert http_call(port, captured["ADMIN"], "GET", f"/v1/api/admin/memories/{memory}")[0] == 404
    assert "the log verifies" in done.stdout + done.stderr


def test_the_readme_names_the_test_that_runs_its_walkthrough() -> None:
    assert "tests/test_readme_walkthrough.py" in README.read_text()
