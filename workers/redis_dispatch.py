"""Projections run by the workers: after an append, a catch-up job goes on the Redis queue."""

from __future__ import annotations

import logging

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue

from events.transaction import AppendTransaction
from workers.dispatch import CATCH_UP_JOB, PENDING_TTL_SECONDS, pending_key

log = logging.getLogger(__name__)


class RedisDispatcher:
    """Enqueue a catch-up job for the workers, at most one waiting at a time.

    With Redis down the write still stands (it is in the log): the failure is
    logged and the workers' periodic catch-up projects the event anyway.
    """

    def __init__(self, redis: Redis, queue: Queue) -> None:
        self.redis = redis
        self.queue = queue

    def appending(self, tx: AppendTransaction, position: int) -> bool:
        """Nothing yet: a job enqueued before the commit could run before the event is visible."""
        return False

    def appended(self, position: int, projected: bool) -> None:
        try:
            if self.redis.set(pending_key(self.queue.name), position, nx=True, ex=PENDING_TTL_SECONDS):
                self.queue.enqueue_call(CATCH_UP_JOB, args=(position,), result_ttl=0, failure_ttl=7 * 86_400,
                                        description=f"catch up projections (append at {position})")
        except RedisError as error:
            log.warning("could not enqueue a catch-up for position %d (%s); workers will catch up on their own",
                        position, error)
