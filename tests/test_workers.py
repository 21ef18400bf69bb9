"""Projection workers on the real PostgreSQL and Redis: crashes, duplicates, outages."""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from events.store import ConcurrencyConflict
from events.types import EventMetadata, MemorySaved, memory_stream_id
from memoryd.app.services import Services
from memoryd.kernel.domain import Memory, Namespace
from projections.projector import Projector
from tests.helpers import (
    RecordingProjection,
    free_port,
    present,
    rebuild_equals_live,
    run_queued_jobs,
    save_memory,
    spawn_worker,
    stop,
    table_rows,
    until,
)
from workers import jobs

GLOBAL = Namespace("global", "")


def _save(services: Any, name: str, content: str = "content") -> int:
    return save_memory(services, name, content).position


def test_a_hundred_racing_pairs_at_the_same_expected_version_have_one_winner_each(any_services: Services) -> None:
    store = any_services.store
    outcomes: list[str] = []
    record = threading.Lock()

    def append(index: int, barrier: threading.Barrier) -> None:
        memory = Memory(f"id{index}", f"m{index}", "d", "general", "global", "", "c", "2026-01-01T00:00:00",
                        "2026-01-01T00:00:00")
        barrier.wait()
        try:
            store.append(memory_stream_id(f"m{index}", "global", ""), 0, [MemorySaved(memory)], EventMetadata())
            result = "won"
        except ConcurrencyConflict:
            result = "lost"
        with record:
            outcomes.append(result)

    for index in range(100):
        barrier = threading.Barrier(2)
        pair = [threading.Thread(target=append, args=(index, barrier)) for _ in range(2)]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join()
    assert outcomes.count("won") == 100 and outcomes.count("lost") == 100
    assert len(list(store.iter_all())) == 100


@pytest.fixture
def queued(built_postgres: Callable[..., Services], redis_url: str) -> Iterator[Services]:
    """Services that project through the Redis queue, with no worker running yet."""
    services = built_postgres(redis_url)
    jobs.bind(services)
    yield services


def test_a_save_enqueues_one_job_that_a_worker_projects(queued: Services) -> None:
    position = _save(queued, "note")
    _save(queued, "other")  # while a job waits, appends add no second job
    assert present(queued.queue).count == 1
    assert queued.projector.checkpoint("structured_memories") == 0
    run_queued_jobs(queued)
    assert queued.projector.checkpoint("structured_memories") == position + 1
    assert {row["name"] for row in table_rows(queued)} == {"note", "other"}


def test_jobs_delivered_twice_concurrently_sequentially_and_out_of_order_apply_each_event_once(queued: Services) -> None:
    recording = RecordingProjection()
    observed = dataclasses.replace(queued, projector=Projector(queued.database, queued.store, [queued.memory_table, recording]))
    jobs.bind(observed)
    positions = [_save(queued, f"note_{index % 7}", f"v{index}") for index in range(40)]
    for position in (positions[-1], positions[3], positions[-1], positions[0]):  # duplicates, out of order
        present(queued.queue).enqueue_call(jobs.catch_up, args=(position,), result_ttl=0)
    racing = [threading.Thread(target=jobs.catch_up, args=(positions[5],)) for _ in range(4)]
    for thread in racing:
        thread.start()
    run_queued_jobs(queued)
    for thread in racing:
        thread.join()
    jobs.catch_up(positions[-1])
    assert recording.positions == positions  # every event once, in order, whatever the deliveries
    assert rebuild_equals_live(queued)


class Writer(threading.Thread):
    """Keeps saving (creating and updating memories) until stopped."""

    def __init__(self, services: Services) -> None:
        super().__init__(daemon=True)
        self.services = services
        self.stopped = threading.Event()
        self.saved = 0
        self.errors: list[Exception] = []

    def run(self) -> None:
        rng = random.Random(7)
        while not self.stopped.is_set():
            try:
                _save(self.services, f"note_{rng.randrange(300)}", f"content {self.saved}")
                self.saved += 1
            except Exception as error:  # any failure here is a lost write: the test reports it
                self.errors.append(error)


KILLS = int(os.environ.get("MEMORYD_WORKER_KILLS", "8"))  # 20 for the full proof (~1 min on this machine class)


def test_workers_killed_mid_catch_up_again_and_again_leave_the_table_equal_to_a_rebuild(built_postgres: Callable[..., Services],
                                                                                        redis_url: str) -> None:
    services = built_postgres(redis_url)
    for index in range(1_500):  # a backlog, so the first workers die in the middle of a catch-up
        _save(services, f"note_{index % 300}", f"backlog {index}")
    writer = Writer(services)
    writer.start()
    progress = [services.projector.checkpoint("structured_memories")]
    for _ in range(KILLS):
        worker = spawn_worker(services)
        # observed: this worker has committed at least one batch, and the writer keeps a backlog, so it is mid catch-up
        until(lambda: services.projector.checkpoint("structured_memories") > progress[-1], "the worker to project")
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        progress.append(services.projector.checkpoint("structured_memories"))
    writer.stopped.set()
    writer.join()
    assert not writer.errors
    assert progress == sorted(set(progress)), f"every killed worker had moved the checkpoint: {progress}"

    survivor = spawn_worker(services)
    try:
        head = services.store.head_position()
        assert services.projector.wait_for(head, timeout=60)[0]
    finally:
        stop(survivor)
    assert head == 1_500 + writer.saved
    assert rebuild_equals_live(services)
    services.database.dispose()


PrivateRedis = tuple[str, Callable[[], None], Callable[[], None]]  # its URL, start, stop


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A Redis server of the test's own, which the test can stop and start again."""
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    process: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        process.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def listening() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        until(listening, "the private redis-server to start", timeout=10)

    def stop_server() -> None:
        if process[-1].poll() is None:
            process[-1].terminate()
            process[-1].wait()

    start()
    yield f"redis://127.0.0.1:{port}/0", start, stop_server
    stop_server()


def test_with_redis_stopped_writes_still_land_and_projections_catch_up_with_no_manual_step(
        built_postgres: Callable[..., Services], private_redis: PrivateRedis) -> None:
    redis_url, start_redis, stop_redis = private_redis
    services = built_postgres(redis_url)
    worker = spawn_worker(services)
    try:
        first = _save(services, "before_outage")
        assert services.projector.wait_for(first, timeout=20)[0]

        stop_redis()
        during = [_save(services, f"during_outage_{index}") for index in range(30)]
        assert services.projector.wait_for(during[-1], timeout=20)[0], "the worker stopped projecting without Redis"

        start_redis()
        after = _save(services, "after_outage")
        assert services.projector.wait_for(after, timeout=20)[0]
    finally:
        stop(worker)
    names = {row["name"] for row in table_rows(services)}
    assert names == {"before_outage", "after_outage", *(f"during_outage_{index}" for index in range(30))}
    assert rebuild_equals_live(services)


def test_a_worker_waiting_for_redis_to_come_back_stops_when_asked(built_postgres: Callable[..., Services],
                                                                  private_redis: PrivateRedis,
                                                                  tmp_path: Path) -> None:
    redis_url, _, stop_redis = private_redis
    services = built_postgres(redis_url)
    log = tmp_path / "worker.log"
    worker = spawn_worker(services, str(log))
    try:
        _save(services, "before")
        assert services.projector.wait_for(services.store.head_position(), timeout=20)[0]
        stop_redis()
        # observed: the worker has lost Redis and waits between its retries, in RQ's loop (RQ says so) or in
        # ours around it, when RQ lost it outside its dequeue (ours says so on each retry: the second line
        # proves our own stop handlers are installed)
        def waiting_for_redis() -> bool:
            text = log.read_text(errors="replace")
            return "could not connect to Redis" in text or text.count("lost Redis") >= 2

        until(waiting_for_redis, "the worker to lose Redis")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
