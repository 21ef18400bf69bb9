"""The memory tool over HTTP: sessions, scopes, inheritance, live access, audit."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import PROJECTS, Caller, MakeCaller, World


def test_an_interactive_session_without_a_project_saves_to_global_by_default(world: World) -> None:
    tool = world.session(world.workstream(world.owner), world.owner)
    result = tool.save("Style Guide", "tabs, not spaces")
    assert result["ok"] and result["memory"]["scope"] == "global" and result["memory"]["name"] == "style_guide"
    assert result["text"] == "Saved memory 'style_guide' (scope=global)"
    got = tool("get", name="style-guide")
    assert got["ok"] and got["memory"]["content"] == "tabs, not spaces" and got["memory"]["access_count"] == 1


def test_an_attached_project_is_the_inherited_target_and_read_only_access_refuses_writes(world: World) -> None:
    world.grant(world.member, "read")
    writer = world.session(world.workstream(world.owner, world.project), world.owner)
    assert writer.save("plan")["memory"]["scope"] == "project"
    reader = world.session(world.workstream(world.member, world.project), world.member)
    assert reader("get", name="plan")["ok"]
    refused = reader.save("plan")
    assert not refused["ok"]
    assert refused["error"] == ("the acting user has read-only access to the attached project; "
                                "project-scoped memory cannot be changed.")
    assert not reader("delete", name="plan")["ok"]
    assert reader("delete", name="plan", scope="global")["error"].startswith("no memory named 'plan'")


def test_archived_or_revoked_projects_fail_closed_at_once_and_never_fall_back(world: World) -> None:
    world.grant(world.member, "write")
    tool = world.session(world.workstream(world.member, world.project), world.member)
    assert tool.save("plan")["ok"]
    world.admin.post(f"{PROJECTS}/{world.project}/archive")
    for action in ("save", "get", "delete"):
        result = tool(action, name="plan", content="c", description="d")
        assert not result["ok"] and "cannot access the active attached project" in result["error"]
    world.admin.post(f"{PROJECTS}/{world.project}/reactivate")
    assert tool("get", name="plan")["ok"]
    world.admin.delete(f"{PROJECTS}/{world.project}/members/{world.member}")
    assert not tool("get", name="plan")["ok"]
    assert [m["scope"] for m in world.admin.get("/v1/api/admin/memories").json["memories"]] == ["project"]


def test_coordinators_use_their_own_namespace_and_children_are_refused_it(world: World) -> None:
    workstream = world.workstream(world.owner)
    coordinator = world.session(workstream, world.owner, kind="coordinator")
    saved = coordinator.save("procedure")
    assert saved["memory"]["scope"] == "coordinator" and saved["memory"]["scope_id"] == world.owner
    refused = coordinator.save("x", scope="global")
    assert refused["error"] == ("scope 'global' is unavailable to this coordinator session; "
                                "it may use: coordinator, project")
    child = world.session(workstream, kind="interactive", parent=coordinator.session_id)
    for action in ("save", "get", "search", "delete", "list"):
        result = child(action, name="procedure", query="procedure", scope="coordinator", content="c", description="d")
        assert not result["ok"] and "unavailable to this interactive session" in result["error"]
    assert child.save("note")["memory"]["scope"] == "global"
    assert [m["name"] for m in coordinator("list")["memories"]] == ["procedure"]  # never global


def test_search_and_list_span_the_envelope_and_nothing_else(world: World) -> None:
    world.grant(world.member, "read")
    mine = world.session(world.workstream(world.member, world.project), world.member)
    other = world.session(world.workstream(world.stranger), world.stranger)
    other.save("secret", "alpha", scope="user")
    other.save("their_ws", "alpha", scope="workstream")
    world.session(world.workstream(world.owner, world.project), world.owner).save("shared", "alpha")
    mine.save("mine", "alpha", scope="user")
    mine.save("public", "alpha", scope="global")
    found = {m["name"] for m in mine("search", query="alpha")["memories"]}
    assert found == {"shared", "mine", "public"}
    assert {m["name"] for m in mine("list")["memories"]} == found
    assert [m["name"] for m in mine("search", query="alpha", scope="user")["memories"]] == ["mine"]


def test_a_miss_hints_at_the_same_name_in_another_visible_scope_only(world: World) -> None:
    tool = world.session(world.workstream(world.owner), world.owner)
    tool.save("notes", scope="user")
    miss = tool("get", name="notes")
    assert not miss["ok"]
    assert "It exists in scope 'user'" in miss["error"]
    guest = world.session(world.workstream(world.owner), world.stranger)
    assert "exists" not in guest("get", name="notes")["error"]  # never probes another user's scope


def test_tool_writes_are_audited_with_session_and_workstream_and_reads_are_not(world: World) -> None:
    workstream = world.workstream(world.owner)
    tool = world.session(workstream, world.owner)
    tool.save("fact")
    tool.save("fact", "changed")
    tool("get", name="fact")
    tool("search", query="changed")
    tool("delete", name="fact")
    events = [e for e in world.services.store.iter_all() if e.event_type.startswith("memory.")]
    assert [e.event_type for e in events] == ["memory.save", "memory.update", "memory.delete"]
    assert {(e.metadata["surface"], e.metadata["session_id"], e.metadata["workstream_id"], e.metadata["actor_user_id"])
            for e in events} == {("tool", tool.session_id, workstream, world.owner)}


def test_limits_are_capped_not_rejected_and_content_follows_max_content(world: World) -> None:
    tool = world.session(world.workstream(world.owner), world.owner)
    for index in range(55):
        tool.save(f"m{index}", "alpha")
    assert len(tool("list", limit=500)["memories"]) == 50
    assert len(tool("search", query="alpha", limit=0)["memories"]) == 1
    assert tool("list", limit="many")["error"] == "'limit' must be a whole number such as 10 (default 20, at most 50)"
    assert tool.save("big", "x" * 32_769)["error"] == "content exceeds 32768 character limit"


@pytest.mark.parametrize(("arguments", "error"), [
    ({"action": "fly"}, "unknown action 'fly'. Valid: save, get, search, delete, list"),
    ({"action": "save", "content": "c", "description": "d"}, "'name' is required for save"),
    ({"action": "save", "name": "n", "content": "c"}, "description is required and must be non-empty"),
    ({"action": "save", "name": "n", "content": "c", "description": "d", "type": ""}, "invalid type: ; must be one of"),
    ({"action": "get", "name": "n", "scope": "galaxy"}, "invalid scope 'galaxy'. Valid: global, workstream, user, "
                                                         "coordinator, project"),
    ({"action": "search"}, "'query' is required for search"),
    ({"action": "save", "name": "n", "content": "c", "description": "d", "scope": "project"},
     "this workstream is not attached to a project; project-scoped memory cannot be changed."),
])
def test_refusals_are_ok_false_with_an_error_the_model_can_act_on(world: World, arguments: dict[str, Any], error: str) -> None:
    tool = world.session(world.workstream(world.owner), world.owner)
    result = tool(**arguments)
    assert result["ok"] is False and result["error"].startswith(error) and result["text"].startswith("Error: ")


def test_anonymous_sessions_cannot_use_the_user_scope_and_coordinators_need_a_user(world: World, admin: Caller) -> None:
    workstream = world.workstream(world.owner)
    anonymous = world.session(workstream)
    assert anonymous.save("x", scope="user")["error"] == "'user' scope requires an authenticated acting user"
    response = admin.post("/v1/api/sessions", json={"kind": "coordinator", "workstream_id": workstream})
    assert response.status_code == 400 and "require an authenticated user_id" in response.json["error"]


def test_a_persona_with_memory_off_gets_no_memory_tool(world: World) -> None:
    tool = world.session(world.workstream(world.owner, memory=False), world.owner)
    assert tool.save("x")["error"] == "memory is turned off for this workstream's persona"


def test_the_transport_errors_are_http(world: World, admin: Caller, alice: Caller) -> None:
    tool = world.session(world.workstream(world.owner), world.owner)
    other = world.session(world.workstream(world.owner), world.owner)
    url = f"/v1/api/sessions/{tool.session_id}/memory"
    body = {"action": "list"}
    assert admin.client.post(url, json=body).status_code == 401
    assert admin.client.post(url, json=body, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert admin.client.post(url, json=body, headers={"Authorization": f"Bearer {other.token}"}).status_code == 403
    assert admin.client.post(url, json=body, headers={"Authorization": f"Bearer {alice.token}"}).status_code == 403
    missing = admin.client.post("/v1/api/sessions/nope/memory", json=body,
                                headers={"Authorization": f"Bearer {tool.token}"})
    assert missing.status_code == 404
    assert alice.post("/v1/api/sessions", json={"kind": "interactive", "workstream_id": "x"}).status_code == 403


def test_workstreams_attach_and_detach_projects(world: World, admin: Caller) -> None:
    workstream = world.workstream(world.owner)
    patched = admin.request("PATCH", f"/v1/api/admin/workstreams/{workstream}", json={"project_id": world.project})
    assert patched.json["project_id"] == world.project
    tool = world.session(workstream, world.owner)
    assert tool.save("plan")["memory"]["scope"] == "project"
    detached = admin.request("PATCH", f"/v1/api/admin/workstreams/{workstream}", json={"project_id": None})
    assert detached.json["project_id"] is None
    assert tool.save("plan")["memory"]["scope"] == "global"
    assert admin.request("PATCH", f"/v1/api/admin/workstreams/{workstream}",
                         json={"project_id": "missing"}).status_code == 404


def test_deleting_a_project_deletes_its_memories_through_events(world: World) -> None:
    tool = world.session(world.workstream(world.owner, world.project), world.owner)
    tool.save("plan")
    tool.save("risks")
    tool.save("elsewhere", scope="global")
    response = world.admin.delete(f"{PROJECTS}/{world.project}")
    assert response.status_code == 200 and response.json == {"status": "ok", "project_id": world.project}
    tail = [e.event_type for e in world.services.store.iter_all()][-3:]
    assert sorted(tail) == ["memory.delete", "memory.delete", "project.delete"]
    assert [m["name"] for m in world.admin.get("/v1/api/admin/memories").json["memories"]] == ["elsewhere"]
    assert world.admin.get(f"{PROJECTS}/{world.project}").status_code == 404
    assert "cannot access the active attached project" in tool.save("plan")["error"]
    assert world.admin.delete(f"{PROJECTS}/{world.project}").status_code == 404


def test_a_session_token_tells_which_session_it_acts_as(world: World, make_caller: MakeCaller) -> None:
    workstream = world.workstream(world.owner, world.project)
    tool = world.session(workstream, world.owner)
    answer = tool.client.get("/v1/api/session", headers={"Authorization": f"Bearer {tool.token}"})
    assert answer.status_code == 200 and answer.json["session_id"] == tool.session_id
    assert answer.json["project_id"] == world.project and "token" not in answer.json
    assert tool.client.get("/v1/api/session", headers={"Authorization": "Bearer mds_nope"}).status_code == 401
    assert make_caller().get("/v1/api/session").status_code == 403  # a user's token is not a session's
