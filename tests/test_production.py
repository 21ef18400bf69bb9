"""The production shape end to end: gunicorn with two API processes of 8 threads each, a worker,
PostgreSQL and Redis, exercised over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from memoryd.app.services import Services
from tests.helpers import free_port, http_call, spawn_worker, stop, wait_until_serving

pytestmark = pytest.mark.postgres


def test_two_gunicorn_processes_and_a_worker_serve_reads_of_their_own_writes(built_postgres: Callable[..., Services],
                                                                             postgres_url: str, redis_url: str) -> None:
    services = built_postgres(redis_url)
    user = services.directory.create_user("agent")
    _, token = services.directory.create_token(user, ["read", "write"], [])
    port = free_port()
    env = {**os.environ, "MEMORYD_DATABASE_URL": postgres_url, "MEMORYD_REDIS_URL": redis_url,
           "MEMORYD_QUEUE": services.config.workers.queue}
    api = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", "2", "-k", "gthread", "--threads", "8",  # the README's
                            "-b", f"127.0.0.1:{port}", "api.wsgi:application"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = spawn_worker(services)
    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/healthz"), "gunicorn did not come up"
        positions = []
        for index in range(40):
            status, body, headers = http_call(port, token, "POST", "/v1/api/memories",
                                          {"name": f"note_{index}", "content": f"fact {index}", "description": "d"})
            assert status == 201, body
            positions.append(int(headers["X-Memory-Position"]))
        status, body, _ = http_call(port, token, "GET", "/v1/api/memories?limit=200",
                                headers={"X-Min-Position": str(positions[-1])})
        assert status == 200 and body["total"] == 40

        retry = {"name": "once", "content": "exactly once", "description": "d"}
        first = http_call(port, token, "POST", "/v1/api/memories", retry, {"Idempotency-Key": "k-1"})
        assert first[0] == 201, first
        again = [http_call(port, token, "POST", "/v1/api/memories", retry, {"Idempotency-Key": "k-1"}) for _ in range(5)]
        assert {(status, json.dumps(body, sort_keys=True)) for status, body, _ in again} == {
            (first[0], json.dumps(first[1], sort_keys=True))}
        names = [event.payload["memory"]["name"] for event in services.store.iter_all()]
        assert names.count("once") == 1, (first, names[-5:])
        status, ready, _ = http_call(port, token, "GET", "/readyz")
        assert status == 200 and ready["status"] == "ready"
    finally:
        stop(api)
        stop(worker)
    services.database.dispose()
