"""Shared fixtures: a fresh database per test on SQLite and on the real PostgreSQL.

PostgreSQL tests run in a schema of their own, dropped afterwards. When the
server is unreachable they are skipped on a laptop, but under ``CI=true``
they fail loudly: CI must never pass without them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import create_engine, text

from api.app import create_app
from memoryd.app.services import Services
from memoryd.kernel.config import MemorySettings
from tests.helpers import (
    UNDER_CI,
    Caller,
    Cast,
    LiveServer,
    MakeCaller,
    World,
    caller_factory,
    chromium,
    make_services,
    serving,
)
from tests.own_postgres import OwnPostgres, missing_toolchain

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

POSTGRES_URL = os.environ.get("MEMORYD_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# Each pytest-xdist worker (gw0, gw1, ...) flushes a Redis database of its own.
_XDIST_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
REDIS_URL = os.environ.get("MEMORYD_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{13 - _XDIST_WORKER % 13}")
POSTGRES_FIXTURES = frozenset({"postgres_server", "postgres_url", "built_postgres"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a PostgreSQL fixture is a ``postgres`` test, whether or not its author said so."""
    for item in items:
        if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("postgres") is None:
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session", autouse=True)
def _snapshot_files_in_a_temporary_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Search snapshot files go to the user's cache directory: during tests, to one that is thrown away."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME")
    else:
        os.environ["XDG_CACHE_HOME"] = before


def _postgres_unavailable() -> str | None:
    engine = create_engine(POSTGRES_URL)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as error:  # any failure to connect means the same thing here
        return f"PostgreSQL at {POSTGRES_URL} is unreachable: {error}"
    finally:
        engine.dispose()
    return None


@pytest.fixture(scope="session")
def postgres_server() -> str:
    problem = _postgres_unavailable()
    if problem and UNDER_CI:
        pytest.fail(f"{problem} (CI=true: the PostgreSQL suites must run)", pytrace=False)
    if problem:
        pytest.skip(problem)
    return POSTGRES_URL


@pytest.fixture(scope="session")
def redis_server() -> str:
    client = Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except RedisError as error:
        if UNDER_CI:
            pytest.fail(f"Redis at {REDIS_URL} is unreachable: {error} (CI=true: the Redis suites must run)", pytrace=False)
        pytest.skip(f"Redis at {REDIS_URL} is unreachable: {error}")
    finally:
        client.close()
    return REDIS_URL


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[OwnPostgres]:
    """A PostgreSQL cluster of the test module's own, to stop and restart (``tests.own_postgres``)."""
    problem = missing_toolchain()
    if problem and UNDER_CI:
        pytest.fail(f"cannot start a PostgreSQL cluster: {problem} (CI=true: the outage suites must run)", pytrace=False)
    if problem:
        pytest.skip(f"cannot start a PostgreSQL cluster: {problem}")
    cluster = OwnPostgres()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    """The test Redis database, flushed before and after the test."""
    client = Redis.from_url(redis_server)
    client.flushdb()
    yield redis_server
    client.flushdb()
    client.close()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose search_path is a fresh, empty schema."""
    schema = f"memoryd_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{postgres_server}?options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path / 'memoryd.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs the test once per backend."""
    return str(request.getfixturevalue(f"{request.param}_url"))


def _builder(url: str) -> Iterator[Callable[..., Services]]:
    made: list[Services] = []

    def build(redis_url: str = "", queue: str | None = None, **server: Any) -> Services:
        made.append(make_services(url, redis_url, queue, **server))
        return made[-1]

    yield build
    for services in made:  # even when the test failed: no connection outlives its test
        services.database.dispose()
        if services.redis is not None:
            services.redis.close()


@pytest.fixture
def built(sqlite_url: str) -> Iterator[Callable[..., Services]]:
    """``built(redis_url="", queue=None, **server_settings)``: services on SQLite, disposed afterwards."""
    yield from _builder(sqlite_url)


@pytest.fixture
def built_postgres(postgres_url: str) -> Iterator[Callable[..., Services]]:
    """``built`` on a fresh PostgreSQL schema."""
    yield from _builder(postgres_url)


@pytest.fixture
def memory_settings() -> MemorySettings:
    """The ``[memory]`` settings of ``services``: parametrize it to change them."""
    return MemorySettings()


@pytest.fixture
def services(sqlite_url: str, memory_settings: MemorySettings) -> Iterator[Services]:
    """Services on SQLite (the fast default for API tests)."""
    built = make_services(sqlite_url, memory=memory_settings)
    yield built
    built.database.dispose()


@pytest.fixture
def any_services(database_url: str) -> Iterator[Services]:
    """Services on each backend in turn."""
    built = make_services(database_url)
    yield built
    built.database.dispose()


@pytest.fixture
def app(services: Services) -> Flask:
    return create_app(services)


@pytest.fixture
def make_caller(app: Flask, services: Services) -> MakeCaller:
    return caller_factory(app, services)


@pytest.fixture
def alice(make_caller: MakeCaller) -> Caller:
    return make_caller()


@pytest.fixture
def admin(make_caller: MakeCaller) -> Caller:
    return make_caller("read,write", ("admin.memories",))


@pytest.fixture
def any_make_caller(any_services: Services) -> MakeCaller:
    """``make_caller`` on each backend in turn."""
    return caller_factory(create_app(any_services), any_services)


@pytest.fixture
def world(admin: Caller, services: Services) -> World:
    return World(admin, services)


@pytest.fixture
def cast(make_caller: MakeCaller, services: Services) -> Cast:
    alice, bob, service = make_caller(), make_caller(), make_caller("read,write,service")
    return Cast(alice, bob, service,
                services.directory.create_workstream(alice.user_id, "alice's"),
                services.directory.create_workstream(bob.user_id, "bob's"),
                services.directory.create_workstream(None, "nobody's"))


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live ``memoryd serve`` per test module (the SDKs, the MCP server and the hook talk to it)."""
    with serving(f"sqlite:///{tmp_path_factory.mktemp('live') / 'memoryd.db'}") as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Chromium, once per module (skipped without it, failing under CI=true)."""
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (its own storage) at 1280×800, failing the test on any script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.set_default_timeout(10_000)
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"
