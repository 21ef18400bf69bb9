"""The administrators' memory API: ``/v1/api/admin/memories`` over HTTP.

Unlike the public API it sees every scope (coordinator and project too),
filters are passed through rather than validated, limits are clamped rather
than rejected, and the list ``total`` counts every match, not the page.
"""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from tests.helpers import Caller, MakeCaller
from tests.helpers import names as listed

LIST = "/v1/api/admin/memories"
SEARCH = "/v1/api/admin/memories/search"
AUDIT = "/v1/api/admin/audit"
MISSING_PERMISSION = "Forbidden: missing 'admin.memories' permission"
MEMORY_FIELDS = {"memory_id", "name", "description", "type", "scope", "scope_id", "content", "created", "updated"}


def seed(services: Services, name: str, scope: str = "global", scope_id: str = "", memory_type: str | None = None,
         content: str = "some content", description: str = "a description") -> str:
    """Save straight through the command bus, so any scope (coordinator, project) can be seeded."""
    command = SaveMemory(name, content, description, memory_type, Namespace(scope, scope_id))
    return services.bus.handle(command, EventMetadata(surface="tool")).memory.memory_id


def names(response: Any) -> list[str]:
    return sorted(listed(response))


@pytest.fixture
def landscape(services: Services) -> None:
    """One memory in each corner of the namespace space."""
    seed(services, "global_general")
    seed(services, "global_feedback", memory_type="feedback")
    seed(services, "user_one_note", "user", "u1")
    seed(services, "user_two_note", "user", "u2", memory_type="feedback")
    seed(services, "coordinator_plan", "coordinator", "u1")
    seed(services, "project_one_note", "project", "p1")
    seed(services, "project_two_note", "project", "p2", memory_type="reference")
    seed(services, "workstream_note", "workstream", "w1")


ALL_NAMES = sorted([
    "global_general", "global_feedback", "user_one_note", "user_two_note", "coordinator_plan",
    "project_one_note", "project_two_note", "workstream_note",
])


# -- list ---------------------------------------------------------------------


def test_the_admin_list_of_an_empty_store_is_empty(admin: Caller) -> None:
    response = admin.get(LIST)
    assert response.status_code == 200
    assert response.json == {"memories": [], "total": 0}


def test_the_admin_list_shows_every_scope_and_every_user(admin: Caller, landscape: None) -> None:
    response = admin.get(LIST)
    assert response.status_code == 200
    assert names(response) == ALL_NAMES
    assert response.json["total"] == len(ALL_NAMES)
    assert all(MEMORY_FIELDS <= set(memory) for memory in response.json["memories"])


def test_the_admin_list_includes_memories_saved_through_the_public_api(admin: Caller, alice: Caller) -> None:
    alice.save("public_note", scope="user")
    [memory] = admin.get(LIST).json["memories"]
    assert (memory["name"], memory["scope"], memory["scope_id"]) == ("public_note", "user", alice.user_id)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("type=feedback", ["global_feedback", "user_two_note"]),
        ("scope=global", ["global_feedback", "global_general"]),
        ("scope=user&scope_id=u2", ["user_two_note"]),
        ("scope=coordinator&scope_id=u1", ["coordinator_plan"]),
        ("scope=project", ["project_one_note", "project_two_note"]),
        ("scope=project&scope_id=p2", ["project_two_note"]),
        ("scope=project&type=reference", ["project_two_note"]),
        ("scope=workstream&scope_id=w1", ["workstream_note"]),
        ("scope=bogus", []),
        ("type=bogus", []),
    ],
)
def test_the_admin_list_passes_filters_through_to_any_scope(admin: Caller, landscape: None, query: str,
                                                            expected: list[Any]) -> None:
    response = admin.get(f"{LIST}?{query}")
    assert response.status_code == 200
    assert names(response) == expected
    assert response.json["total"] == len(expected)


@pytest.mark.parametrize("path", [LIST, f"{SEARCH}?q=note"])
@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("scope_id=u1", "scope is required when scope_id is provided"),
        ("scope=global&scope_id=u1", "scope_id is not allowed with global scope"),
    ],
)
def test_inconsistent_scope_filters_are_rejected(admin: Caller, landscape: None, path: Any, query: str, message: str) -> None:
    response = admin.get(f"{path}{'&' if '?' in path else '?'}{query}")
    assert response.status_code == 400
    assert response.json == {"error": message}


@pytest.mark.parametrize(
    ("query", "stored", "page"),
    [
        ("", 101, 100),
        ("?limit=999", 201, 200),
        ("?limit=-5", 3, 1),
        ("?limit=0", 3, 1),
        ("?limit=2", 3, 2),
    ],
)
def test_the_admin_list_limit_defaults_to_100_and_is_clamped_while_total_counts_every_match(
    admin: Caller, services: Services, query: str, stored: int, page: int
) -> None:
    for index in range(stored):
        seed(services, f"note_{index:03d}")
    response = admin.get(f"{LIST}{query}")
    assert response.status_code == 200
    assert len(response.json["memories"]) == page
    assert response.json["total"] == stored


def test_the_admin_list_total_counts_only_rows_matching_the_filters(admin: Caller, landscape: None) -> None:
    response = admin.get(f"{LIST}?type=feedback&limit=1")
    assert len(response.json["memories"]) == 1
    assert response.json["total"] == 2


@pytest.mark.parametrize(("path", "limit"), [(LIST, "abc"), (LIST, "2.5"), (f"{SEARCH}?q=note", "")])
def test_a_limit_that_is_not_a_whole_number_is_rejected(admin: Caller, path: Any, limit: str) -> None:
    response = admin.get(f"{path}{'&' if '?' in path else '?'}limit={limit}")
    assert response.status_code == 400
    assert response.json == {"error": "limit must be an integer"}


# -- search -------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "?q=%20%20", "?type=general"])
def test_admin_search_needs_a_query(admin: Caller, query: str) -> None:
    response = admin.get(f"{SEARCH}{query}")
    assert response.status_code == 400
    assert response.json == {"error": "q is required"}


def test_admin_search_finds_words_in_name_description_or_content_across_every_scope(admin: Caller, services: Services) -> None:
    seed(services, "coordinator_runbook", "coordinator", "u1", description="how to deploy kubernetes")
    seed(services, "project_cluster", "project", "p1", content="the kubernetes cluster lives in eu-west")
    seed(services, "kubernetes_basics", "user", "u2")
    seed(services, "unrelated", content="nothing to see here")
    response = admin.get(f"{SEARCH}?q=kubernetes")
    assert response.status_code == 200
    assert names(response) == ["coordinator_runbook", "kubernetes_basics", "project_cluster"]
    assert response.json["total"] == 3


def test_admin_search_for_a_word_nobody_wrote_finds_nothing(admin: Caller, landscape: None) -> None:
    response = admin.get(f"{SEARCH}?q=xylophone")
    assert response.status_code == 200
    assert response.json == {"memories": [], "total": 0}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("type=feedback", ["global_feedback", "user_two_note"]),
        ("scope=coordinator", ["coordinator_plan"]),
        ("scope=project&scope_id=p1", ["project_one_note"]),
        ("scope=bogus", []),
    ],
)
def test_admin_search_applies_the_filters(admin: Caller, landscape: None, query: str, expected: list[Any]) -> None:
    response = admin.get(f"{SEARCH}?q=content&{query}")
    assert response.status_code == 200
    assert names(response) == expected


@pytest.mark.parametrize(
    ("query", "stored", "page"),
    [
        ("", 21, 20),
        ("&limit=999", 51, 50),
        ("&limit=-5", 3, 1),
        ("&limit=3", 5, 3),
    ],
)
def test_the_admin_search_limit_defaults_to_20_and_is_clamped_to_1_through_50(admin: Caller, services: Services, query: str,
                                                                              stored: int,
                                                                              page: int) -> None:
    for index in range(stored):
        seed(services, f"match_{index:03d}", content="shared word")
    response = admin.get(f"{SEARCH}?q=shared{query}")
    assert response.status_code == 200
    assert len(response.json["memories"]) == page
    assert response.json["total"] == page


def test_admin_search_ranks_the_most_relevant_memory_first(admin: Caller, services: Services) -> None:
    seed(services, "passing_mention", content="we once looked at postgres among many other databases and tools and ideas")
    seed(services, "postgres_tuning", description="postgres vacuum", content="postgres autovacuum settings for postgres")
    seed(services, "postgres_backup", content="nightly backups of the database")
    seed(services, "redis_notes", content="redis eviction policy")
    response = admin.get(f"{SEARCH}?q=postgres%20vacuum")
    assert [memory["name"] for memory in response.json["memories"]] == ["postgres_tuning", "postgres_backup", "passing_mention"]


# -- get ----------------------------------------------------------------------


def test_admin_get_returns_the_whole_memory(admin: Caller, alice: Caller) -> None:
    saved = alice.save("deployment", content="Deploy on Fridays? Never.", description="deploy rules", type="feedback").json
    response = admin.get(f"{LIST}/{saved['memory_id']}")
    assert response.status_code == 200
    assert response.json == saved


def test_admin_get_reaches_internal_scopes(admin: Caller, services: Services) -> None:
    memory_id = seed(services, "coordinator_plan", "coordinator", "u1")
    response = admin.get(f"{LIST}/{memory_id}")
    assert response.status_code == 200
    assert (response.json["name"], response.json["scope"], response.json["scope_id"]) == ("coordinator_plan", "coordinator", "u1")


@pytest.mark.parametrize("memory_id", ["no-such-id", "00000000-0000-4000-8000-000000000000"])
def test_admin_get_of_an_unknown_id_is_404(admin: Caller, landscape: None, memory_id: str) -> None:
    response = admin.get(f"{LIST}/{memory_id}")
    assert response.status_code == 404
    assert response.json == {"error": "Memory not found"}


# -- delete -------------------------------------------------------------------


def test_admin_delete_removes_the_memory(admin: Caller, services: Services, landscape: None) -> None:
    memory_id = seed(services, "doomed", "project", "p1")
    response = admin.delete(f"{LIST}/{memory_id}")
    assert response.status_code == 200
    assert response.json == {"status": "ok"}
    assert names(admin.get(LIST)) == ALL_NAMES
    assert admin.get(f"{LIST}/{memory_id}").status_code == 404


def test_deleting_the_same_memory_twice_is_404_the_second_time(admin: Caller, services: Services) -> None:
    memory_id = seed(services, "doomed")
    assert admin.delete(f"{LIST}/{memory_id}").status_code == 200
    response = admin.delete(f"{LIST}/{memory_id}")
    assert response.status_code == 404
    assert response.json == {"error": "Memory not found"}


def test_admin_delete_of_an_unknown_id_is_404_and_keeps_every_memory(admin: Caller, landscape: None) -> None:
    response = admin.delete(f"{LIST}/no-such-id")
    assert response.status_code == 404
    assert response.json == {"error": "Memory not found"}
    assert names(admin.get(LIST)) == ALL_NAMES


def test_admin_delete_is_audited_as_a_delete_through_the_admin_surface(admin: Caller, services: Services) -> None:
    memory_id = seed(services, "doomed", "coordinator", "u9")
    admin.delete(f"{LIST}/{memory_id}", headers={"X-Request-Id": "admin-cleanup-1"})
    [record] = admin.get(f"{AUDIT}?action=memory.delete").json["records"]
    assert record | {"position": 0, "time": ""} == {
        "position": 0,
        "action": "memory.delete",
        "actor": admin.user_id,
        "memory_id": memory_id,
        "name": "doomed",
        "scope": "coordinator",
        "scope_id": "u9",
        "type": "general",
        "surface": "admin",
        "client_ip": "127.0.0.1",
        "request_id": "admin-cleanup-1",
        "time": "",
        "session_id": "",
        "workstream_id": "",
        "project_id": "",
        "member": "",
        "access": "",
        "user_id": "",
        "token_id": "",
        "reason": "",
    }


def test_a_deleted_memory_can_be_saved_again_under_a_new_id(admin: Caller, alice: Caller) -> None:
    first = alice.save("phoenix").json["memory_id"]
    admin.delete(f"{LIST}/{first}")
    again = alice.save("phoenix")
    assert again.status_code == 201
    assert again.json["memory_id"] != first


# -- permissions --------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", LIST), ("GET", f"{SEARCH}?q=content"), ("GET", f"{LIST}/{{id}}"), ("DELETE", f"{LIST}/{{id}}"), ("GET", AUDIT)],
)
def test_admin_routes_refuse_a_token_without_the_admin_permission(make_caller: MakeCaller, services: Services, method: str,
                                                                  path: Any) -> None:
    memory_id = seed(services, "kept")
    caller = make_caller("read,write")
    response = caller.request(method, path.format(id=memory_id))
    assert response.status_code == 403
    assert response.json == {"error": MISSING_PERMISSION}
    assert caller.get("/v1/api/memories").json["total"] == 1  # nothing was deleted


@pytest.mark.parametrize(("method", "path"), [("GET", f"{LIST}/{{id}}"), ("DELETE", f"{LIST}/{{id}}")])
def test_admin_routes_need_a_token(app: Flask, admin: Caller, services: Services, method: str, path: str) -> None:
    memory_id = seed(services, "kept")
    response = app.test_client().open(path.format(id=memory_id), method=method)
    assert response.status_code == 401
    assert response.json == {"error": "Unauthorized: missing or invalid token"}
    assert admin.get(f"{LIST}/{memory_id}").status_code == 200


def test_a_service_token_may_use_the_admin_api_without_the_permission(make_caller: MakeCaller, services: Services) -> None:
    memory_id = seed(services, "doomed", "project", "p1")
    service = make_caller("service")
    assert names(service.get(LIST)) == ["doomed"]
    assert names(service.get(f"{SEARCH}?q=content")) == ["doomed"]
    assert service.get(f"{LIST}/{memory_id}").status_code == 200
    assert service.delete(f"{LIST}/{memory_id}").json == {"status": "ok"}
    assert service.get(LIST).json["total"] == 0


def test_a_read_only_admin_may_look_but_not_delete(make_caller: MakeCaller, services: Services) -> None:
    memory_id = seed(services, "kept")
    reader = make_caller("read", ("admin.memories",))
    assert names(reader.get(LIST)) == ["kept"]
    assert names(reader.get(f"{SEARCH}?q=content")) == ["kept"]
    assert reader.get(f"{LIST}/{memory_id}").status_code == 200
    assert reader.get(AUDIT).status_code == 200
    response = reader.delete(f"{LIST}/{memory_id}")
    assert response.status_code == 403
    assert response.json == {"error": "Forbidden: token lacks 'write' scope"}
    assert reader.get(f"{LIST}/{memory_id}").status_code == 200
