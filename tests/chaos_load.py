"""Concurrent SDK clients saving, reading back and searching while a deployment is broken, and what they saw.

Each client is the Python SDK as an application uses it: every save carries an ``Idempotency-Key`` the SDK
chooses (and keeps across its retries), reads carry the client's position. A save is acknowledged when the
SDK returned it; every memory name is used once, so the log must hold each acknowledged name exactly once.
Raw HTTP statuses come from an httpx response hook: they include the answers the SDK retried.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from memoryd_sdk import MemorydServer


@dataclass(frozen=True)
class PhaseFigures:
    """One phase of a run as the clients saw it."""

    name: str
    seconds: float
    operations: int
    p50_ms: float
    client_errors: int  # calls the SDK gave up on (raised to its caller)
    server_errors: int  # raw 5xx answers, retried or not

    @property
    def per_second(self) -> float:
        return self.operations / self.seconds if self.seconds else 0.0

    def row(self) -> str:
        return (f"| {self.name} | {self.seconds:.0f} | {self.per_second:.1f} | {self.p50_ms:.0f} | "
                f"{self.client_errors} | {self.server_errors} |")


TABLE_HEADER = "| phase | seconds | ops/s | p50 ms | client errors | 5xx |\n|---|---|---|---|---|---|"


@dataclass
class Load:
    """``clients`` threads calling memoryd at ``base_url`` until ``stop``."""

    base_url: str
    token: str
    clients: int
    operations: list[tuple[float, float]] = field(default_factory=list)  # (ended at, seconds taken)
    errors: list[tuple[float, str]] = field(default_factory=list)  # (at, what the SDK raised)
    statuses: list[tuple[float, int]] = field(default_factory=list)  # (at, raw HTTP status)
    acknowledged: set[str] = field(default_factory=set)
    attempted: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._client, args=(index,), daemon=True)
                         for index in range(self.clients)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in self._threads), "a client did not stop"

    def _timed(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
        """Make one SDK call, recording how long it took or what it raised; whether it succeeded."""
        started = time.monotonic()
        try:
            call(*args, **kwargs)
        except Exception as error:  # whatever the SDK raised is what its caller would have seen
            self.errors.append((time.monotonic(), f"{type(error).__name__}: {error}"[:300]))
            return False
        ended = time.monotonic()
        self.operations.append((ended, ended - started))
        return True

    def _client(self, index: int) -> None:
        hooks = {"response": [lambda response: self.statuses.append((time.monotonic(), response.status_code))]}
        with httpx.Client(timeout=30, event_hooks=hooks) as http, \
                MemorydServer(self.base_url, token=self.token, httpx_client=http) as sdk:
            count = 0
            while not self._stop.is_set():
                name = f"c{index}_{count}"
                count += 1
                self.attempted.add(name)
                if self._timed(sdk.save_memory, name, f"fact {count} of client {index}", description="chaos"):
                    self.acknowledged.add(name)
                    self._timed(sdk.get_memory, name)
                self._timed(sdk.search_memories, f"client {index}", limit=5)

    def figures(self, name: str, start: float, end: float) -> PhaseFigures:
        """What the clients saw between ``start`` and ``end`` (``time.monotonic()`` readings)."""
        latencies = [taken for ended, taken in self.operations if start <= ended < end]
        return PhaseFigures(name, end - start, len(latencies),
                            statistics.median(latencies) * 1000 if latencies else 0.0,
                            sum(start <= at < end for at, _ in self.errors),
                            sum(start <= at < end and status >= 500 for at, status in self.statuses))

    def server_errors_outside(self, windows: list[tuple[float, float]]) -> list[tuple[float, int]]:
        """The raw 5xx answers outside every one of ``windows``."""
        return [(at, status) for at, status in self.statuses
                if status >= 500 and not any(start <= at < end for start, end in windows)]
