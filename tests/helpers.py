"""Small test utilities shared by several test modules."""

from __future__ import annotations

import signal
import socket
from typing import Any

from rq import SimpleWorker
from sqlalchemy import select

from memoryd.app.services import Services
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
