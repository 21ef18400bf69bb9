"""The identity commands as an operator uses them: list, deactivate, revoke, close; a lost admin token."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from api.app import create_app
from memoryd.app.services import Services
from memoryd.bootstrap import prepare_database
from memoryd.cli import main
from tests.helpers import make_services


@pytest.fixture
def cli(sqlite_url: str) -> Iterator[tuple[Callable[..., Result], Services]]:
    services = make_services(sqlite_url)  # the database exists: only serve and db upgrade make one
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> Result:
        result = runner.invoke(main, list(args), env={"MEMORYD_DATABASE_URL": sqlite_url})
        assert (result.exit_code == 0) == ok, result.output
        return result

    yield invoke, services
    services.database.dispose()


def _lines(result: Result) -> list[Any]:
    return [json.loads(line) for line in result.output.strip().splitlines()]


def _last(result: Result) -> str:
    return str(result.output).strip().splitlines()[-1]


def test_a_name_is_taken_once(cli: tuple[Callable[..., Result], Services]) -> None:
    run, _ = cli
    run("users", "create", "alice")
    again = run("users", "create", "alice", ok=False)
    assert again.exit_code == 1 and "a user named 'alice' already exists" in again.output


def test_users_tokens_and_sessions_through_their_lifecycle(cli: tuple[Callable[..., Result], Services]) -> None:
    run, services = cli
    alice = _last(run("users", "create", "alice"))
    token = _last(run("tokens", "create", "--user", alice, "--name", "laptop", "--expires-in-days", "30"))
    [listed] = _lines(run("tokens", "list", "--user", alice))
    assert listed["name"] == "laptop" and listed["expires_at"] and token not in json.dumps(listed)
    assert services.directory.authenticate(token) is not None
    run("users", "deactivate", alice, "--reason", "left")
    assert _lines(run("users", "list", "--state", "deactivated"))[0]["user_id"] == alice
    assert services.directory.authenticate(token) is None
    run("users", "reactivate", alice)
    run("tokens", "revoke", listed["token_id"], "--reason", "rotated")
    assert _lines(run("tokens", "list", "--state", "revoked"))[0]["token_id"] == listed["token_id"]
    workstream = _last(run("workstreams", "create", "--owner", alice))
    coordinator = run("sessions", "create", "--workstream", workstream, "--kind", "coordinator", "--user", alice)
    coordinator_id = coordinator.output.splitlines()[0]
    child = run("sessions", "create", "--workstream", workstream, "--parent", coordinator_id).output.splitlines()[0]
    assert {s["session_id"] for s in _lines(run("sessions", "list", "--state", "open"))} == {coordinator_id, child}
    closed = run("sessions", "close", coordinator_id, "--reason", "done").output.split()
    assert closed == [coordinator_id, child]
    assert run("sessions", "list", "--state", "open").output == ""
    assert [w["workstream_id"] for w in _lines(run("workstreams", "list", "--owner", alice))] == [workstream]
    project = _last(run("projects", "create", "--owner", alice, "--name", "apollo"))
    assert [p["project_id"] for p in _lines(run("projects", "list", "--owner", alice))] == [project]
    actions: dict[str, Any] = {}
    with services.database.read() as conn:
        from events.audit import AuditQuery, list_audit

        for record in list_audit(conn, AuditQuery(limit=1000)):
            actions.setdefault(record.action, []).append(record)
    assert {"user.create", "user.deactivate", "user.reactivate", "token.create", "token.revoke",
            "session.close"} <= set(actions)
    assert all(record.actor == "cli" for record in actions["token.revoke"] + actions["session.close"])
    assert actions["user.deactivate"][0].reason == "left"


def test_a_lost_admin_token_is_replaced_from_the_command_line(cli: tuple[Callable[..., Result], Services]) -> None:
    """The first start printed the admin token once, and it was lost: whoever can reach the database mints
    another for the admin user (by name), and the old one can be revoked."""
    run, services = cli
    assert prepare_database(services, environ={}) is not None  # printed once, then lost
    fresh = _last(run("tokens", "create", "--user", "admin", "--scopes", "read,write,service",
                      "--permission", "admin.memories", "--name", "replaces the lost one"))
    client = create_app(services).test_client()
    answer = client.get("/v1/api/admin/users", headers={"Authorization": f"Bearer {fresh}"})
    assert answer.status_code == 200 and [u["name"] for u in answer.get_json()["users"]] == ["admin"]
    lost = [t for t in _lines(run("tokens", "list")) if t["name"] == "admin (first start)"]
    run("tokens", "revoke", lost[0]["token_id"], "--reason", "lost")
    assert client.get("/v1/api/token", headers={"Authorization": f"Bearer {fresh}"}).status_code == 200


def test_a_session_close_needs_a_session_or_idle(cli: tuple[Callable[..., Result], Services]) -> None:
    run, _ = cli
    assert run("sessions", "close", ok=False).exit_code == 2
    assert run("sessions", "close", "--idle").output == ""
