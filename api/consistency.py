"""Read-your-writes across processes: log positions in, bounded waits out.

Writes report the position of their event (``X-Memory-Position``) and wait,
bounded, until it is projected; past the bound they still answer, with
``X-Projection-Pending: true``. Reads may name a minimum position
(``X-Min-Position`` or ``min_position``) and wait, bounded, until the read
model has reached it; past the bound they answer 503.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from flask import request
from sqlalchemy.exc import SQLAlchemyError

from api.context import services
from memoryd.errors import MemorydError, ValidationError

log = logging.getLogger(__name__)
MIN_POSITION_HEADER = "X-Min-Position"
PENDING_HEADER = "X-Projection-Pending"
F = TypeVar("F", bound=Callable[..., Any])


class NotCaughtUp(MemorydError):
    status = 503


def after_position(view: F) -> F:
    """Let a read wait until the read model has reached the caller's minimum position."""

    @wraps(view)
    def waiting(*args: Any, **kwargs: Any) -> Any:
        wanted = _min_position()
        if wanted:
            reached_it, reached = services().projector.wait_for(wanted, services().config.server.read_wait_ms / 1000)
            if not reached_it:
                raise NotCaughtUp(f"the read model has reached position {reached}, not {wanted} yet; retry shortly")
        return view(*args, **kwargs)

    return cast(F, waiting)


def settle(position: int) -> bool:
    """Wait (bounded) for a write's own event to be projected; False if still pending.

    In-process projection has already run (or failed) by now, so it is checked
    once; with workers the write waits up to ``server.write_wait_ms``. The write is
    durable either way, so a read-model failure here only marks it pending.
    """
    wait = services().config.server.write_wait_ms / 1000 if services().redis is not None else 0.0
    try:
        projected, _ = services().projector.wait_for(position, wait)
    except SQLAlchemyError:
        log.exception("could not check whether position %d is projected", position)
        return False
    return projected


def _min_position() -> int:
    raw = request.headers.get(MIN_POSITION_HEADER) or request.args.get("min_position") or ""
    if not raw:
        return 0
    if not re.fullmatch(r"\d{1,18}", raw.strip()):
        raise ValidationError("min_position must be a log position (a whole number, 0 or more)")
    return int(raw)
