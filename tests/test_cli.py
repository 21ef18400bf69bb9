"""The memoryd command line, as an operator uses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memoryd.cli import main
from tests.helpers import free_port, make_services, present, wait_until_serving


@pytest.fixture
def run(sqlite_url: str) -> Callable[..., Result]:
    """The CLI on a database ``memoryd db upgrade`` made (other commands never create one)."""
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(main, list(args), env={"MEMORYD_DATABASE_URL": sqlite_url, **(env or {})})

    assert invoke("db", "upgrade").exit_code == 0
    return invoke


def _last_line(result: Result) -> str:
    return str(result.output).strip().splitlines()[-1]


def test_create_commands_print_the_new_id_or_token_on_their_last_line(run: Callable[..., Result], sqlite_url: str) -> None:
    user = run("users", "create", "alice")
    assert user.exit_code == 0, user.output
    user_id = _last_line(user)
    token = run("tokens", "create", "--user", user_id, "--scopes", "read,write", "--permission", "admin.memories")
    assert token.exit_code == 0, token.output
    workstream = run("workstreams", "create", "--owner", user_id, "--name", "backend")
    assert workstream.exit_code == 0, workstream.output

    services = make_services(sqlite_url)
    principal = services.directory.authenticate(_last_line(token))
    assert principal is not None and principal.user_id == user_id
    assert principal.permissions == {"admin.memories"}
    assert present(services.directory.workstream(_last_line(workstream))).owner_user_id == user_id


@pytest.mark.parametrize(("args", "message"), [
    (("tokens", "create", "--user", "nobody"), "user not found: nobody"),
    (("tokens", "create", "--user", "x", "--scopes", "admin"), "scopes must be some of read, write, service"),
    (("workstreams", "create", "--owner", "nobody"), "user not found: nobody"),
])
def test_bad_input_exits_non_zero_with_a_one_line_reason(run: Callable[..., Result], args: Any, message: str) -> None:
    result = run(*args)
    assert result.exit_code == 1
    assert message in result.output


def test_db_upgrade_can_run_twice(run: Callable[..., Result]) -> None:
    assert run("db", "upgrade").exit_code == 0
    assert run("db", "upgrade").exit_code == 0


def test_projections_rebuild_reports_what_it_rebuilt(run: Callable[..., Result], sqlite_url: str) -> None:
    services = make_services(sqlite_url)
    from commands.model import SaveMemory
    from events.types import EventMetadata
    from memoryd.kernel.domain import Namespace

    for name in ("one", "two"):
        services.bus.handle(SaveMemory(name, "c", "d", None, Namespace("global", "")), EventMetadata(surface="cli"))
    result = run("projections", "rebuild")
    assert result.exit_code == 0, result.output
    assert "up to position 2: 2 memories" in result.output


def _serve(sqlite_url: str, extra_env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    env = {**os.environ, "MEMORYD_DATABASE_URL": sqlite_url, **extra_env}
    process = subprocess.Popen(
        [sys.executable, "-m", "memoryd", "serve", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    if wait_until_serving(f"http://127.0.0.1:{port}/v1/api/openapi.json", timeout=20):
        return process, port
    process.kill()
    raise AssertionError(f"memoryd serve did not come up: {process.communicate()}")


def _request(port: int, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, data=json.dumps(body).encode() if body else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status, json.loads(response.read())


def test_serve_creates_the_schema_and_prints_an_admin_token_once(sqlite_url: str) -> None:
    process, port = _serve(sqlite_url, {})
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/api/openapi.json", timeout=5) as response:
            assert response.headers["Server"] == "memoryd"  # waitress, not Werkzeug's development server
    finally:
        process.terminate()
        stdout, stderr = process.communicate(timeout=10)
    token = stdout.strip().splitlines()[-1]
    assert token.startswith("mdt_")
    assert "development server" not in stderr.lower()

    process, port = _serve(sqlite_url, {})  # a second start prints no new token
    try:
        assert _request(port, token, "POST", "/v1/api/memories",
                        {"name": "n", "content": "c", "description": "d"})[0] == 201
        assert _request(port, token, "GET", "/v1/api/admin/memories")[1]["total"] == 1
    finally:
        process.terminate()
        stdout, stderr = process.communicate(timeout=10)
    assert stdout.strip() == ""
    log_lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert {"method": "POST", "path": "/v1/api/memories", "status": 201} in [
        {key: line[key] for key in ("method", "path", "status")} for line in log_lines
    ]


def test_serve_adopts_the_admin_token_from_the_environment(sqlite_url: str) -> None:
    process, port = _serve(sqlite_url, {"MEMORYD_ADMIN_TOKEN": "chosen-admin-token"})
    try:
        assert _request(port, "chosen-admin-token", "GET", "/v1/api/admin/memories")[0] == 200
    finally:
        process.terminate()
        stdout, _ = process.communicate(timeout=10)
    assert stdout.strip() == ""


def test_projects_are_managed_from_the_command_line_and_logged(run: Callable[..., Result], sqlite_url: str) -> None:
    owner = _last_line(run("users", "create", "owner"))
    member = _last_line(run("users", "create", "member"))
    created = run("projects", "create", "--owner", owner, "--name", "apollo")
    assert created.exit_code == 0, created.output
    project = _last_line(created)
    for args in (("grant", project, member, "--access", "read"), ("revoke", project, member), ("archive", project),
                 ("reactivate", project)):
        result = run("projects", *args)
        assert result.exit_code == 0 and _last_line(result) == project, result.output
    assert run("projects", "revoke", project, member).exit_code == 1
    events = [event for event in make_services(sqlite_url).store.iter_all() if event.event_type != "user.create"]
    assert [event.event_type for event in events] == [
        "project.create", "project.grant", "project.revoke", "project.archive", "project.reactivate"]
    assert {event.metadata["surface"] for event in events} == {"cli"}


def test_workstreams_and_sessions_are_managed_from_the_command_line(run: Callable[..., Result], sqlite_url: str) -> None:
    owner = _last_line(run("users", "create", "owner"))
    project = _last_line(run("projects", "create", "--owner", owner, "--name", "apollo"))
    workstream = _last_line(run("workstreams", "create", "--owner", owner, "--project", project, "--no-memory"))
    services = make_services(sqlite_url)
    found = present(services.directory.workstream(workstream))
    assert (found.project_id, found.persona_memory) == (project, False)
    assert run("workstreams", "update", workstream, "--detach", "--memory").exit_code == 0
    found = present(services.directory.workstream(workstream))
    assert (found.project_id, found.persona_memory) == (None, True)
    assert run("workstreams", "create", "--owner", owner, "--project", "missing").exit_code == 1
    created = run("sessions", "create", "--kind", "coordinator", "--workstream", workstream, "--user", owner)
    assert created.exit_code == 0, created.output
    session = services.sessions.by_token(_last_line(created))
    assert session is not None and session.kind == "coordinator" and session.user_id == owner
    refused = run("sessions", "create", "--kind", "coordinator", "--workstream", workstream)
    assert refused.exit_code == 1 and "require an authenticated user_id" in refused.output
