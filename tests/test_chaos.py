"""A short chaos run: production memoryd under concurrent SDK clients while its parts are broken one by one.

gunicorn with two API processes, two ``memoryd worker``s, a PostgreSQL cluster and a ``redis-server`` of the
test's own. While three clients save, read back and search: Redis is stopped and started, an API process
and a worker are killed with SIGKILL (and replaced), and every connection to the database is cut. Then
every acknowledged save is in the log exactly once, the audit chain and the read models verify, no client
saw a 5xx outside the database's own outage, and the clients get through as much work at the end as at
the start, loosely (a behaviour check: speed is ``bench/chaos/bench_outages.py``'s business).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.chaos_deployment import Deployment, missing_redis_server
from tests.chaos_load import Load
from tests.helpers import UNDER_CI, until
from tests.own_postgres import OwnPostgres

PHASE_SECONDS = 5.0


@pytest.fixture
def deployment(own_postgres: OwnPostgres) -> Iterator[Deployment]:
    problem = missing_redis_server()
    if problem and UNDER_CI:
        pytest.fail(f"cannot start a Redis of the test's own: {problem} (CI=true: the outage suites must run)",
                    pytrace=False)
    if problem:
        pytest.skip(f"cannot start a Redis of the test's own: {problem}")
    started = Deployment(own_postgres)
    try:
        started.start()
        yield started
    finally:
        started.close()


def test_acknowledged_writes_survive_redis_process_and_connection_outages_once_each(deployment: Deployment) -> None:
    load = Load(deployment.base_url, deployment.token, clients=3)
    phases: dict[str, tuple[float, float]] = {}

    def phase(name: str) -> None:
        """Run the load for PHASE_SECONDS (the outage is whatever the deployment is going through)."""
        start = time.monotonic()
        time.sleep(PHASE_SECONDS)
        phases[name] = (start, time.monotonic())

    load.start()
    try:
        until(lambda: len(load.acknowledged) >= 3 or bool(load.errors), "the first saves", timeout=60)
        phase("first")
        deployment.stop_redis()
        phase("redis down")
        deployment.start_redis()
        deployment.kill_api_process()
        deployment.kill_worker()
        phase("processes killed")
        cut_at = time.monotonic()
        assert deployment.cut_database_connections() > 0
        phase("connections cut")
        phase("last")
    finally:
        load.stop()

    assert load.errors == []
    saved = deployment.saves_by_name()
    assert {name: saved[name] for name in load.acknowledged if saved[name] != 1} == {}  # each exactly once
    assert all(saved[name] <= 1 for name in load.attempted)  # none applied twice, acknowledged or not
    deployment.memoryd("audit", "verify")
    deployment.memoryd("projections", "verify")
    database_outage = (cut_at, phases["connections cut"][1])
    assert load.server_errors_outside([database_outage]) == []
    first, last = (load.figures(name, *phases[name]) for name in ("first", "last"))
    # Loose: the machine is shared and noisy, and a worker killed mid-job can still leave the queue's
    # catch-up-pending key behind for up to 60 s (writes then wait for the periodic catch-up: about 0.35x).
    assert first.operations > 0 and last.per_second >= 0.2 * first.per_second, (first, last)
