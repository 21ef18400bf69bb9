"""Projections with workers: the writer's own step first, a catch-up job on the Redis queue for the rest.

A save projects its own events inside its transaction whenever it can, as the
embedded mode does (``InProcessDispatcher``): one conditional ``UPDATE`` of the
checkpoints and the rows, sent with statements the save makes anyway. Handing
that to a worker cost a save four times its own time (an RQ job's round trips
in Redis, a worker's transaction reading the events back, the writer polling
the checkpoint) and held the writer's thread all along (docs/benchmarks.md,
"Production throughput"). What the step cannot take (a backlog, a checkpoint
another catch-up holds, a projection stopped on an event) goes to the workers
as a job. With Redis unreachable, that too is caught up in this process, and
the failure is remembered (``QueueHealth``) so later writes do not each pay a
connection timeout: a Redis outage costs neither an error nor a wait.
"""

from __future__ import annotations

import logging

from redis import Redis
from redis.exceptions import RedisError
from rq import Queue

from events.transaction import AppendTransaction
from memoryd.kernel.queue_health import QueueHealth
from projections.dispatch import InProcessDispatcher
from projections.projector import Projector

log = logging.getLogger(__name__)
# A catch-up job waits in the queue at most once: the key says one does. The job deletes it when it starts; a
# worker killed between taking the job and deleting the key holds new jobs back until the key expires.
PENDING_TTL_SECONDS = 5
CATCH_UP_JOB = "workers.jobs.catch_up"  # enqueued by name: the writer never imports the job's code


def pending_key(queue_name: str) -> str:
    """Set while a catch-up job waits in the queue, so appends don't pile up duplicates."""
    return f"memoryd:{queue_name}:catch-up-pending"


class RedisDispatcher:
    """The step in process; otherwise a catch-up job for the workers, at most one waiting at a time."""

    def __init__(self, redis: Redis, queue: Queue, projector: Projector, health: QueueHealth,
                 write_wait_seconds: float) -> None:
        self.redis = redis
        self.queue = queue
        self.health = health
        self.projector = projector
        self.write_wait_seconds = write_wait_seconds  # how long a write handed to the workers waits for them
        self.in_process = InProcessDispatcher(projector)

    def appending(self, tx: AppendTransaction, position: int) -> bool:
        return self.in_process.appending(tx, position)

    def appended(self, position: int, projected: bool) -> None:
        if projected:
            return
        if not self.health.known_down():
            try:
                if self.redis.set(pending_key(self.queue.name), position, nx=True, ex=PENDING_TTL_SECONDS):
                    self.queue.enqueue_call(CATCH_UP_JOB, args=(position,), result_ttl=0, failure_ttl=7 * 86_400,
                                            description=f"catch up projections (append at {position})")
                self.health.succeeded()
                return
            except RedisError as error:
                log.warning("could not enqueue a catch-up for position %d (%s); catching up in this process",
                            position, error)
                self.health.failed(error)
        self.in_process.appended(position, projected)

    def settled(self, position: int) -> bool:
        """A write handed to the workers waits for them, up to ``server.write_wait_ms``; with the queue
        unreachable nothing was handed over (the write caught up here), so it is checked once."""
        wait = 0.0 if self.health.degraded() else self.write_wait_seconds
        return self.projector.wait_for(position, wait)[0]
