"""``memoryd worker``: an RQ worker plus a periodic catch-up from the log.

The RQ worker runs catch-up jobs as they are enqueued. Beside it a thread
catches up on a fixed interval, whether or not jobs arrive, so a lost job,
a worker killed mid-job or Redis being down delays projection by at most one
interval and never loses an event. While Redis does not answer, the thread catches up every
``OUTAGE_INTERVAL_SECONDS`` instead: no job will come, and an API process leaves to the workers what its
own step could not project. The same thread stores a fresh search
index snapshot whenever the log has moved ``search.snapshot_every`` events
past the last one, so API processes start without replaying the whole log. With the semantic channel on, the
worker also embeds: its vectors projection catches up in a thread of its own (``projections.vector_catch_up``).
Any number of workers may run: catch-ups
of one projection queue on its checkpoint row, so none applies an event twice.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq import SimpleWorker

from memoryd.app.services import Services
from workers import jobs

log = logging.getLogger(__name__)
REDIS_RETRY_SECONDS = 2.0
OUTAGE_INTERVAL_SECONDS = 0.1


class PeriodicCatchUp(threading.Thread):
    def __init__(self, services: Services, interval: float) -> None:
        super().__init__(name="memoryd-catch-up", daemon=True)
        self.services = services
        self.interval = interval
        self.snapshot_every = services.config.search.snapshot_every
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self._next_interval()):
            try:
                self.services.projector.catch_up()
                self.services.idempotency.purge_expired()
                search = self.services.search
                if self.services.store.head_position() - search.snapshot_position() >= self.snapshot_every:
                    search.save_snapshot()
            except Exception:
                log.exception("periodic catch-up failed; retrying in %.1f s", self.interval)


    def _next_interval(self) -> float:
        """The configured interval, or a short one while the queue does not answer (checked once per run)."""
        health = self.services.queue_health
        if health is None or health.check():
            return self.interval
        return min(self.interval, OUTAGE_INTERVAL_SECONDS)


class _StoppableWorker(SimpleWorker):
    """Remembers a stop request beyond its own life, so a retry loop around it ends too. Reconnects to
    Redis every ``REDIS_RETRY_SECONDS`` at most (RQ's own back-off grows to a minute), so jobs flow again
    soon after an outage."""

    max_connection_wait_time = REDIS_RETRY_SECONDS

    def __init__(self, *args: Any, stopping: threading.Event, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stopping = stopping

    def request_stop(self, signum: Any, frame: Any) -> None:
        self.stopping.set()
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]  # rq leaves it unannotated


def run_worker(services: Services, *, burst: bool = False) -> None:
    if services.redis is None or services.queue is None:
        raise RuntimeError("memoryd worker needs Redis: set MEMORYD_REDIS_URL or [workers] redis_url")
    jobs.bind(services)
    # A connection pool of the worker's own: RQ raises its socket timeout above the blocking dequeue's, but only
    # for connections made after it does; the queue-health pings' short-timeout connections would otherwise serve
    # the dequeue, time out every two seconds and leave the worker deaf while it reconnects.
    listening = Redis.from_url(services.config.workers.redis_url, socket_connect_timeout=1)
    periodic = PeriodicCatchUp(services, services.config.workers.catch_up_interval_ms / 1000)
    periodic.start()
    if services.vectors is not None:  # with workers, the API processes leave the embeddings to them
        services.vectors.start()
    try:
        services.projector.catch_up()
        stopping = threading.Event()
        while not stopping.is_set():
            try:
                worker = _StoppableWorker([services.queue], connection=listening,
                                          serializer=services.queue.serializer, stopping=stopping)
                worker.work(burst=burst, with_scheduler=False)
                return  # a burst finished, or a requested (warm) shutdown
            except RedisError as error:  # the periodic catch-up keeps projecting meanwhile
                log.warning("lost Redis (%s); retrying in %.0f s", error, REDIS_RETRY_SECONDS)
            # Between RQ workers, a stop request is ours to honour (RQ's handlers left with its worker).
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stopping.set())
            stopping.wait(REDIS_RETRY_SECONDS)
    finally:
        periodic.stopped.set()
        if services.vectors is not None:
            services.vectors.stop()
        listening.close()
