"""The probes a load balancer or orchestrator calls: ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import text

from api.app import create_app
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.kernel.config import Config, StorageSettings
from tests.helpers import Caller, caller_factory, make_services

PROJECTIONS = ("structured_memories", "projects")


def lags(value: int) -> dict[str, int]:
    return dict.fromkeys(PROJECTIONS, value)
UNREACHABLE_POSTGRES = "postgresql+psycopg://nobody@127.0.0.1:1/none"


def client_of(services: Services) -> FlaskClient:
    return create_app(services).test_client()


def writer_of(services: Services) -> Caller:
    return caller_factory(create_app(services), services)()


@pytest.fixture
def lagging(sqlite_url: str, redis_url: str) -> Iterator[Any]:
    """``lagging(max_lag)``: services whose projections only move when the test catches them up (no worker
    takes their queue's jobs, and on a fresh database, before any catch-up, a write's step cannot run)."""
    made: list[Services] = []

    def build(ready_max_lag: int) -> Services:
        services = make_services(sqlite_url, redis_url=redis_url, write_wait_ms=0, ready_max_lag=ready_max_lag)
        made.append(services)
        return services

    yield build
    for services in made:
        services.database.dispose()


# -- /healthz ------------------------------------------------------------------


def test_healthz_answers_ok_without_a_token(services: Services) -> None:
    response = client_of(services).get("/healthz")

    assert response.status_code == 200
    assert response.json == {"status": "ok"}


def test_healthz_stays_ok_when_the_database_is_unreachable() -> None:
    services = build_services(Config(storage=StorageSettings(database_url=UNREACHABLE_POSTGRES)))

    response = client_of(services).get("/healthz")

    assert (response.status_code, response.json) == (200, {"status": "ok"})
    assert client_of(services).get("/readyz").status_code == 503
    services.database.dispose()


# -- /readyz -------------------------------------------------------------------


def test_readyz_answers_200_with_the_head_and_each_lag_when_caught_up(services: Services, alice: Caller) -> None:
    alice.save("one")
    alice.save("two")

    response = client_of(services).get("/readyz")  # no token

    assert response.status_code == 200
    assert response.json == {"status": "ready", "head": 2, "lag": lags(0), "max_lag": 10_000,
                             "search": {"analyzer": services.search.analyzer.identity, "index": services.search.origin},
                             "degraded": []}


def test_readyz_is_ready_on_an_empty_log(services: Services) -> None:
    response = client_of(services).get("/readyz")

    assert response.status_code == 200
    assert response.get_json()["head"] == 0
    assert response.get_json()["lag"] == lags(0)


def test_readyz_answers_503_lagging_when_a_projection_is_further_behind_than_allowed(lagging: Any) -> None:
    services = lagging(ready_max_lag=0)
    assert writer_of(services).save("pending").status_code == 201

    response = client_of(services).get("/readyz")

    assert response.status_code == 503
    assert {key: value for key, value in response.get_json().items() if key != "search"} == {
        "status": "lagging", "head": 1, "lag": lags(1), "max_lag": 0, "degraded": []}


def test_readyz_is_ready_when_the_lag_equals_the_limit(lagging: Any) -> None:
    services = lagging(ready_max_lag=1)
    writer = writer_of(services)
    writer.save("one")

    at_limit = client_of(services).get("/readyz")
    writer.save("two")
    past_limit = client_of(services).get("/readyz")

    assert (at_limit.status_code, at_limit.get_json()["lag"]) == (200, lags(1))
    assert (past_limit.status_code, past_limit.get_json()["status"]) == (503, "lagging")


def test_readyz_recovers_once_the_projection_catches_up(lagging: Any) -> None:
    services = lagging(ready_max_lag=0)
    writer_of(services).save("pending")
    assert client_of(services).get("/readyz").status_code == 503

    services.projector.catch_up()

    response = client_of(services).get("/readyz")
    assert response.status_code == 200
    assert response.get_json()["lag"] == lags(0)


def test_readyz_answers_503_when_the_database_file_is_gone(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    services = make_services(f"sqlite:///{directory / 'memoryd.db'}")
    client = client_of(services)
    assert client.get("/readyz").status_code == 200
    services.database.dispose()
    shutil.rmtree(directory)

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.get_json()["status"] == "unavailable"
    assert "database unreachable" in response.get_json()["error"]


def test_readyz_answers_503_when_the_database_server_is_unreachable() -> None:
    services = build_services(Config(storage=StorageSettings(database_url=UNREACHABLE_POSTGRES)))

    response = client_of(services).get("/readyz")

    assert response.status_code == 503
    assert response.get_json()["status"] == "unavailable"
    services.database.dispose()


def test_readyz_answers_503_when_the_checkpoints_cannot_be_read(services: Services) -> None:
    with services.database.write() as conn:
        conn.execute(text("DROP TABLE projection_checkpoints"))

    response = client_of(services).get("/readyz")

    assert response.status_code == 503
    assert response.get_json()["status"] == "unavailable"
    assert set(response.get_json()) == {"status", "error"}
