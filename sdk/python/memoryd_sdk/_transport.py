"""HTTP for both clients: auth, retries with backoff, idempotency keys, read-your-writes positions, errors.

Retried: connection errors and timeouts, 408, 429, 502, 503 and 504, and a 409
``request_in_progress`` (the call's key is held by its own earlier attempt,
still running or just orphaned). An answer with ``Retry-After`` (memoryd's for
a database restarting or a key in use) is retried after that wait, as often as
``retry_deadline`` (seconds from the call's start) allows; the others at most
``max_retries`` times, 0.5 s doubling with jitter, capped at 8 s, within the
deadline too. Every write carries an ``Idempotency-Key`` chosen once per call,
so a retried write is applied at most once (memoryd replays the first
answer). The highest ``X-Memory-Position``
any answer carried is sent as ``X-Min-Position`` on reads, so a read through
another server process waits until it can see this client's writes.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar, cast

import httpx

from memoryd_sdk import errors, models
from memoryd_sdk._calls import Call

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
IN_PROGRESS = "request_in_progress"  # a 409's code: the key's first attempt has not answered yet
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BACKOFF, BACKOFF_CAP = 0.5, 8.0
TokenFactory = Callable[[], str]
T = TypeVar("T")


class Positions:
    """The highest log position this client (and the sessions it opened) has been answered."""

    def __init__(self) -> None:
        self._highest = 0
        self._lock = threading.Lock()

    @property
    def highest(self) -> int:
        return self._highest

    def saw(self, position: int) -> None:
        with self._lock:
            self._highest = max(self._highest, position)


class Retries:
    """One call's retries: how many of the counted kind it has made, and when it must stop."""

    def __init__(self, limit: int, deadline: float) -> None:
        self.limit, self.counted = limit, 0
        self.ends = time.monotonic() + deadline

    def wait(self, response: httpx.Response | None) -> float | None:
        """Seconds to wait before trying again after ``response`` (None: the connection failed), or None to stop."""
        if self.limit == 0 or (response is not None and not _retryable(response)):
            return None
        told = _told_wait(response)
        if told is None and self.counted >= self.limit:
            return None
        wait = told if told is not None else float(min(BACKOFF * 2**self.counted, BACKOFF_CAP) * (0.5 + random.random() / 2))
        if time.monotonic() + wait >= self.ends:  # no attempt starts at the deadline or after it
            return None
        self.counted += told is None
        return wait


def _retryable(response: httpx.Response) -> bool:
    if response.status_code == 409:
        return _code(response) == IN_PROGRESS
    return response.status_code in RETRY_STATUSES


def _told_wait(response: httpx.Response | None) -> float | None:
    told = response.headers.get("Retry-After") if response is not None else None
    return min(float(told), BACKOFF_CAP) if told is not None and told.strip().isdigit() else None


def _code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("code") if isinstance(body, dict) else None


class Core:
    """What both transports decide the same way; the subclasses only send."""

    def __init__(self, base_url: str, token: str = "", token_factory: TokenFactory | None = None,
                 max_retries: int = 2, retry_deadline: float = 30.0, read_your_writes: bool = True,
                 positions: Positions | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token, self.token_factory, self.max_retries = token, token_factory, max_retries
        self.retry_deadline = retry_deadline
        self.read_your_writes = read_your_writes
        self.positions = positions or Positions()

    def request(self, client: httpx.Client | httpx.AsyncClient, call: Call[Any], key: str | None) -> httpx.Request:
        token = self.token_factory() if self.token_factory is not None else self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if key is not None:
            headers["Idempotency-Key"] = key
        if call.if_match is not None:
            headers["If-Match"] = f'"{call.if_match}"'
        if call.read and self.read_your_writes and self.positions.highest:
            headers["X-Min-Position"] = str(self.positions.highest)
        extensions = {"timeout": httpx.Timeout(call.timeout).as_dict()} if call.timeout is not None else None
        return client.build_request(call.method, self.base_url + call.path, params=call.params or None,
                                    json=call.json, headers=headers, extensions=extensions)

    def options(self, token: str) -> dict[str, Any]:
        """This transport's settings for another token (a session's), sharing its positions."""
        return {"base_url": self.base_url, "token": token, "max_retries": self.max_retries,
                "retry_deadline": self.retry_deadline, "read_your_writes": self.read_your_writes,
                "positions": self.positions}

    def retries(self, call: Call[Any]) -> Retries:
        return Retries(self.max_retries if call.retries is None else call.retries, self.retry_deadline)

    def outcome(self, call: Call[T], response: httpx.Response) -> T:
        """The answer as its model (or plain JSON); an ``MemorydAPIError`` for an error status."""
        try:
            body = response.json() if response.content else None
        except json.JSONDecodeError:
            body = None
        if response.status_code >= 400:
            raise errors.api_error(response.status_code, body, response.text)
        position = response.headers.get("X-Memory-Position")
        if position is not None and position.isdigit():
            self.positions.saw(int(position))
        if call.model is None:
            return cast(T, body)
        parsed = cast(models.Model, call.model).model_validate(body)
        if position is not None and position.isdigit() and "position" in type(parsed).model_fields:
            parsed.position = int(position)  # type: ignore[attr-defined]  # the models that carry one
        return cast(T, parsed)

    @staticmethod
    def key_for(call: Call[Any]) -> str | None:
        """Every POST, PUT, PATCH and DELETE carries an Idempotency-Key, the same on each of its retries."""
        if call.key is not None:
            return call.key
        return f"sdk-{uuid.uuid4().hex}" if call.method in WRITES else None

    @staticmethod
    def failure(error: httpx.TransportError) -> errors.APIConnectionError:
        if isinstance(error, httpx.TimeoutException):
            return errors.APITimeoutError(f"memoryd did not answer in time: {error}")
        return errors.APIConnectionError(f"memoryd could not be reached: {error}")


def client_options(timeout: float, ca_cert: str | None, client_cert: str | None,
                   client_key: str | None) -> dict[str, Any]:
    """The httpx client settings of the reference SDK (timeout, TLS, redirects)."""
    cert = (client_cert, client_key) if client_cert and client_key else client_cert
    return {"timeout": timeout, "verify": ca_cert or True, "cert": cert, "follow_redirects": True}


class SyncTransport(Core):
    def __init__(self, client: httpx.Client, owned: bool, **options: Any) -> None:
        super().__init__(**options)
        self.client, self.owned = client, owned

    def send(self, call: Call[T]) -> T:
        key = self.key_for(call)
        retries = self.retries(call)
        while True:
            response: httpx.Response | None = None
            try:
                response = self.client.send(self.request(self.client, call, key))
            except httpx.TransportError as error:
                if (wait := retries.wait(None)) is None:
                    raise self.failure(error) from error
            else:
                if (wait := retries.wait(response)) is None:
                    return self.outcome(call, response)
            time.sleep(wait)

    def close(self) -> None:
        if self.owned:
            self.client.close()


class AsyncTransport(Core):
    def __init__(self, client: httpx.AsyncClient, owned: bool, **options: Any) -> None:
        super().__init__(**options)
        self.client, self.owned = client, owned

    async def send(self, call: Call[T]) -> T:
        key = self.key_for(call)
        retries = self.retries(call)
        while True:
            response: httpx.Response | None = None
            try:
                response = await self.client.send(self.request(self.client, call, key))
            except httpx.TransportError as error:
                if (wait := retries.wait(None)) is None:
                    raise self.failure(error) from error
            else:
                if (wait := retries.wait(response)) is None:
                    return self.outcome(call, response)
            await asyncio.sleep(wait)

    async def close(self) -> None:
        if self.owned:
            await self.client.aclose()
