"""A Redis outage costs neither an error nor a wait: writes project in the API process, stay readable at
their position, and ``/readyz`` and ``/metrics`` say the queue is degraded until Redis answers again.

Each test starts its own ``redis-server`` on a free port and stops it (never the shared one).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from api.app import create_app
from memoryd.app.services import Services
from tests.helpers import caller_factory, free_port, http_call, spawn_worker, until, wait_until_serving
from tests.test_consistency import leave_a_backlog
from tests.test_metrics import scrape

MEMORIES = "/v1/api/memories"
GTHREAD = ["-w", "2", "-k", "gthread", "--threads", "8"]  # the README's production command


class ThrowawayRedis:
    """A redis-server of the test's own on one port, stopped and started again at will."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until(lambda: self._answers(), "the throwaway redis-server to answer")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None

    def _answers(self) -> bool:
        from redis import Redis
        from redis.exceptions import RedisError

        client = Redis(port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except RedisError:
            return False
        finally:
            client.close()


@pytest.fixture
def throwaway_redis() -> Iterator[ThrowawayRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    redis = ThrowawayRedis()
    redis.start()
    yield redis
    redis.stop()


def readyz(client: Any) -> tuple[int, dict[str, Any]]:
    response = client.get("/readyz")
    return response.status_code, response.json


def test_a_write_during_the_outage_answers_projected_and_the_probes_report_the_queue_until_it_is_back(
    built: Any, throwaway_redis: ThrowawayRedis
) -> None:
    services: Services = built(redis_url=throwaway_redis.url, write_wait_ms=60_000)  # a wait would end pending
    alice = caller_factory(create_app(services), services)()
    assert alice.save("before").status_code == 201
    status, body = readyz(alice.client)
    assert (status, body["degraded"]) == (200, [])
    assert scrape(alice.client)[("memoryd_queue_up", ())] == 1

    throwaway_redis.stop()
    leave_a_backlog(services)  # the next write's step cannot run: before the outage it went to the workers
    during = alice.save("during", content="written while Redis was down")

    assert during.status_code == 201
    assert "X-Projection-Pending" not in during.headers  # caught up in this process, not left to a worker
    found = alice.get(MEMORIES, headers={"X-Min-Position": during.headers["X-Memory-Position"]})
    assert found.status_code == 200
    assert "written while Redis was down" in [row["content"] for row in found.json["memories"]]
    status, body = readyz(alice.client)
    assert (status, body["status"], body["degraded"]) == (200, "ready", ["queue"])
    assert scrape(alice.client)[("memoryd_queue_up", ())] == 0

    throwaway_redis.start()

    until(lambda: readyz(alice.client)[1]["degraded"] == [], "readyz to see Redis back")
    assert scrape(alice.client)[("memoryd_queue_up", ())] == 1
    assert alice.save("after").status_code == 201


@pytest.mark.postgres
def test_gunicorn_threads_and_a_worker_keep_serving_writes_through_a_redis_outage(
    built_postgres: Any, postgres_url: str, throwaway_redis: ThrowawayRedis
) -> None:
    services: Services = built_postgres(throwaway_redis.url)
    user = services.directory.create_user("agent")
    _, token = services.directory.create_token(user, ["read", "write"], [])
    port = free_port()
    env = {**os.environ, "MEMORYD_DATABASE_URL": postgres_url, "MEMORYD_REDIS_URL": throwaway_redis.url,
           "MEMORYD_QUEUE": services.config.workers.queue}
    api = subprocess.Popen([sys.executable, "-m", "gunicorn", *GTHREAD, "-b", f"127.0.0.1:{port}", "api.wsgi:application"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = spawn_worker(services)
    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/healthz"), "gunicorn did not come up"
        answers = [http_call(port, token, "POST", MEMORIES, {"name": "before", "content": "c", "description": "d"})]

        throwaway_redis.stop()
        answers += [http_call(port, token, "POST", MEMORIES, {"name": f"during_{n}", "content": "c", "description": "d"})
                    for n in range(10)]
        status, ready, _ = http_call(port, token, "GET", "/readyz")

        assert [answer[0] for answer in answers] == [201] * 11
        last = answers[-1][2]["X-Memory-Position"]
        status_list, listed, _ = http_call(port, token, "GET", f"{MEMORIES}?limit=50", headers={"X-Min-Position": last})
        assert status_list == 200 and listed["total"] == 11
        assert (status, ready["status"], ready["degraded"]) == (200, "ready", ["queue"])

        throwaway_redis.start()
        until(lambda: http_call(port, token, "GET", "/readyz")[1]["degraded"] == [], "readyz to see Redis back")
    finally:
        for process in (api, worker):
            process.terminate()
        for process in (api, worker):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:  # a loaded machine: stop it hard rather than leave it running
                process.kill()
                process.wait()
    services.database.dispose()
