"""Errors across the whole HTTP surface: one shape, honest statuses.

Every failure, whether raised by our code, by routing or by the body-size
limit, answers ``{"error": "..."}`` as JSON; a broken database is a 500,
never a "not found"; every response carries an X-Request-Id.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from api.app import create_app
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.kernel.config import Config, ServerSettings, StorageSettings
from tests.helpers import Caller, MakeCaller

MEMORIES = "/v1/api/memories"
SEARCH = "/v1/api/memories/search"
ADMIN = "/v1/api/admin/memories"
AUDIT = "/v1/api/admin/audit"
UNAUTHORIZED = "Unauthorized: missing or invalid token"
VALID_BODY = {"name": "note", "content": "some content", "description": "a description"}


def assert_error(response: Any, status: int, message: str | None = None) -> None:
    assert response.status_code == status
    assert response.mimetype == "application/json"
    body = json.loads(response.get_data())
    assert list(body) == ["error"]
    assert isinstance(body["error"], str) and body["error"]
    if message is not None:
        assert body["error"] == message


# -- authentication and authorization -----------------------------------------


@pytest.mark.parametrize(
    ("authorization", "method", "path"),
    [
        (None, "GET", MEMORIES),
        (None, "DELETE", f"{MEMORIES}/note"),
        (None, "GET", AUDIT),
        ("", "POST", MEMORIES),
        ("Bearer", "POST", SEARCH),
        ("Bearer   ", "GET", MEMORIES),
        ("Bearer mdt_not_a_real_token", "POST", MEMORIES),
        ("Bearer mdt_not_a_real_token", "GET", ADMIN),
        ("Basic {token}", "GET", MEMORIES),
        ("Token {token}", "POST", MEMORIES),
        ("{token}", "DELETE", f"{MEMORIES}/note"),
    ],
    ids=["no-header", "no-header-delete", "no-header-admin", "empty-header", "bearer-without-token", "bearer-blank",
         "wrong-token", "wrong-token-admin", "basic-scheme", "token-scheme", "no-scheme"],
)
def test_a_request_without_a_valid_bearer_token_is_401(admin: Caller, services: Services, authorization: str | None,
                                                       method: str, path: Any) -> None:
    headers = {} if authorization is None else {"Authorization": authorization.format(token=admin.token)}
    response = admin.client.open(path, method=method, headers=headers, json=VALID_BODY)
    assert_error(response, 401, UNAUTHORIZED)
    assert services.store.head_position() == 0


def test_a_401_tells_the_client_to_use_a_bearer_token(app: Flask) -> None:
    response = app.test_client().get(MEMORIES)
    assert response.status_code == 401
    assert response.headers.get("WWW-Authenticate", "").lower().startswith("bearer")


def test_the_bearer_scheme_name_is_case_insensitive(alice: Caller) -> None:
    response = alice.client.get(MEMORIES, headers={"Authorization": f"bearer {alice.token}"})
    assert response.status_code == 200


@pytest.mark.parametrize(("method", "path"), [("POST", MEMORIES), ("DELETE", f"{MEMORIES}/note")])
def test_a_read_only_token_may_not_write(make_caller: MakeCaller, services: Services, method: str, path: Any) -> None:
    reader = make_caller("read")
    response = reader.request(method, path, json=VALID_BODY)
    assert_error(response, 403, "Forbidden: token lacks 'write' scope")
    assert services.store.head_position() == 0


def test_a_read_only_token_may_search_and_list(make_caller: MakeCaller, alice: Caller) -> None:
    alice.save("deploy_notes", content="deploy with care")
    reader = make_caller("read")
    search = reader.post(SEARCH, json={"query": "deploy"})
    assert search.status_code == 200
    assert [memory["name"] for memory in search.json["memories"]] == ["deploy_notes"]
    assert reader.get(MEMORIES).json["total"] == 1


# -- routing ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/api/nothing", "/v1/api/admin/memories/a/b", "/v2/api/memories"])
def test_an_unknown_route_is_a_json_404(alice: Caller, path: str) -> None:
    assert_error(alice.get(path), 404)


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", MEMORIES), ("PUT", SEARCH), ("PUT", f"{ADMIN}/some-id"), ("DELETE", AUDIT)])
def test_a_wrong_method_is_a_json_405(alice: Caller, method: str, path: Any) -> None:
    assert_error(alice.request(method, path), 405)


def test_get_on_the_search_path_is_the_get_of_a_memory_named_search(alice: Caller) -> None:
    """Names are free, as upstream: ``GET .../memories/search`` reads the memory called ``search`` (no 405)."""
    assert_error(alice.get(SEARCH), 404, "Memory 'search' not found")
    assert alice.post(MEMORIES, json={**VALID_BODY, "name": "search"}).status_code == 201
    assert alice.get(SEARCH).json["name"] == "search"


@pytest.mark.parametrize(("method", "path", "allowed"), [("PUT", MEMORIES, {"GET", "POST"}),
                                                         ("PATCH", f"{MEMORIES}/some_name", {"GET", "DELETE"})])
def test_a_405_lists_the_methods_the_route_allows(alice: Caller, method: str, path: Any, allowed: Any) -> None:
    response = alice.request(method, path)
    assert response.status_code == 405
    assert allowed <= {item.strip() for item in response.headers.get("Allow", "").split(",")}


# -- request bodies -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "data", "message"),
    [
        (MEMORIES, b"{not json", "Invalid JSON body"),
        (SEARCH, b'{"query": "note",', "Invalid JSON body"),
        (MEMORIES, b"", "Invalid JSON body"),
        (SEARCH, b"\xff\xfe\x00", "Invalid JSON body"),
        (MEMORIES, b'["name", "note"]', "Request body must be a JSON object"),
        (SEARCH, b'["query", "note"]', "Request body must be a JSON object"),
        (MEMORIES, b'"note"', "Request body must be a JSON object"),
        (SEARCH, b"42", "Request body must be a JSON object"),
        (MEMORIES, b"null", "Request body must be a JSON object"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_rejected(alice: Caller, services: Services, path: Any, data: bytes,
                                                      message: str) -> None:
    response = alice.post(path, data=data, content_type="application/json")
    assert_error(response, 400, message)
    assert services.store.head_position() == 0


@pytest.fixture
def small_app_caller(services: Services, alice: Caller) -> Caller:
    """Alice's token against an app that accepts bodies of at most 2048 bytes."""
    small = create_app(dataclasses.replace(services, config=dataclasses.replace(
        services.config, server=ServerSettings(max_body_bytes=2048))))
    return dataclasses.replace(alice, client=small.test_client())


@pytest.mark.parametrize("path", [MEMORIES, SEARCH])
def test_a_body_over_the_configured_maximum_is_413(small_app_caller: Caller, services: Services, path: Any) -> None:
    response = small_app_caller.post(path, json=VALID_BODY | {"query": "x", "content": "x" * 3000})
    assert_error(response, 413)
    assert "2048" in response.json["error"]
    assert services.store.head_position() == 0


def test_a_body_under_the_configured_maximum_is_accepted(small_app_caller: Caller) -> None:
    assert small_app_caller.post(MEMORIES, json=VALID_BODY | {"content": "x" * 1500}).status_code == 201


# -- storage failures ---------------------------------------------------------


def drop(services: Services, table: str) -> None:
    with services.database.write() as conn:
        conn.exec_driver_sql(f"DROP TABLE {table}")


@pytest.mark.parametrize(
    ("table", "method", "path", "body"),
    [
        ("structured_memories", "GET", MEMORIES, None),
        ("structured_memories", "POST", SEARCH, {"query": "note"}),
        ("structured_memories", "GET", ADMIN, None),
        ("structured_memories", "GET", f"{ADMIN}/search?q=note", None),
        ("structured_memories", "GET", f"{ADMIN}/{{id}}", None),
        ("structured_memories", "DELETE", f"{ADMIN}/{{id}}", None),
        ("structured_memories", "DELETE", f"{ADMIN}/no-such-id", None),
        ("events", "POST", MEMORIES, VALID_BODY | {"name": "another"}),
        ("events", "DELETE", f"{MEMORIES}/note", None),
        ("events", "DELETE", f"{MEMORIES}/no_such_note", None),
        ("events", "DELETE", f"{ADMIN}/{{id}}", None),
        ("events", "GET", AUDIT, None),
    ],
)
def test_a_storage_failure_is_a_500_never_a_false_404(admin: Caller, services: Services, table: str, method: str, path: Any,
                                                      body: Any) -> None:
    memory_id = admin.save("note").json["memory_id"]
    drop(services, table)
    response = admin.request(method, path.format(id=memory_id), json=body)
    expected = {"POST /v1/api/memories": "Failed to save memory", "DELETE": "Failed to delete memory"}
    message = expected.get(f"{method} {path}", expected.get(method, "Memory storage unavailable"))
    assert_error(response, 500, message)
    assert response.headers["X-Request-Id"]


def test_a_delete_by_name_still_works_from_the_log_when_the_read_model_is_gone(admin: Caller, services: Services) -> None:
    admin.save("note")
    drop(services, "structured_memories")
    assert admin.delete(f"{MEMORIES}/note").json == {"status": "ok", "name": "note"}
    assert_error(admin.delete(f"{MEMORIES}/note"), 404, "Memory 'note' not found")


def test_a_save_that_reached_the_log_is_not_reported_as_failed_when_the_read_model_is_broken(alice: Caller,
                                                                                             services: Services) -> None:
    drop(services, "structured_memories")
    response = alice.save("note")
    [event] = list(services.store.iter_all())
    assert event.event_type == "memory.save"
    assert response.status_code == 201
    assert response.json["memory_id"] == event.payload["memory"]["memory_id"]


# -- request ids --------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "authorized", "status"),
    [("GET", MEMORIES, True, 200), ("GET", MEMORIES, False, 401), ("GET", "/v1/api/nothing", True, 404),
     ("PUT", MEMORIES, True, 405), ("POST", MEMORIES, True, 400)],
)
def test_the_request_id_the_client_sent_is_echoed_on_every_response(alice: Caller, method: str, path: Any, authorized: bool,
                                                                    status: int) -> None:
    headers = {"X-Request-Id": "trace-42"} | ({"Authorization": f"Bearer {alice.token}"} if authorized else {})
    response = alice.client.open(path, method=method, headers=headers, data=b"[]")
    assert response.status_code == status
    assert response.headers["X-Request-Id"] == "trace-42"


def test_a_request_id_is_generated_when_the_client_sends_none(alice: Caller) -> None:
    first, second = alice.get(MEMORIES).headers["X-Request-Id"], alice.get("/v1/api/nothing").headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert re.fullmatch(r"[0-9a-f]{32}", second)
    assert first != second


# -- the OpenAPI document -----------------------------------------------------

OPERATIONS = {
    ("/v1/api/memories", "get"), ("/v1/api/memories", "post"), ("/v1/api/memories/search", "post"),
    ("/v1/api/memories/batch", "post"),
    ("/v1/api/memories/{name}", "get"), ("/v1/api/memories/{name}", "delete"),
    ("/v1/api/admin/memories", "get"), ("/v1/api/admin/memories/search", "get"),
    ("/v1/api/admin/memories/{memory_id}", "get"), ("/v1/api/admin/memories/{memory_id}", "delete"),
    ("/v1/api/admin/memories/{memory_id}", "patch"), ("/v1/api/admin/memories/{memory_id}/turns", "get"),
    ("/v1/api/admin/memories/{memory_id}/history", "get"), ("/v1/api/admin/memories/{memory_id}/restore", "post"),
    ("/v1/api/admin/audit", "get"), ("/v1/api/admin/events", "get"), ("/v1/api/admin/erasures", "post"),
    ("/v1/api/admin/audit/chain", "get"), ("/v1/api/admin/erasures/preview", "get"),
    ("/v1/api/admin/projects", "post"), ("/v1/api/admin/projects/{project_id}", "get"),
    ("/v1/api/admin/projects/{project_id}", "delete"),
    ("/v1/api/admin/projects/{project_id}/members/{user_id}", "put"),
    ("/v1/api/admin/projects/{project_id}/members/{user_id}", "delete"),
    ("/v1/api/admin/projects/{project_id}/archive", "post"), ("/v1/api/admin/projects/{project_id}/reactivate", "post"),
    ("/v1/api/sessions", "post"), ("/v1/api/session", "get"), ("/v1/api/sessions/{session_id}/memory", "post"),
    ("/v1/api/sessions/{session_id}/turns", "post"), ("/v1/api/sessions/{session_id}/turns/{turn_id}", "get"),
    ("/v1/api/sessions/{session_id}/signals", "post"), ("/v1/api/admin/sessions/{session_id}/turns", "get"),
    ("/v1/api/admin/workstreams", "post"), ("/v1/api/admin/workstreams/{workstream_id}", "patch"),
    # identities (docs/identities.md)
    ("/v1/api/admin/users", "get"), ("/v1/api/admin/users", "post"), ("/v1/api/admin/users/{user_id}", "get"),
    ("/v1/api/admin/users/{user_id}/deactivate", "post"), ("/v1/api/admin/users/{user_id}/reactivate", "post"),
    ("/v1/api/admin/tokens", "get"), ("/v1/api/admin/tokens", "post"), ("/v1/api/admin/tokens/{token_id}", "delete"),
    ("/v1/api/token", "get"), ("/v1/api/admin/sessions", "get"), ("/v1/api/sessions/{session_id}", "delete"),
    ("/v1/api/admin/projects", "get"), ("/v1/api/admin/workstreams", "get"),
}


@pytest.fixture(scope="module")
def served_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flask]:
    """An app for the read-only document tests; serving the document never touches the database."""
    url = f"sqlite:///{tmp_path_factory.mktemp('openapi') / 'memoryd.db'}"
    config = Config(storage=StorageSettings(database_url=url))
    built = build_services(config)
    yield create_app(built)
    built.database.dispose()


@pytest.fixture(scope="module")
def openapi(served_app: Flask) -> dict[str, Any]:
    response = served_app.test_client().get("/v1/api/openapi.json")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    document: dict[str, Any] = json.loads(response.get_data())
    return document


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def test_the_openapi_document_lists_every_operation(openapi: dict[str, Any]) -> None:
    assert openapi["openapi"].startswith("3.")
    documented = {(path, method) for path, item in openapi["paths"].items() for method in item}
    assert documented == OPERATIONS


def test_the_openapi_document_covers_every_route_the_app_serves(served_app: Flask, openapi: dict[str, Any]) -> None:
    served = {
        (re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule), method.lower())
        for rule in served_app.url_map.iter_rules() if rule.rule.startswith("/v1/api/") and rule.endpoint != "openapi"
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
    }
    assert served == OPERATIONS


def test_every_reference_in_the_openapi_document_resolves(openapi: dict[str, Any]) -> None:
    references = re.findall(r'"\$ref": "#/components/schemas/(\w+)"', json.dumps(openapi))
    assert references
    assert set(references) <= set(openapi["components"]["schemas"])


def test_the_openapi_request_schemas_name_every_field(openapi: dict[str, Any]) -> None:
    save = resolve(openapi, openapi["paths"][MEMORIES]["post"]["requestBody"]["content"]["application/json"]["schema"])
    assert {"name", "content", "description", "type", "scope", "scope_id"} <= set(save["properties"])
    assert {"name", "content", "description"} <= set(save["required"])
    search = resolve(openapi, openapi["paths"][SEARCH]["post"]["requestBody"]["content"]["application/json"]["schema"])
    assert {"query", "type", "scope", "scope_id", "limit", "offset"} <= set(search["properties"])
    assert "query" in search["required"]


@pytest.mark.parametrize(
    ("path", "method", "parameters", "required"),
    [
        (MEMORIES, "get", {"type", "scope", "scope_id", "limit", "after"}, set()),
        (f"{MEMORIES}/{{name}}", "delete", {"name", "scope", "scope_id"}, {"name"}),
        (ADMIN, "get", {"type", "scope", "scope_id", "limit", "offset", "as_of"}, set()),
        (f"{ADMIN}/search", "get", {"q", "type", "scope", "scope_id", "limit", "as_of"}, {"q"}),
        (f"{ADMIN}/{{memory_id}}", "get", {"memory_id", "as_of"}, {"memory_id"}),
        ("/v1/api/admin/events", "get", {"after", "limit"}, set()),
        (f"{ADMIN}/{{memory_id}}", "delete", {"memory_id"}, {"memory_id"}),
        (AUDIT, "get", {"action", "actor", "memory_id", "project_id", "after", "since", "limit"}, set()),
        ("/v1/api/admin/audit/chain", "get", {"after", "hash", "limit"}, set()),
        ("/v1/api/admin/erasures/preview", "get", {"user_id", "memory_id", "scope", "scope_id"}, set()),
    ],
)
def test_the_openapi_document_names_every_parameter(openapi: dict[str, Any], path: Any, method: str, parameters: Any,
                                                    required: Any) -> None:
    documented = [parameter for parameter in openapi["paths"][path][method]["parameters"] if parameter["in"] != "header"]
    assert {parameter["name"] for parameter in documented} == parameters
    assert {parameter["name"] for parameter in documented if parameter.get("required")} == required


@pytest.mark.parametrize(
    ("path", "method", "fields"),
    [
        (MEMORIES, "get", {"memories", "total"}),
        (MEMORIES, "post", {"memory_id", "name", "description", "type", "scope", "scope_id", "content", "created", "updated"}),
        (SEARCH, "post", {"memories", "total"}),
        (f"{MEMORIES}/{{name}}", "delete", {"status", "name"}),
        (f"{ADMIN}/search", "get", {"memories", "total"}),
        (f"{ADMIN}/{{memory_id}}", "delete", {"status"}),
        (AUDIT, "get", {"records", "next_after"}),
    ],
)
def test_the_openapi_response_schemas_name_every_field(openapi: dict[str, Any], path: Any, method: str, fields: Any) -> None:
    operation = openapi["paths"][path][method]
    schema = resolve(openapi, operation["responses"]["200"]["content"]["application/json"]["schema"])
    assert fields <= set(schema["properties"])
    error = resolve(openapi, operation["responses"]["400"]["content"]["application/json"]["schema"])
    assert set(error["properties"]) == {"error"}


def test_the_openapi_memory_list_items_are_whole_memories(openapi: dict[str, Any]) -> None:
    memory_list = resolve(openapi, openapi["paths"][MEMORIES]["get"]["responses"]["200"]["content"]["application/json"]["schema"])
    memory = resolve(openapi, memory_list["properties"]["memories"]["items"])
    fields = {"memory_id", "name", "description", "type", "scope", "scope_id", "content", "created", "updated"}
    assert fields <= set(memory["properties"])
