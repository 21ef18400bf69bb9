"""Read-your-writes across processes: log positions in, bounded waits out.

Writes report the position of their event (``X-Memory-Position``) and wait,
bounded, until it is projected; past the bound they still answer, with
``X-Projection-Pending: true`` (and ``X-Projection-Stopped`` when a projection
is stopped on an event before theirs). Reads may name a minimum position
(``X-Min-Position`` or ``min_position``) and wait, bounded, until the read
model has reached it; past the bound they answer 503. A position beyond the
head of the log can never be reached and is a 400 at once. At most half the
server's threads wait at a time, so waiting reads cannot starve health
probes and other requests: past that, a read that would wait is a 503 at once.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar, cast

from flask import current_app, request
from sqlalchemy.exc import SQLAlchemyError

from api.context import services
from memoryd.kernel.errors import MemorydError, ValidationError

log = logging.getLogger(__name__)
MIN_POSITION_HEADER = "X-Min-Position"
PENDING_HEADER = "X-Projection-Pending"
STOPPED_HEADER = "X-Projection-Stopped"
F = TypeVar("F", bound=Callable[..., Any])


class NotCaughtUp(MemorydError):
    status = 503


def after_position(view: F) -> F:
    """Let a read wait until the read model has reached the caller's minimum position."""

    @wraps(view)
    def waiting(*args: Any, **kwargs: Any) -> Any:
        wanted = requested_min_position()
        if wanted:
            _wait_for(wanted)
        return view(*args, **kwargs)

    return cast(F, waiting)


def _wait_for(wanted: int) -> None:
    projector = services().projector
    reached_it, reached = projector.wait_for(wanted, 0)
    if reached_it:
        return
    head = services().store.head_position()
    if wanted > head:
        raise ValidationError(f"min_position {wanted} is beyond the head of the log ({head}); "
                              "use a position a write answered in X-Memory-Position")
    for fault in projector.faults():
        if fault.position <= wanted:
            raise NotCaughtUp(f"the read model cannot reach position {wanted}: {fault.describe()}")
    with waiting_slot(NotCaughtUp(f"the read model has reached position {reached}, not {wanted}, and too many "
                                  "requests are waiting already; retry shortly")):
        reached_it, reached = projector.wait_for(wanted, services().config.server.read_wait_ms / 1000)
    if not reached_it:
        raise NotCaughtUp(f"the read model has reached position {reached}, not {wanted} yet; retry shortly")


@contextmanager
def waiting_slot(refusal: MemorydError) -> Iterator[None]:
    """Hold one of the server's waiting slots while a request waits; ``refusal`` if none is free."""
    waiters: threading.BoundedSemaphore = current_app.extensions["memoryd.waiters"]
    if not waiters.acquire(blocking=False):
        raise refusal
    try:
        yield
    finally:
        waiters.release()


def waiters_for(threads: int) -> threading.BoundedSemaphore:
    """How many requests may wait on the read model at once: half the server's threads."""
    return threading.BoundedSemaphore(max(1, threads // 2))


def stopped_before(position: int) -> str:
    """For a write's answer: the projections stopped on an event at or before ``position``, if any."""
    try:
        faults = services().projector.faults()
    except SQLAlchemyError:
        log.exception("could not read the projections' faults")
        return ""
    return "; ".join(f"{fault.projection} at position {fault.position}" for fault in faults if fault.position <= position)


def settle(position: int, projected: bool = False) -> bool:
    """For a write's answer: whether its own event is projected, as the command bus's dispatcher waits for it
    (``projected``: the outcome says the write's own transaction did it). The write is durable either way, so
    a read-model failure here only marks it pending."""
    try:
        return services().bus.settled(position, projected)
    except SQLAlchemyError:
        log.exception("could not check whether position %d is projected", position)
        return False


def requested_min_position() -> int:
    raw = request.headers.get(MIN_POSITION_HEADER) or request.args.get("min_position") or ""
    if not raw:
        return 0
    if not re.fullmatch(r"\d{1,18}", raw.strip()):
        raise ValidationError("min_position must be a log position (a whole number, 0 or more)")
    return int(raw)
