"""``/metrics``: what an operator's Prometheus scrapes, parsed as Prometheus parses it."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from memoryd.app.services import Services
from tests.helpers import (
    World,
    a_memory,
    caller_factory,
    free_port,
    make_services,
    plant,
    spawn_worker,
    stop,
    until,
    wait_until_serving,
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parsed(text: str) -> Samples:
    """Every sample, by name and sorted labels, as Prometheus' own parser reads the exposition."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def scrape(client: Any) -> Samples:
    response = client.get("/metrics")  # no token: like /healthz
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    return parsed(response.get_data(as_text=True))


def requests(samples: dict[Any, float], route: str, method: str, status: int) -> float:
    return samples.get(("memoryd_http_requests_total", (("method", method), ("route", route),
                                                         ("status", str(status)))), 0.0)


def test_requests_are_counted_by_route_and_status_with_their_latency(alice: Any) -> None:
    assert alice.save("deploy_steps", "run the migrations first").status_code == 201
    assert alice.save("deploy_steps", "then restart").status_code == 200  # the same name: an update
    assert alice.get("/v1/api/memories/missing_one").status_code == 404
    assert alice.get("/no/such/route").status_code == 404
    samples = scrape(alice.client)
    assert requests(samples, "memories.save", "POST", 201) == requests(samples, "memories.save", "POST", 200) == 1
    assert requests(samples, "memories.get", "GET", 404) == 1
    assert requests(samples, "unmatched", "GET", 404) == 1
    latency = ("memoryd_http_request_duration_seconds_count", (("method", "POST"), ("route", "memories.save")))
    assert samples[latency] == 2
    assert "/v1/api/memories/missing_one" not in str(samples)  # a memory's name never becomes a label


def test_projections_the_index_and_turns_are_reported(world: World, services: Services) -> None:
    session = world.session(world.workstream(world.owner), user=world.owner)
    assert session.save("deploy_steps", "run the migrations first")["ok"]
    for _ in range(3):
        assert session.turn("how do we deploy?")["block"]
    samples = scrape(world.admin.client)
    head = services.store.head_position()
    assert samples[("memoryd_log_head_position", ())] == head
    for projection in services.projector.projections:
        labels = (("projection", projection.name),)
        assert samples[("memoryd_projection_checkpoint", labels)] == head  # in process: projected before the 201
        assert samples[("memoryd_projection_lag_events", labels)] == 0
        assert samples[("memoryd_projection_stalled", labels)] == 0
    assert samples[("memoryd_search_index_memories", ())] == 1
    assert samples[("memoryd_search_index_parts", ())] >= 1
    assert samples[("memoryd_search_index_position", ())] == head
    assert samples[("memoryd_turn_compose_duration_seconds_count", ())] == 3
    assert samples[("memoryd_database_up", ())] == 1
    assert not any(name.startswith("memoryd_queue") for name, _ in samples)  # no Redis: no queue


def test_lag_and_a_stalled_projection_show_in_the_gauges(admin: Any, services: Services) -> None:
    planted = a_memory("planted")
    del planted["content"]  # an event no projection can apply
    position = plant(services, "planted", planted)
    behind = scrape(admin.client)
    assert admin.save("after").status_code == 201  # its catch-up meets the planted event and stops there
    stopped = scrape(admin.client)

    table = (("projection", "structured_memories"),)
    assert behind[("memoryd_projection_lag_events", table)] == 1 and behind[("memoryd_projection_stalled", table)] == 0
    assert stopped[("memoryd_projection_stalled", table)] == 1
    assert stopped[("memoryd_projection_checkpoint", table)] == position - 1
    assert stopped[("memoryd_projection_lag_events", table)] == 2  # the planted event and the save after it


def test_with_workers_the_queue_depth_failed_jobs_and_workers_are_reported(sqlite_url: str, redis_url: str) -> None:
    services = make_services(sqlite_url, redis_url)  # a queue of its own: other runs share the test Redis
    try:
        caller = caller_factory(create_app(services), services)()
        assert caller.save("queued_note").status_code == 201  # a catch-up job waits: no worker runs yet
        samples = scrape(caller.client)
        assert services.queue is not None and services.queue.count >= 1
        assert samples[("memoryd_queue_jobs", ())] == services.queue.count
        assert samples[("memoryd_queue_failed_jobs", ())] == 0
        assert samples[("memoryd_queue_workers", ())] == 0
        worker = spawn_worker(services)
        try:
            until(lambda: scrape(caller.client)[("memoryd_queue_workers", ())] == 1, "the worker to be counted")
        finally:
            stop(worker)
    finally:
        services.database.dispose()


def test_several_gunicorn_processes_add_up_their_counts(built: Any, sqlite_url: str, tmp_path: Path) -> None:
    """Multiprocess mode: two API processes, one scrape, every request counted once."""
    built()  # the schema
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(shared), "MEMORYD_DATABASE_URL": sqlite_url}
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}",
                               "api.wsgi:application"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/healthz"), "gunicorn did not come up"
        before = healthz_counted(_get(port, "/metrics"))
        sent = 0
        with ThreadPoolExecutor(8) as pool:  # concurrent connections, until both processes have answered some
            while sent < 2_000 and len(counters(shared)) < 2:
                assert [status for status, _ in pool.map(lambda _: _get(port, "/healthz"), range(40))] == [200] * 40
                sent += 40
        assert len(counters(shared)) == 2
        assert healthz_counted(_get(port, "/metrics")) == before + sent
    finally:
        server.terminate()
        server.wait(timeout=30)


def counters(shared: Path) -> list[str]:
    """The processes' own count files (prometheus-client names them by process id)."""
    return [name for name in os.listdir(shared) if name.startswith("counter_")]


def healthz_counted(answer: tuple[int, str]) -> float:
    status, text = answer
    assert status == 200
    return parsed(text)[("memoryd_http_requests_total", (("method", "GET"), ("route", "health.healthz"),
                                                          ("status", "200")))]


def _get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_a_client_cannot_mint_label_values_and_counting_never_fails_an_answer(alice: Any, monkeypatch: Any) -> None:
    assert alice.request("BREW", "/healthz").status_code == 405
    samples = scrape(alice.client)
    assert requests(samples, "unmatched", "other", 405) == 1  # no route takes BREW
    assert "BREW" not in str(samples)

    def broken(*_: Any) -> None:
        raise FileNotFoundError("the multiprocess directory was removed")

    monkeypatch.setattr(alice.client.application.extensions["memoryd.metrics"], "observe_request", broken)
    assert alice.save("still_saved").status_code == 201
    assert alice.get("/v1/api/memories/still_saved").status_code == 200
