"""Prometheus metrics at ``/metrics``, for operators (no token needed, like the health probes).

* Requests: a count and a latency histogram per route (the Flask endpoint, so a memory's name
  never becomes a label), method and status.
* Turns: how long ``TurnComposer.compose`` takes, beside the request that carried it.
* Read at each scrape, from the database and this process: the log's head; per projection its
  checkpoint, lag and whether it is stopped on an event; the search index's memories, parts and
  whether it is stopped; with Redis, whether the worker queue answers, its depth and failed jobs.

Several API processes (gunicorn) add up their counts through prometheus-client's multiprocess
mode: give them an empty ``PROMETHEUS_MULTIPROC_DIR`` before they start (README, Metrics).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError

from memoryd.app.services import Services

log = logging.getLogger(__name__)
CONTENT_TYPE = CONTENT_TYPE_LATEST
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TURN_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class Metrics:
    """One app's instruments, and the exposition of them with the state read at scrape time."""

    def __init__(self, services: Services) -> None:
        self.registry = CollectorRegistry()  # an app's own: tests build many apps in one process
        self.requests = Counter("memoryd_http_requests", "HTTP requests answered, by route, method and status.",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("memoryd_http_request_duration_seconds", "Time to answer an HTTP request.",
                                 ["route", "method"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.auth_failures = Counter("memoryd_auth_failures", "Requests refused at authentication, by reason (missing, "
                                     "invalid token, token revoked, token expired, user deactivated, session closed).",
                                     ["reason"], registry=self.registry)
        self.turns = Histogram("memoryd_turn_compose_duration_seconds", "Time to compose a turn (in process).",
                               buckets=TURN_BUCKETS, registry=self.registry)
        self._state = ServiceState(services)
        self.registry.register(self._state)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)

    def exposition(self) -> bytes:
        """The text format; in multiprocess mode the counts of every process, with this one's reading of the state."""
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return generate_latest(self.registry)
        shared = CollectorRegistry()
        MultiProcessCollector(shared)  # type: ignore[no-untyped-call]
        shared.register(self._state)
        return generate_latest(shared)


class ServiceState(Collector):
    """Gauges read when scraped: nothing to keep in step; of the search index only its shape (a brief lock),
    never a catch-up."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("memoryd_database_up", "Whether the last scrape could read the database.")
        try:
            yield from self._log_and_projections()
            up.add_metric([], 1)
        except SQLAlchemyError as error:
            log.warning("metrics: database unreadable: %s", type(error).__name__)
            up.add_metric([], 0)
        yield up
        yield from self._search()
        yield from self._queue()

    def _log_and_projections(self) -> Iterator[Metric]:
        projector = self.services.projector
        head = self.services.store.head_position()
        stopped = {fault.projection for fault in projector.faults(everywhere=True)}
        checkpoint = GaugeMetricFamily("memoryd_projection_checkpoint", "The log position a projection has applied.",
                                       labels=["projection"])
        lag = GaugeMetricFamily("memoryd_projection_lag_events", "Events in the log a projection has not applied.",
                                labels=["projection"])
        stalled = GaugeMetricFamily("memoryd_projection_stalled", "1 if a projection is stopped on an event it cannot "
                                    "apply (see /readyz and memoryd status).", labels=["projection"])
        for name in self.services.checkpointed:
            at = projector.checkpoint(name)
            checkpoint.add_metric([name], at)
            lag.add_metric([name], head - at)
            stalled.add_metric([name], int(name in stopped))
        yield GaugeMetricFamily("memoryd_log_head_position", "The position of the newest event in the log.", value=head)
        yield from (checkpoint, lag, stalled)

    def _search(self) -> Iterator[Metric]:
        search = self.services.search
        shape = search.shape()  # None until this process loads its index
        yield GaugeMetricFamily("memoryd_search_index_memories", "Memories in this process's search index.",
                                value=shape.memories if shape else 0)
        yield GaugeMetricFamily("memoryd_search_index_parts", "Parts (segments and deltas) of this process's index.",
                                value=shape.parts if shape else 0)
        yield GaugeMetricFamily("memoryd_search_index_position", "The log position this process's index has applied.",
                                value=search.position())
        yield GaugeMetricFamily("memoryd_search_index_stalled", "1 if this process's index is stopped on an event.",
                                value=int(search.fault is not None))

    def _queue(self) -> Iterator[Metric]:
        queue, health = self.services.queue, self.services.queue_health
        if queue is None or health is None:  # projections run in process: no queue to watch
            return
        up = health.check()
        yield GaugeMetricFamily("memoryd_queue_up", "1 while the worker queue (Redis) answers; 0 while it does not and "
                                "writes project in the API process (degraded, as /readyz says).", value=int(up))
        if not up:
            return
        from rq import Worker  # only with a queue, as bootstrap imports it: rq is a tenth of a second of a start

        depth = GaugeMetricFamily("memoryd_queue_jobs", "Projection jobs waiting in the worker queue.")
        failed = GaugeMetricFamily("memoryd_queue_failed_jobs", "Jobs in the worker queue's failed registry.")
        workers = GaugeMetricFamily("memoryd_queue_workers", "memoryd workers listening on the queue (none: jobs wait).")
        try:
            depth.add_metric([], queue.count)
            failed.add_metric([], queue.failed_job_registry.count)
            workers.add_metric([], Worker.count(queue=queue))
        except Exception as error:  # Redis down: the log still takes writes, and the scrape still answers
            log.warning("metrics: queue unreadable: %s", type(error).__name__)
            return
        yield from (depth, failed, workers)
