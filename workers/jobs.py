"""RQ job functions: thin, JSON-serialisable arguments, safe to run twice.

A job is only a hint that the log moved; the log, not the queue, is the
source of truth. So every job does the same idempotent thing, whatever
position it names and in whatever order jobs arrive: catch every projection
up to the head of the log.
"""

from __future__ import annotations

import logging

from memoryd.app.services import Services
from workers.redis_dispatch import pending_key

log = logging.getLogger(__name__)
_services: Services | None = None


def bind(services: Services) -> None:
    """Run this process's jobs with these services: ``memoryd worker`` binds its own before it works."""
    global _services
    _services = services


def catch_up(position: int) -> int:
    """Project everything up to the head; ``position`` is the append that asked."""
    services = _bound()
    if services.redis is not None and services.queue is not None:
        services.redis.delete(pending_key(services.queue.name))  # appends from now on enqueue a fresh job
    reached = services.projector.catch_up()
    log.info("caught up to position %d (asked for %d)", reached, position)
    return reached


def _bound() -> Services:
    if _services is None:
        raise RuntimeError("catch-up jobs run inside 'memoryd worker', which binds the services they use")
    return _services
