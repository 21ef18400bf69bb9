"""Dispatchers decide where projections run after an append."""

from __future__ import annotations

import logging

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue

from projections.projector import Projector

log = logging.getLogger(__name__)
PENDING_TTL_SECONDS = 60
CATCH_UP_JOB = "workers.jobs.catch_up"  # enqueued by name: the writer never imports the job's code


def pending_key(queue_name: str) -> str:
    """Set while a catch-up job waits in the queue, so appends don't pile up duplicates."""
    return f"memoryd:{queue_name}:catch-up-pending"


class InProcessDispatcher:
    """Catch up right away, in the writer's own transaction (the embedded default).

    The projection runs in savepoints of the command's transaction, so the
    event and its projection commit together; a failing projection must not
    turn a successful write into an error: its savepoint rolls back, the
    append still commits, it is logged loudly, and the next catch-up (or
    ``memoryd projections rebuild``) retries.
    """

    def __init__(self, projector: Projector) -> None:
        self.projector = projector

    def appending(self, position: int) -> None:
        try:
            self.projector.catch_up()
        except Exception:
            log.exception("projection failed after appending position %d; the read model is behind the log", position)

    def appended(self, position: int) -> None:
        """Already projected, inside the command's transaction."""


class RedisDispatcher:
    """Enqueue a catch-up job for the workers, at most one waiting at a time.

    With Redis down the write still stands (it is in the log): the failure is
    logged and the workers' periodic catch-up projects the event anyway.
    """

    def __init__(self, redis: Redis, queue: Queue) -> None:
        self.redis = redis
        self.queue = queue

    def appending(self, position: int) -> None:
        """Nothing yet: a job enqueued before the commit could run before the event is visible."""

    def appended(self, position: int) -> None:
        try:
            if self.redis.set(pending_key(self.queue.name), position, nx=True, ex=PENDING_TTL_SECONDS):
                self.queue.enqueue_call(CATCH_UP_JOB, args=(position,), result_ttl=0, failure_ttl=7 * 86_400,
                                        description=f"catch up projections (append at {position})")
        except RedisError as error:
            log.warning("could not enqueue a catch-up for position %d (%s); workers will catch up on their own",
                        position, error)
