"""Users, tokens and sessions with a lifecycle, over the admin API: listed, expired, revoked, deactivated,
closed, each change audited, no secret anywhere but the one answer that creates it (docs/identities.md)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import update

from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.storage.schema import events, sessions, tokens
from tests.helpers import AgentSession, Caller, MakeCaller, World

USERS, TOKENS, SESSIONS, AUDIT = "/v1/api/admin/users", "/v1/api/admin/tokens", "/v1/api/admin/sessions", \
    "/v1/api/admin/audit"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _token(admin: Caller, user_id: str, **body: Any) -> Any:
    response = admin.post(TOKENS, json={"user_id": user_id, "scopes": ["read", "write"], **body})
    assert response.status_code == 201, response.json
    return response.json


def _save(agent: AgentSession, name: str) -> Any:
    """The memory tool's save over HTTP, its answer as it comes (a refused token: a 401)."""
    return agent.client.post(f"/v1/api/sessions/{agent.session_id}/memory", headers=agent.headers,
                             json={"action": "save", "name": name, "content": "c", "description": "d"})


def _audit(admin: Caller, action: str) -> Any:
    response = admin.get(AUDIT, query_string={"action": action})
    assert response.status_code == 200, response.json
    return response.json["records"]


def test_users_are_created_listed_and_named_once(admin: Caller) -> None:
    created = admin.post(USERS, json={"name": "alice"})
    assert created.status_code == 201 and created.json["name"] == "alice" and created.json["active"] is True
    again = admin.post(USERS, json={"name": "alice"})
    assert again.status_code == 409 and "alice" in again.json["error"]
    assert admin.get(f"{USERS}/{created.json['user_id']}").json == created.json
    assert admin.get(f"{USERS}/nobody").status_code == 404
    listed = admin.get(USERS, query_string={"name": "alice"}).json
    assert [user["user_id"] for user in listed["users"]] == [created.json["user_id"]]
    [record] = _audit(admin, "user.create")[-1:]
    assert record["user_id"] == created.json["user_id"] and record["actor"] == admin.user_id
    assert admin.post(USERS, json={}).status_code == 400


def test_a_deactivated_user_is_refused_at_once_and_a_reactivated_one_is_back(admin: Caller, alice: Caller) -> None:
    assert alice.get("/v1/api/memories").status_code == 200
    response = admin.post(f"{USERS}/{alice.user_id}/deactivate", json={"reason": "left the company"})
    assert response.status_code == 200 and response.json["active"] is False
    refused = alice.get("/v1/api/memories")
    assert refused.status_code == 401
    assert refused.json == {"error": "Unauthorized: user deactivated", "reason": "user deactivated"}
    [record] = _audit(admin, "user.deactivate")
    assert (record["user_id"], record["actor"], record["reason"]) == (alice.user_id, admin.user_id, "left the company")
    assert admin.post(f"{USERS}/{alice.user_id}/deactivate").status_code == 200  # again: nothing changes
    assert len(_audit(admin, "user.deactivate")) == 1
    assert admin.post(TOKENS, json={"user_id": alice.user_id, "scopes": ["read"]}).status_code == 409
    assert admin.post(f"{USERS}/{alice.user_id}/reactivate").status_code == 200
    assert alice.get("/v1/api/memories").status_code == 200
    assert len(_audit(admin, "user.reactivate")) == 1


def test_tokens_are_listed_without_their_secret_and_revoked_for_good(admin: Caller, alice: Caller, services: Services) -> None:
    made = _token(admin, alice.user_id, name="ci runner", permission="admin.memories", expires_in_days=30)
    secret = made.pop("token")
    assert secret.startswith("mdt_") and made["prefix"] == secret[:8] and made["name"] == "ci runner"
    assert made["permissions"] == ["admin.memories"] and made["expires_at"] is not None
    listed = admin.get(TOKENS, query_string={"user_id": alice.user_id}).json["tokens"]
    assert made["token_id"] in [token["token_id"] for token in listed]
    assert secret not in json.dumps(listed) and hashlib.sha256(secret.encode()).hexdigest() not in json.dumps(listed)
    own = admin.client.get("/v1/api/token", headers=_bearer(secret))
    assert own.status_code == 200 and own.get_json()["token_id"] == made["token_id"] and "token" not in own.get_json()
    revoked = admin.delete(f"{TOKENS}/{made['token_id']}", json={"reason": "leaked in a log"})
    assert revoked.status_code == 200 and revoked.json["revoked_at"] is not None
    answer = admin.client.get("/v1/api/memories", headers=_bearer(secret))
    assert answer.status_code == 401 and answer.get_json()["reason"] == "token revoked"
    [record] = _audit(admin, "token.revoke")
    assert (record["token_id"], record["reason"], record["actor"]) == (made["token_id"], "leaked in a log", admin.user_id)
    assert admin.get(TOKENS, query_string={"user_id": alice.user_id, "state": "revoked"}).json["tokens"][0][
        "token_id"] == made["token_id"]
    assert admin.delete(f"{TOKENS}/nope").status_code == 404


def test_an_expired_token_is_refused_naming_why(admin: Caller, alice: Caller, services: Services) -> None:
    made = _token(admin, alice.user_id, expires_at="2999-01-01T00:00:00Z")
    assert made["expires_at"] == "2999-01-01T00:00:00"
    assert admin.client.get("/v1/api/token", headers=_bearer(made["token"])).status_code == 200
    with services.database.write() as conn:
        conn.execute(update(tokens).where(tokens.c.token_id == made["token_id"]).values(expires_at="2000-01-01T00:00:00"))
    answer = admin.client.get("/v1/api/memories", headers=_bearer(made["token"]))
    assert answer.status_code == 401 and answer.get_json()["reason"] == "token expired"
    unknown = admin.client.get("/v1/api/memories", headers=_bearer("mdt_" + "x" * 43))
    assert unknown.json == {"error": "Unauthorized: missing or invalid token"}  # nothing more for a guess


@pytest.mark.parametrize("body, message", [
    ({"expires_at": "2999-01-01T00:00:00Z", "expires_in_days": 3}, "not both"),
    ({"expires_at": "2000-01-01T00:00:00Z"}, "future"),
    ({"expires_at": "tomorrow"}, "ISO 8601"),
    ({"expires_in_days": 0}, "expires_in_days"),
    ({"scopes": ["root"]}, "scopes"),
])
def test_a_token_request_that_cannot_be_met_is_a_400(admin: Caller, alice: Caller, body: dict[str, Any], message: str) -> None:
    response = admin.post(TOKENS, json={"user_id": alice.user_id, "scopes": ["read"], **body})
    assert response.status_code == 400 and message in response.json["error"]


def test_an_admin_without_service_cannot_mint_a_stronger_token(admin: Caller, alice: Caller, make_caller: MakeCaller) -> None:
    assert admin.post(TOKENS, json={"user_id": alice.user_id, "scopes": ["service"]}).status_code == 403
    service = make_caller("read,write,service")
    assert service.post(TOKENS, json={"user_id": alice.user_id, "scopes": ["service"]}).status_code == 201


def test_default_token_days_sets_a_lifetime(built: Callable[..., Services], make_caller: MakeCaller) -> None:
    from api.app import create_app

    services = built()
    object.__setattr__(services.identities, "default_token_days", 7)
    user = services.directory.create_user("someone")
    token, _ = services.identities.create_token(user, ["read"], [])
    assert token.expires_at is not None
    forever, _ = services.identities.create_token(user, ["read"], [], expires_in_days=None)
    assert forever.expires_at is not None  # the default applies whenever no lifetime is named
    create_app(services)


def test_a_session_closes_with_its_own_token_and_its_receipts_stay(world: World, admin: Caller) -> None:
    workstream = world.workstream(world.owner)
    agent = world.session(workstream, world.owner)
    agent.turn("how do we deploy?")
    closed = admin.client.delete(f"/v1/api/sessions/{agent.session_id}", headers=agent.headers,
                                 json={"reason": "done"})
    assert closed.status_code == 200 and [s["state"] for s in closed.get_json()["closed"]] == ["closed"]
    refused = _save(agent, "after_close")
    assert refused.status_code == 401 and refused.json["reason"] == "session closed"
    receipts = admin.get(f"/v1/api/admin/sessions/{agent.session_id}/turns")
    assert receipts.status_code == 200 and receipts.json["receipts"]
    [record] = _audit(admin, "session.close")
    assert (record["session_id"], record["reason"], record["actor"]) == (agent.session_id, "done", world.owner)
    listed = admin.get(SESSIONS, query_string={"state": "closed"}).json["sessions"]
    assert [session["session_id"] for session in listed] == [agent.session_id]


def test_opening_a_session_is_audited_with_its_kind_and_workstream(world: World, admin: Caller) -> None:
    workstream = world.workstream(world.owner)
    coordinator = world.session(workstream, world.owner, kind="coordinator")
    child = world.session(workstream, parent=coordinator.session_id)
    opened = {record["session_id"]: record for record in _audit(admin, "session.open")}
    assert set(opened) == {coordinator.session_id, child.session_id}
    assert {record["workstream_id"] for record in opened.values()} == {workstream}
    assert opened[coordinator.session_id]["user_id"] == opened[child.session_id]["user_id"] == world.owner
    assert all(record["actor"] and child.token not in json.dumps(record) for record in opened.values())


def test_a_coordinators_children_close_with_it(world: World, admin: Caller) -> None:
    workstream = world.workstream(world.owner)
    coordinator = world.session(workstream, world.owner, kind="coordinator")
    child = world.session(workstream, parent=coordinator.session_id)
    other = world.session(workstream, world.owner)
    closed = admin.delete(f"/v1/api/sessions/{coordinator.session_id}")
    assert closed.status_code == 200
    assert {s["session_id"] for s in closed.json["closed"]} == {coordinator.session_id, child.session_id}
    assert _save(child, "x").json["reason"] == "session closed"
    assert _save(other, "x").status_code == 200
    reasons = {record["session_id"]: record["reason"] for record in _audit(admin, "session.close")}
    assert reasons[child.session_id] == f"its coordinator {coordinator.session_id} closed"
    assert admin.client.delete(f"/v1/api/sessions/{other.session_id}", headers=child.headers).status_code == 401
    open_ = admin.get(SESSIONS, query_string={"state": "open", "workstream_id": workstream}).json["sessions"]
    assert [session["session_id"] for session in open_] == [other.session_id]


def test_an_idle_session_is_closed_and_audited_when_it_comes_back(world: World, admin: Caller, services: Services) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    with services.database.write() as conn:
        conn.execute(update(sessions).where(sessions.c.session_id == agent.session_id)
                     .values(last_active_at="2000-01-01T00:00:00"))
    refused = _save(agent, "late")
    assert refused.status_code == 401 and refused.json["reason"] == "session closed"
    [record] = _audit(admin, "session.close")
    assert record["session_id"] == agent.session_id and record["reason"] == "idle for 30 days"


def test_a_deactivated_users_sessions_are_refused(world: World, admin: Caller) -> None:
    agent = world.session(world.workstream(world.owner), world.owner)
    admin.post(f"{USERS}/{world.owner}/deactivate")
    assert _save(agent, "x").json["reason"] == "user deactivated"


def test_projects_and_workstreams_are_listed_with_filters_and_pages(world: World, admin: Caller, services: Services) -> None:
    world.grant(world.member, "read")
    projects = admin.get("/v1/api/admin/projects", query_string={"member": world.member}).json["projects"]
    assert [project["project_id"] for project in projects] == [world.project]
    assert admin.get("/v1/api/admin/projects", query_string={"owner": world.stranger}).json["projects"] == []
    assert admin.get("/v1/api/admin/projects", query_string={"state": "archived"}).json["projects"] == []
    made = sorted(world.workstream(world.owner) for _ in range(3))
    first = admin.get("/v1/api/admin/workstreams", query_string={"owner": world.owner, "limit": 2}).json
    rest = admin.get("/v1/api/admin/workstreams", query_string={"owner": world.owner,
                                                                  "after": first["next_after"]}).json
    assert [w["workstream_id"] for w in first["workstreams"] + rest["workstreams"]] == made
    assert admin.get("/v1/api/admin/projects", query_string={"state": "gone"}).status_code == 400


def test_identity_lists_need_an_admin(alice: Caller) -> None:
    for path in (USERS, TOKENS, SESSIONS, "/v1/api/admin/projects", "/v1/api/admin/workstreams"):
        assert alice.get(path).status_code == 403


def test_auth_failures_are_counted_by_reason(admin: Caller, alice: Caller, app: Flask) -> None:
    made = _token(admin, alice.user_id)
    admin.delete(f"{TOKENS}/{made['token_id']}")
    admin.client.get("/v1/api/memories", headers=_bearer(made["token"]))
    admin.client.get("/v1/api/memories", headers=_bearer("wrong"))
    admin.client.get("/v1/api/memories")
    scraped = admin.client.get("/metrics").get_data(as_text=True)
    for reason in ("token revoked", "invalid token", "missing"):
        assert f'memoryd_auth_failures_total{{reason="{reason}"}} 1.0' in scraped


def test_no_secret_reaches_a_log_line_the_audit_trail_or_the_log(admin: Caller, alice: Caller, world: World, services: Services,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    made = _token(admin, alice.user_id, name="leaky")
    agent = world.session(world.workstream(world.owner), world.owner)
    for token in (made["token"], agent.token):
        admin.client.get("/v1/api/memories", headers=_bearer(token))
    admin.delete(f"{TOKENS}/{made['token_id']}")
    admin.client.delete(f"/v1/api/sessions/{agent.session_id}", headers=agent.headers)
    admin.client.get("/v1/api/memories", headers=_bearer(made["token"]))
    admin.client.get("/v1/api/memories", headers=_bearer(agent.token))
    services.directory.touches.flush()
    with services.database.read() as conn:
        logged = json.dumps([list(row) for row in conn.execute(events.select())], default=str)
    audit = json.dumps(admin.get(AUDIT, query_string={"limit": 1000}).json)
    for secret in (made["token"], agent.token):
        for text in (secret, hashlib.sha256(secret.encode()).hexdigest(), secret[:8]):
            assert text not in logged and text not in audit and text not in caplog.text


def test_last_use_is_marked_without_a_write_per_request(admin: Caller, alice: Caller, services: Services) -> None:
    made = _token(admin, alice.user_id)
    assert made["last_used_at"] is None
    for _ in range(5):
        admin.client.get("/v1/api/token", headers=_bearer(made["token"]))
    services.directory.touches.flush()
    listed = admin.get(TOKENS, query_string={"user_id": alice.user_id}).json["tokens"]
    [token] = [token for token in listed if token["token_id"] == made["token_id"]]
    assert token["last_used_at"] is not None


def test_the_chain_and_the_projections_hold_with_identity_events(world: World, admin: Caller, services: Services) -> None:
    from tests.helpers import rebuild_equals_live

    _token(admin, world.owner)
    admin.post(f"{USERS}/{world.member}/deactivate", json={"reason": "r"})
    agent = world.session(world.workstream(world.owner), world.owner)
    admin.delete(f"/v1/api/sessions/{agent.session_id}")
    assert verify_chain(services.store).broken is None
    services.projector.catch_up()
    assert not services.projector.faults()
    assert rebuild_equals_live(services)


def test_migration_0014_upgrades_a_database_with_duplicate_names_by_renaming_the_later_ones(
        any_services: Services, caplog: pytest.LogCaptureFixture,
) -> None:
    from alembic import command
    from sqlalchemy import insert, select, text
    from sqlalchemy.exc import IntegrityError

    from memoryd.storage import migrate
    from memoryd.storage.schema import users

    settings = migrate._alembic_config()
    with any_services.database.write() as conn:
        settings.attributes["connection"] = conn
        command.downgrade(settings, "0013")
        for user_id, created in (("u1", "2026-01-01T00:00:00"), ("u2", "2026-01-02T00:00:00"),
                                 ("u3", "2026-01-03T00:00:00")):
            conn.execute(text("INSERT INTO users (user_id, name, created) VALUES (:u, 'alice', :c)"),
                         {"u": user_id, "c": created})
        conn.execute(text("INSERT INTO users (user_id, name, created) VALUES ('u4', 'alice (2)', '2026-01-04')"))
    caplog.set_level("WARNING", logger="memoryd.storage.migrations")
    migrate.upgrade(any_services.database)
    with any_services.database.read() as conn:
        names = dict(conn.execute(select(users.c.user_id, users.c.name)).all())
    assert names == {"u1": "alice", "u2": "alice (3)", "u3": "alice (4)", "u4": "alice (2)"}
    assert "renamed from 'alice' to 'alice (3)'" in caplog.text
    with pytest.raises(IntegrityError), any_services.database.write() as conn:
        conn.execute(insert(users).values(user_id="u5", name="alice", created="2026-01-05T00:00:00"))
