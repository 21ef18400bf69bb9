"""Projects over HTTP: every change of state or access is an event auditors can read."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd.app.services import Services
from tests.helpers import Caller, table_rows

PROJECTS = "/v1/api/admin/projects"


@pytest.fixture
def project(admin: Caller, services: Services) -> Any:
    owner = services.directory.create_user("owner")
    response = admin.post(PROJECTS, json={"name": " Apollo ", "owner": owner})
    assert response.status_code == 201, response.json
    return response.json


def test_creating_a_project_answers_it_active_with_its_owner(project: Any, services: Services) -> None:
    assert project["name"] == "Apollo" and project["state"] == "active" and project["members"] == []
    [event] = list(services.store.iter_all())
    assert (event.event_type, event.stream_id) == ("project.create", f"project:{project['project_id']}")


def test_members_are_granted_changed_and_revoked_and_each_change_is_one_event(admin: Caller, services: Services,
                                                                              project: Any) -> None:
    member = services.directory.create_user("member")
    path = f"{PROJECTS}/{project['project_id']}/members/{member}"
    assert admin.request("PUT", path, json={"access": "read"}).json["members"] == [{"user_id": member, "access": "read"}]
    assert admin.request("PUT", path, json={"access": "read"}).status_code == 200  # unchanged: no event
    assert admin.request("PUT", path, json={"access": "write"}).json["members"] == [
        {"user_id": member, "access": "write"}]
    assert admin.delete(path).json["members"] == []
    events = list(services.store.iter_all())
    assert [event.event_type for event in events] == ["project.create", "project.grant", "project.grant",
                                                      "project.revoke"]
    assert {event.metadata["actor_user_id"] for event in events} == {admin.user_id}
    assert [event.payload["member"] for event in events[1:]] == [member] * 3
    assert admin.get(f"{PROJECTS}/{project['project_id']}").json["members"] == []


def test_archiving_and_reactivating_are_events_and_repeating_them_changes_nothing(admin: Caller, services: Services,
                                                                                  project: Any) -> None:
    base = f"{PROJECTS}/{project['project_id']}"
    assert admin.post(f"{base}/archive").json["state"] == "archived"
    assert "X-Memory-Position" not in admin.post(f"{base}/archive").headers
    assert admin.get(base).json["state"] == "archived"
    assert admin.post(f"{base}/reactivate").json["state"] == "active"
    assert [event.event_type for event in services.store.iter_all()] == [
        "project.create", "project.archive", "project.reactivate"]


@pytest.mark.parametrize(("method", "suffix", "body", "status", "message"), [
    ("PUT", "/members/{user}", {"access": "admin"}, 400, "access must be one of ['read', 'write']"),
    ("PUT", "/members/{user}", {}, 400, "access is required"),
    ("PUT", "/members/nobody", {"access": "read"}, 404, "user not found: nobody"),
    ("PUT", "/members/{owner}", {"access": "read"}, 400, "the project's owner always has write access"),
    ("DELETE", "/members/{user}", None, 404, "is not a member of project"),
])
def test_bad_membership_changes_are_refused_and_write_nothing(admin: Caller, services: Services, project: Any, method: str,
                                                              suffix: str, body: dict[str, Any] | None,
                                                              status: int,
                                                               message: str) -> None:
    user = services.directory.create_user("someone")
    path = f"{PROJECTS}/{project['project_id']}" + suffix.format(user=user, owner=project["owner"])
    response = admin.request(method, path, json=body)
    assert response.status_code == status and message in response.json["error"]
    assert services.store.head_position() == 1


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"name": "x", "owner": "nobody"}, 404, "user not found: nobody"),
    ({"name": "  ", "owner": "x"}, 400, "name is required"),
    ({"owner": "x"}, 400, "name is required"),
])
def test_a_project_needs_a_name_and_an_existing_owner(admin: Caller, body: dict[str, Any], status: int, message: str) -> None:
    response = admin.post(PROJECTS, json=body)
    assert response.status_code == status and message in response.json["error"]


def test_unknown_projects_are_404_and_project_routes_are_for_admins(admin: Caller, alice: Caller) -> None:
    assert admin.get(f"{PROJECTS}/missing").status_code == 404
    assert admin.post(f"{PROJECTS}/missing/archive").status_code == 404
    assert alice.post(PROJECTS, json={"name": "x", "owner": alice.user_id}).status_code == 403


def test_the_project_read_model_rebuilds_from_the_log(admin: Caller, services: Services, project: Any) -> None:
    member = services.directory.create_user("member")
    admin.request("PUT", f"{PROJECTS}/{project['project_id']}/members/{member}", json={"access": "write"})
    admin.post(f"{PROJECTS}/{project['project_id']}/archive")
    live = admin.get(f"{PROJECTS}/{project['project_id']}").json
    projection = next(p for p in services.projector.projections if p.name == "projects")
    services.projector.rebuild(projection)
    assert admin.get(f"{PROJECTS}/{project['project_id']}").json == live
    assert table_rows(services) == []  # project events never touch the memory table


def test_auditors_see_who_granted_changed_and_revoked_access(admin: Caller, services: Services, project: Any) -> None:
    member = services.directory.create_user("member")
    path = f"{PROJECTS}/{project['project_id']}/members/{member}"
    admin.request("PUT", path, json={"access": "read"})
    admin.request("PUT", path, json={"access": "write"})
    admin.delete(path)
    records = admin.get(f"/v1/api/admin/audit?project_id={project['project_id']}").json["records"]
    assert [(r["action"], r["actor"], r["member"], r["access"]) for r in records] == [
        ("project.create", admin.user_id, "", ""),
        ("project.grant", admin.user_id, member, "read"),
        ("project.grant", admin.user_id, member, "write"),
        ("project.revoke", admin.user_id, member, ""),
    ]
    assert admin.get("/v1/api/admin/audit?action=project.revoke").json["records"][0]["member"] == member
