"""Schemathesis against the served OpenAPI document: no 5xx, every error ``{"error": ...}``, responses as documented.

Every operation is fuzzed with an admin token and with a plain user's token
(the memory tool's route with a session's token), from a fixed seed and a
bounded number of cases, so the run is repeatable and takes about a minute.
``MEMORYD_FUZZ_EXAMPLES`` raises the number of cases per operation for a
longer run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from api.openapi import build_openapi
from memoryd.app.services import Services
from tests.helpers import make_services

EXAMPLES = int(os.environ.get("MEMORYD_FUZZ_EXAMPLES", "40"))


@pytest.fixture(scope="module")
def fuzzed_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    services = make_services(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'memoryd.db'}")
    yield services
    services.database.dispose()


@pytest.fixture(scope="module")
def tokens(fuzzed_services: Services) -> dict[str, str]:
    directory = fuzzed_services.directory
    admin = directory.create_user("admin")
    user = directory.create_user("user")
    workstream = directory.create_workstream(user, "fuzzed")
    session, session_token = fuzzed_services.sessions.create("interactive", workstream, user)
    return {
        "admin": directory.create_token(admin, ["read", "write", "service"], ["admin.memories"])[1],
        "user": directory.create_token(user, ["read", "write"], [])[1],
        "session": session_token,
        "session_id": session.session_id,
    }


@pytest.fixture(scope="module")
def served_schema(fuzzed_services: Services) -> Any:
    return schemathesis.openapi.from_wsgi("/v1/api/openapi.json", create_app(fuzzed_services))


OPERATIONS = [(method.upper(), path) for path, item in build_openapi()["paths"].items() for method in item]


def error_bodies_are_one_message(ctx: Any, response: Any, case: Any) -> bool:
    if response.status_code >= 400:
        body = json.loads(response.content)
        extra = ["current_version"] if response.status_code == 412 else []  # the version a conditional write found
        assert isinstance(body, dict) and list(body) == ["error", *extra] and isinstance(body["error"], str), body
    return True


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          error_bodies_are_one_message]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("who", ["admin", "user"])
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{method} {path}" for method, path in OPERATIONS])
def test_no_request_breaks_the_service_or_its_contract(served_schema: Any, tokens: dict[str, str], method: str,
                                                       path: str, who: str, mode: GenerationMode) -> None:
    token, fixed = tokens[who], {}
    if path.startswith("/v1/api/sessions/{session_id}/"):  # the tool and turn routes take their session's token
        token, fixed = tokens["session"], {"session_id": tokens["session_id"]}
    if path == "/v1/api/session" and who == "user":
        token = tokens["session"]
    operation = served_schema[path][method]

    @given(operation.as_strategy(mode, path_parameters=fixed or None))
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def send(case: Any) -> None:
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)

    send()
