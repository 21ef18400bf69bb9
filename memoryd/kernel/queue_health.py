"""Whether the worker queue (Redis) answers, as one process last found it.

A failure is remembered for ``RECHECK_SECONDS``: meanwhile writes do not try
Redis again (each try could cost a connection timeout) and project in their own
process instead, and ``/readyz`` and ``/metrics`` report the queue degraded.
After that the next use or probe tries again, and the first success ends the
degraded mode. The writer's own step never needs Redis, so the probes ping it
themselves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
RECHECK_SECONDS = 2.0


class QueueHealth:
    def __init__(self, ping: Callable[[], object], recheck_seconds: float = RECHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ping = ping
        self._recheck = recheck_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._retry_at = 0.0

    def known_down(self) -> bool:
        """Down when last tried, and too recently to try again."""
        return self._down_since is not None and self._clock() < self._retry_at

    def degraded(self) -> bool:
        """Down when last tried (however long ago)."""
        return self._down_since is not None

    def failed(self, error: Exception) -> None:
        with self._lock:
            if self._down_since is None:
                self._down_since = self._clock()
                log.warning("the worker queue (Redis) does not answer (%s): degraded until it does",
                            type(error).__name__)
            self._retry_at = self._clock() + self._recheck

    def succeeded(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is not None:
                log.warning("the worker queue (Redis) answers again after %.1f s", self._clock() - self._down_since)
                self._down_since = None

    def check(self) -> bool:
        """Up? Pings the queue unless it is ``known_down``; records what it found."""
        if self.known_down():
            return False
        try:
            self._ping()
        except Exception as error:  # whatever the client raises, the queue is not serving
            self.failed(error)
            return False
        self.succeeded()
        return True
