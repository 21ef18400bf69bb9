"""Revocation and deactivation across API processes, and wrong tokens beside good ones, on live servers.

Authentication is one indexed read of the database per request (no cache), so a change made through one
``memoryd serve`` is refused by another at its next request; SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.helpers import free_port, http_call, make_services, wait_until_serving


def _serve(url: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "MEMORYD_DATABASE_URL": url, "MEMORYD_PORT": str(port)}
    server = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_until_serving(f"http://127.0.0.1:{port}/healthz"):
        server.kill()
        pytest.fail("memoryd serve did not come up")
    return server, port


@pytest.fixture
def two_servers(database_url: str) -> Iterator[tuple[str, int, int]]:
    services = make_services(database_url)
    admin = services.directory.create_user("admin")
    admin_token = services.directory.create_token(admin, ["read", "write", "service"], ["admin.memories"])[1]
    started = []
    try:
        started = [_serve(database_url) for _ in range(2)]
        yield admin_token, started[0][1], started[1][1]
    finally:
        for server, _ in started:
            server.terminate()
            server.wait(10)
        services.database.dispose()


def test_a_revoke_or_deactivate_through_one_process_is_refused_by_the_other(two_servers: tuple[str, int, int]) -> None:
    admin, first, second = two_servers
    status, alice, _ = http_call(first, admin, "POST", "/v1/api/admin/users", {"name": "alice"})
    assert status == 201
    status, made, _ = http_call(first, admin, "POST", "/v1/api/admin/tokens",
                                {"user_id": alice["user_id"], "scopes": ["read", "write"]})
    assert status == 201
    assert http_call(second, made["token"], "GET", "/v1/api/memories")[0] == 200
    assert http_call(first, admin, "DELETE", f"/v1/api/admin/tokens/{made['token_id']}")[0] == 200
    status, body, _ = http_call(second, made["token"], "GET", "/v1/api/memories")
    assert (status, body["reason"]) == (401, "token revoked")

    _, other, _ = http_call(second, admin, "POST", "/v1/api/admin/tokens",
                            {"user_id": alice["user_id"], "scopes": ["read"]})
    assert http_call(first, other["token"], "GET", "/v1/api/memories")[0] == 200
    assert http_call(second, admin, "POST", f"/v1/api/admin/users/{alice['user_id']}/deactivate", {})[0] == 200
    status, body, _ = http_call(first, other["token"], "GET", "/v1/api/memories")
    assert (status, body["reason"]) == (401, "user deactivated")
    assert http_call(first, admin, "POST", f"/v1/api/admin/users/{alice['user_id']}/reactivate", {})[0] == 200
    assert http_call(second, other["token"], "GET", "/v1/api/memories")[0] == 200


@pytest.fixture
def one_server(sqlite_url: str) -> Iterator[tuple[list[str], int]]:
    services = make_services(sqlite_url)
    user = services.directory.create_user("good")
    good = [services.directory.create_token(user, ["read"], [])[1] for _ in range(4)]
    server, port = _serve(sqlite_url)
    try:
        yield good, port
    finally:
        server.terminate()
        server.wait(10)
        services.database.dispose()


def test_wrong_tokens_from_one_client_do_not_fail_other_clients(one_server: tuple[list[str], int]) -> None:
    """A burst of wrong tokens beside good callers: every good request is answered 200, every wrong one a
    plain 401, and /metrics counts the failures by reason (behaviour, not timings)."""
    good, port = one_server
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def call(token: str, times: int, label: str) -> None:
        for attempt in range(times):
            status, body, _ = http_call(port, token if label == "good" else f"mdt_wrong{attempt:040d}", "GET",
                                        "/v1/api/memories")
            with lock:
                outcomes[f"{label} {status} {body.get('error', '')}"] += 1

    callers = [threading.Thread(target=call, args=("", 100, "bad")) for _ in range(4)]
    callers += [threading.Thread(target=call, args=(token, 25, "good")) for token in good]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(120)
    assert outcomes == {"good 200 ": 100, "bad 401 Unauthorized: missing or invalid token": 400}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        scraped = response.read().decode()
    assert 'memoryd_auth_failures_total{reason="invalid token"} 400.0' in scraped
