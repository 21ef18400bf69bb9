"""The public memory API's rejections: every 400, 403 and 404 a client can meet.

Each error body is ``{"error": message}``, and the message names the field at
fault in the words upstream clients already match on. A rejected write writes
nothing. Authentication, malformed bodies and storage failures (401, 413, 500)
are covered for the whole HTTP surface in ``test_api_errors.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.helpers import Caller, Cast

MEMORIES = "/v1/api/memories"
SEARCH = "/v1/api/memories/search"
INVALID_SCOPE = "invalid scope: {}; must be one of ['global', 'user', 'workstream']"
INVALID_TYPE = "invalid type: {}; must be one of ['feedback', 'general', 'reference', 'user']"
VALID_SAVE = {"name": "probe", "content": "some content", "description": "a description"}
MISSING = object()


def rejected(response: Any, status: int, message: str) -> None:
    assert (response.status_code, response.json) == (status, {"error": message})


def body(**changes: Any) -> dict[str, Any]:
    """A valid save body with some fields changed, or removed when given ``MISSING``."""
    merged = VALID_SAVE | changes
    return {key: value for key, value in merged.items() if value is not MISSING}


# -- POST /v1/api/memories ----------------------------------------------------

NAME_REQUIRED = "name is required (max 256 characters)"
CONTENT_REQUIRED = "content is required"
DESCRIPTION_REQUIRED = "description is required and must be non-empty"


@pytest.mark.parametrize(("changes", "message"), [
    pytest.param({"name": MISSING}, NAME_REQUIRED, id="name missing"),
    pytest.param({"name": None}, NAME_REQUIRED, id="name null"),
    pytest.param({"name": ""}, NAME_REQUIRED, id="name empty"),
    pytest.param({"name": " \t "}, NAME_REQUIRED, id="name whitespace"),
    pytest.param({"name": "n" * 257}, NAME_REQUIRED, id="name 257 characters"),
    pytest.param({"content": MISSING}, CONTENT_REQUIRED, id="content missing"),
    pytest.param({"content": None}, CONTENT_REQUIRED, id="content null"),
    pytest.param({"content": ""}, CONTENT_REQUIRED, id="content empty"),
    pytest.param({"content": "\n  \t"}, CONTENT_REQUIRED, id="content whitespace"),
    pytest.param({"content": "c" * 65_537}, "content exceeds 65536 character limit", id="content 65537 characters"),
    pytest.param({"description": MISSING}, DESCRIPTION_REQUIRED, id="description missing"),
    pytest.param({"description": None}, DESCRIPTION_REQUIRED, id="description null"),
    pytest.param({"description": ""}, DESCRIPTION_REQUIRED, id="description empty"),
    pytest.param({"description": "   "}, DESCRIPTION_REQUIRED, id="description whitespace"),
    pytest.param({"type": "bogus"}, INVALID_TYPE.format("bogus"), id="type bogus"),
    pytest.param({"type": ""}, INVALID_TYPE.format(""), id="type explicitly empty"),
    pytest.param({"scope": "bogus"}, INVALID_SCOPE.format("bogus"), id="scope bogus"),
    pytest.param({"scope": "coordinator"}, INVALID_SCOPE.format("coordinator"), id="scope coordinator"),
    pytest.param({"scope": "project"}, INVALID_SCOPE.format("project"), id="scope project"),
    pytest.param({"scope": ""}, INVALID_SCOPE.format(""), id="scope explicitly empty"),
    pytest.param({"scope_id": "x"}, "scope_id is not allowed with global scope", id="default global scope with scope_id"),
    pytest.param({"scope": "global", "scope_id": "x"}, "scope_id is not allowed with global scope", id="global with scope_id"),
    pytest.param({"scope": "workstream"}, "scope_id is required for workstream scope", id="workstream without scope_id"),
    pytest.param({"scope": "workstream", "scope_id": "  "}, "scope_id is required for workstream scope",
                 id="workstream blank scope_id"),
])
def test_a_save_with_bad_input_is_a_400_naming_the_field_and_writes_nothing(
    alice: Caller, changes: dict[str, Any], message: str
) -> None:
    rejected(alice.post(MEMORIES, json=body(**changes)), 400, message)
    assert alice.get(MEMORIES).json["total"] == 0


@pytest.mark.parametrize(("name", "content", "stored_length"), [
    pytest.param("n" * 256, "c", 1, id="name of 256 characters"),
    pytest.param("at_limit", "c" * 65_536, 65_536, id="content of 65536 characters"),
    pytest.param("padded", "  " + "c" * 65_536 + "\n\n", 65_536, id="content over the limit only by surrounding whitespace"),
    pytest.param("accented", "é" * 65_536, 65_536, id="content limit counts characters not bytes"),
])
def test_a_save_at_the_length_limits_is_accepted(alice: Caller, name: str, content: str, stored_length: int) -> None:
    response = alice.save(name, content=content)
    assert response.status_code == 201, response.json
    assert response.json["name"] == name
    assert len(response.json["content"]) == stored_length


@pytest.mark.parametrize(("changes", "message"), [
    pytest.param({"name": "n" * 257, "content": MISSING}, NAME_REQUIRED, id="long name and no content"),
    pytest.param({"name": "", "description": MISSING}, NAME_REQUIRED, id="empty name and no description"),
    pytest.param({"content": "", "description": MISSING}, CONTENT_REQUIRED, id="empty content and no description"),
])
def test_a_save_with_several_problems_reports_them_in_field_order(
    alice: Caller, changes: dict[str, Any], message: str
) -> None:
    rejected(alice.post(MEMORIES, json=body(**changes)), 400, message)


@pytest.mark.parametrize(("changes", "message"), [
    pytest.param({"content": "c" * 65_537, "description": ""}, "content exceeds 65536 character limit",
                 id="content before description"),
    pytest.param({"description": " ", "type": "bogus"}, DESCRIPTION_REQUIRED, id="description before type"),
    pytest.param({"type": "bogus", "scope": "bogus"}, INVALID_TYPE.format("bogus"), id="type before scope"),
])
def test_later_save_fields_are_checked_in_the_documented_order(alice: Caller, changes: dict[str, Any], message: str) -> None:
    rejected(alice.post(MEMORIES, json=body(**changes)), 400, message)


# -- GET /v1/api/memories -----------------------------------------------------

LIST_LIMIT_RANGE = "limit must be between 1 and 200"
MALFORMED_CURSOR = "after must be a previous page's next_after, as it was given"


@pytest.mark.parametrize(("query", "message"), [
    pytest.param({"type": "bogus"}, "invalid type: bogus", id="type bogus"),
    pytest.param({"limit": "abc"}, "limit must be an integer", id="limit abc"),
    pytest.param({"limit": "5.0"}, "limit must be an integer", id="limit 5.0"),
    pytest.param({"limit": "5.7"}, "limit must be an integer", id="limit 5.7"),
    pytest.param({"limit": "true"}, "limit must be an integer", id="limit true"),
    pytest.param({"limit": ""}, "limit must be an integer", id="limit empty"),
    pytest.param({"limit": "0"}, LIST_LIMIT_RANGE, id="limit 0"),
    pytest.param({"limit": "-1"}, LIST_LIMIT_RANGE, id="limit negative"),
    pytest.param({"limit": "201"}, LIST_LIMIT_RANGE, id="limit 201"),
    pytest.param({"scope": "bogus"}, INVALID_SCOPE.format("bogus"), id="scope bogus"),
    pytest.param({"scope": "coordinator"}, INVALID_SCOPE.format("coordinator"), id="scope coordinator"),
    pytest.param({"scope": "project"}, INVALID_SCOPE.format("project"), id="scope project"),
    pytest.param({"scope": "global", "scope_id": "x"}, "scope_id is not allowed with global scope", id="global with scope_id"),
    pytest.param({"scope_id": "x"}, "scope is required when scope_id is provided", id="scope_id without scope"),
    pytest.param({"scope": "workstream"}, "scope_id is required for workstream scope", id="workstream without scope_id"),
    pytest.param({"type": "bogus", "limit": "abc"}, "invalid type: bogus", id="type checked before limit"),
    pytest.param({"limit": "abc", "scope": "bogus"}, "limit must be an integer", id="limit checked before scope"),
    pytest.param({"limit": "0", "scope": "bogus"}, LIST_LIMIT_RANGE, id="limit range checked before scope"),
    pytest.param({"after": "not a cursor"}, MALFORMED_CURSOR, id="after not base64"),
    pytest.param({"after": "e30"}, MALFORMED_CURSOR, id="after an object"),  # {}
    pytest.param({"after": "WyJ4Il0"}, MALFORMED_CURSOR, id="after one part"),  # ["x"]
    pytest.param({"after": "WzEsMl0"}, MALFORMED_CURSOR, id="after numbers"),  # [1,2]
    pytest.param({"after": "WyJ4IiwiXHUwMDAwIl0"}, MALFORMED_CURSOR, id="after with NUL"),  # ["x","\u0000"]
    pytest.param({"after": "_w"}, MALFORMED_CURSOR, id="after not UTF-8"),
    pytest.param({"after": "A" * 600}, MALFORMED_CURSOR, id="after too long"),
])
def test_a_list_with_bad_parameters_is_a_400_naming_the_parameter(alice: Caller, query: dict[str, str], message: str) -> None:
    rejected(alice.get(MEMORIES, query_string=query), 400, message)


@pytest.mark.parametrize("limit", ["1", "200"])
def test_a_list_accepts_limits_at_both_ends_of_the_range(alice: Caller, limit: str) -> None:
    alice.save("one")
    alice.save("two")
    listed = alice.get(MEMORIES, query_string={"limit": limit})
    assert listed.status_code == 200
    assert listed.json["total"] == min(int(limit), 2)


# -- POST /v1/api/memories/search ---------------------------------------------

SEARCH_LIMIT_RANGE = "limit must be between 1 and 50"
NOT_AN_INTEGER = "limit must be an integer"


@pytest.mark.parametrize(("request_body", "message"), [
    pytest.param({}, "query is required", id="query missing"),
    pytest.param({"query": None}, "query is required", id="query null"),
    pytest.param({"query": ""}, "query is required", id="query empty"),
    pytest.param({"query": "  \n"}, "query is required", id="query whitespace"),
    pytest.param({"query": "x", "limit": "abc"}, NOT_AN_INTEGER, id="limit abc"),
    pytest.param({"query": "x", "limit": "5.0"}, NOT_AN_INTEGER, id="limit string 5.0"),
    pytest.param({"query": "x", "limit": 5.0}, NOT_AN_INTEGER, id="limit number 5.0"),
    pytest.param({"query": "x", "limit": 5.7}, NOT_AN_INTEGER, id="limit 5.7"),
    pytest.param({"query": "x", "limit": True}, NOT_AN_INTEGER, id="limit true"),
    pytest.param({"query": "x", "limit": [5]}, NOT_AN_INTEGER, id="limit list"),
    pytest.param({"query": "x", "limit": None}, NOT_AN_INTEGER, id="limit null"),
    pytest.param({"query": "x", "limit": 0}, SEARCH_LIMIT_RANGE, id="limit 0"),
    pytest.param({"query": "x", "limit": -3}, SEARCH_LIMIT_RANGE, id="limit negative"),
    pytest.param({"query": "x", "limit": 51}, SEARCH_LIMIT_RANGE, id="limit 51"),
    pytest.param({"query": "x", "type": "bogus"}, "invalid type: bogus", id="type bogus"),
    pytest.param({"query": "x", "scope": "bogus"}, INVALID_SCOPE.format("bogus"), id="scope bogus"),
    pytest.param({"query": "x", "scope": "coordinator"}, INVALID_SCOPE.format("coordinator"), id="scope coordinator"),
    pytest.param({"query": "x", "scope": "project"}, INVALID_SCOPE.format("project"), id="scope project"),
    pytest.param({"query": "x", "scope": "global", "scope_id": "x"}, "scope_id is not allowed with global scope",
                 id="global with scope_id"),
    pytest.param({"query": "x", "scope_id": "x"}, "scope is required when scope_id is provided", id="scope_id without scope"),
    pytest.param({"query": "x", "scope": "workstream"}, "scope_id is required for workstream scope",
                 id="workstream without scope_id"),
    pytest.param({"limit": "abc"}, "query is required", id="query checked before limit"),
    pytest.param({"query": "x", "limit": 0, "type": "bogus"}, SEARCH_LIMIT_RANGE, id="limit checked before type"),
    pytest.param({"query": "x", "type": "bogus", "scope": "bogus"}, "invalid type: bogus", id="type checked before scope"),
    pytest.param({"query": "x", "offset": -1}, "offset must be between 0 and 10000", id="offset negative"),
    pytest.param({"query": "x", "offset": 10_001}, "offset must be between 0 and 10000", id="offset past the cap"),
    pytest.param({"query": "x", "offset": 1.5}, "offset must be an integer", id="offset 1.5"),
    pytest.param({"query": "x", "offset": None}, "offset must be an integer", id="offset null"),
])
def test_a_search_with_bad_parameters_is_a_400_naming_the_parameter(
    alice: Caller, request_body: dict[str, Any], message: str
) -> None:
    rejected(alice.post(SEARCH, json=request_body), 400, message)


@pytest.mark.parametrize(("limit", "expected"), [(1, 1), (50, 3), ("2", 2)])
def test_a_search_accepts_limits_in_range_including_digit_strings(alice: Caller, limit: Any, expected: int) -> None:
    for name in ("one", "two", "three"):
        alice.save(name, content="needle")
    found = alice.post(SEARCH, json={"query": "needle", "limit": limit})
    assert found.status_code == 200
    assert found.json["total"] == expected


# -- DELETE /v1/api/memories/{name} -------------------------------------------


@pytest.mark.parametrize(("query", "message"), [
    pytest.param({"scope": "bogus"}, INVALID_SCOPE.format("bogus"), id="scope bogus"),
    pytest.param({"scope": ""}, INVALID_SCOPE.format(""), id="scope explicitly empty"),
    pytest.param({"scope": "coordinator"}, INVALID_SCOPE.format("coordinator"), id="scope coordinator"),
    pytest.param({"scope": "project"}, INVALID_SCOPE.format("project"), id="scope project"),
    pytest.param({"scope_id": "x"}, "scope_id is not allowed with global scope", id="default global scope with scope_id"),
    pytest.param({"scope": "global", "scope_id": "x"}, "scope_id is not allowed with global scope", id="global with scope_id"),
    pytest.param({"scope": "workstream"}, "scope_id is required for workstream scope", id="workstream without scope_id"),
])
def test_a_delete_with_bad_scope_parameters_is_a_400_and_deletes_nothing(
    alice: Caller, query: dict[str, str], message: str
) -> None:
    alice.save("probe")
    rejected(alice.delete(f"{MEMORIES}/probe", query_string=query), 400, message)
    assert alice.get(MEMORIES).json["total"] == 1


# -- scope authorization, the same on all four endpoints ----------------------


Attempt = Callable[["Caller", dict[str, str]], Any]
ENDPOINTS: dict[str, Attempt] = {
    "list": lambda caller, scope: caller.get(MEMORIES, query_string=scope),
    "search": lambda caller, scope: caller.post(SEARCH, json={"query": "probe", **scope}),
    "save": lambda caller, scope: caller.save("probe", **scope),
    "delete": lambda caller, scope: caller.delete(f"{MEMORIES}/probe", query_string=scope),
}
OTHER_USER = "Cannot access another user's memories"
OTHER_WORKSTREAM = "Cannot access another user's workstream memories"


@pytest.mark.parametrize(("who", "scope", "status", "message"), [
    pytest.param("alice", lambda c: {"scope": "user", "scope_id": c.bob.user_id}, 403, OTHER_USER, id="another user's id"),
    pytest.param("service", lambda c: {"scope": "user", "scope_id": c.bob.user_id}, 403, OTHER_USER,
                 id="another user's id with a service token"),
    pytest.param("alice", lambda c: {"scope": "workstream", "scope_id": "no-such-workstream"}, 404, "Workstream not found",
                 id="unknown workstream"),
    pytest.param("alice", lambda c: {"scope": "workstream", "scope_id": c.bob_workstream}, 403, OTHER_WORKSTREAM,
                 id="another user's workstream"),
    pytest.param("alice", lambda c: {"scope": "workstream", "scope_id": c.unowned_workstream}, 403, OTHER_WORKSTREAM,
                 id="unowned workstream"),
    pytest.param("alice", lambda c: {"scope": "workstream", "scope_id": "  "}, 400, "scope_id is required for workstream scope",
                 id="workstream with blank scope_id"),
])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_addressing_a_namespace_the_caller_does_not_own_is_refused_on_every_endpoint(
    cast: Cast, endpoint: str, who: str, scope: Callable[[Cast], dict[str, str]], status: int, message: str
) -> None:
    rejected(ENDPOINTS[endpoint](getattr(cast, who), scope(cast)), status, message)


@pytest.mark.parametrize(("who", "scope"), [
    pytest.param("alice", lambda c: {"scope": "user", "scope_id": c.alice.user_id}, id="own user id"),
    pytest.param("alice", lambda c: {"scope": " User "}, id="user scope spelled loosely"),
    pytest.param("alice", lambda c: {"scope": "workstream", "scope_id": c.alice_workstream}, id="own workstream"),
    pytest.param("service", lambda c: {"scope": "workstream", "scope_id": c.bob_workstream}, id="service token, any workstream"),
    pytest.param("service", lambda c: {"scope": "workstream", "scope_id": c.unowned_workstream},
                 id="service token, unowned workstream"),
])
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_addressing_an_owned_namespace_is_allowed_on_every_endpoint(
    cast: Cast, endpoint: str, who: str, scope: Callable[[Cast], dict[str, str]]
) -> None:
    response = ENDPOINTS[endpoint](getattr(cast, who), scope(cast))
    if endpoint == "delete":  # authorized, then looked up in that namespace: nothing there yet
        rejected(response, 404, "Memory 'probe' not found")
    else:
        assert response.status_code == (201 if endpoint == "save" else 200), response.json
