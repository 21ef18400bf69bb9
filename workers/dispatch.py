"""Dispatchers decide where projections run after an append."""

from __future__ import annotations

import logging

from projections.projector import Projector

log = logging.getLogger(__name__)


class InProcessDispatcher:
    """Catch up right away, in the writer's own process (the embedded default).

    The event is already durable in the log when this runs, so a failing
    projection must not turn a successful write into an error: it is logged
    loudly and the next catch-up (or ``memoryd projections rebuild``) retries.
    """

    def __init__(self, projector: Projector) -> None:
        self.projector = projector

    def appended(self, position: int) -> None:
        try:
            self.projector.catch_up()
        except Exception:
            log.exception("projection failed after appending position %d; the read model is behind the log", position)
