"""RQ job functions: thin, JSON-serialisable arguments, safe to run twice.

A job is only a hint that the log moved; the log, not the queue, is the
source of truth. So every job does the same idempotent thing, whatever
position it names and in whatever order jobs arrive: catch every projection
up to the head of the log.
"""

from __future__ import annotations

import logging

from memoryd.bootstrap import Services, build_services
from memoryd.config import load_config

log = logging.getLogger(__name__)
_services: Services | None = None


def bind(services: Services) -> None:
    """Use these services for jobs run in this process (``memoryd worker`` binds its own)."""
    global _services
    _services = services


def pending_key(queue_name: str) -> str:
    """Set while a catch-up job waits in the queue, so appends don't pile up duplicates."""
    return f"memoryd:{queue_name}:catch-up-pending"


def catch_up(position: int) -> int:
    """Project everything up to the head; ``position`` is the append that asked."""
    services = _bound()
    if services.redis is not None and services.queue is not None:
        services.redis.delete(pending_key(services.queue.name))  # appends from now on enqueue a fresh job
    reached = services.projector.catch_up()
    log.info("caught up to position %d (asked for %d)", reached, position)
    return reached


def _bound() -> Services:
    global _services
    if _services is None:  # a plain `rq worker` process: build from the environment's config
        _services = build_services(load_config())
    return _services
