"""Small test utilities shared by several test modules."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from rq import SimpleWorker
from sqlalchemy import Connection, select

from commands.handlers import Outcome
from commands.model import SaveMemory
from events.types import EventMetadata, RecordedEvent
from memoryd.app.services import Services
from memoryd.domain import Namespace
from memoryd.schema import structured_memories


def table_rows(services: Services) -> list[dict[str, Any]]:
    """The whole structured_memories table, in a stable order."""
    with services.database.read() as conn:
        rows = conn.execute(select(structured_memories).order_by(structured_memories.c.memory_id))
        return [dict(row._mapping) for row in rows]


def free_port() -> int:
    """A TCP port on the loopback nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_queued_jobs(services: Services) -> None:
    """What ``memoryd worker --burst`` runs, in this process (rq's signal handlers put back afterwards)."""
    assert services.queue is not None
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        SimpleWorker([services.queue], connection=services.redis, serializer=services.queue.serializer).work(burst=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def rebuild_equals_live(services: Services) -> bool:
    """Throw the read model away, replay the log, and compare with what was live."""
    live = table_rows(services)
    services.projector.rebuild(services.memory_table)
    return table_rows(services) == live


GLOBAL = Namespace("global", "")


def save_memory(services: Services, name: str, content: str = "content", namespace: Namespace = GLOBAL,
                memory_type: str | None = None, surface: str = "cli") -> Outcome:
    """Save through the command bus, as the CLI would (no HTTP in between)."""
    command = SaveMemory(name, content, "description", memory_type, namespace)
    return services.bus.handle(command, EventMetadata(surface=surface))


def names(response: Any) -> list[str]:
    """The names in a list or search answer, in its order (the answer must be a 200)."""
    assert response.status_code == 200, response.json
    return [row["name"] for row in response.json["memories"]]


class RecordingProjection:
    """Remembers every position it is given, in order."""

    name = "recording"

    def __init__(self) -> None:
        self.positions: list[int] = []

    def apply(self, conn: Connection, recorded: RecordedEvent) -> None:
        self.positions.append(recorded.position)

    def reset(self, conn: Connection) -> None:
        self.positions.clear()


def spawn_worker(services: Services, log_path: str | None = None) -> subprocess.Popen[bytes]:
    """``memoryd worker`` on the services' database, Redis and queue; its log to ``log_path`` if given."""
    env = {**os.environ, "MEMORYD_DATABASE_URL": services.config.storage.database_url,
           "MEMORYD_REDIS_URL": services.config.workers.redis_url, "MEMORYD_QUEUE": services.config.workers.queue,
           "MEMORYD_CATCH_UP_INTERVAL_MS": "100"}
    with open(log_path or os.environ.get("MEMORYD_TEST_WORKER_LOG", os.devnull), "ab") as log:  # the child keeps its copy
        return subprocess.Popen([sys.executable, "-m", "memoryd", "worker"], env=env, stdout=log, stderr=log)


def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds (an observed state, not a guess at timing); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def wait_until_serving(url: str, timeout: float = 30.0) -> bool:
    """Poll ``url`` until an HTTP server answers it; False if none did within ``timeout``."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return True
        except OSError:
            time.sleep(0.1)
    return False
