"""The embedded default's dispatcher: projections run in the writer's own process, most often in its own
transaction (``workers.redis_dispatch`` hands what this cannot do to the workers)."""

from __future__ import annotations

import logging

from events.transaction import AppendTransaction
from projections.projector import Projector

log = logging.getLogger(__name__)


class InProcessDispatcher:
    """Catch up right away, in the writer's own transaction (the embedded default).

    Inside the command's transaction the projections take one short step, from
    the events in hand, only if nobody else holds their checkpoints: then the
    event and its projection commit together. Anything more (a backlog, a
    rebuild or another catch-up holding a checkpoint) is left to a catch-up
    after the commit, so a command never holds the log's append lock while it
    waits or replays. A projection that fails in the step rolls the command
    back, and the bus runs it again without the step: a failing projection
    must not turn a write into an error. It is logged loudly, and the catch-up
    after the commit (or ``memoryd projections rebuild``) retries.
    """

    def __init__(self, projector: Projector) -> None:
        self.projector = projector

    def appending(self, tx: AppendTransaction, position: int) -> bool:
        return self.projector.step(tx, position)

    def appended(self, position: int, projected: bool) -> None:
        if projected:
            return
        try:
            self.projector.catch_up()
        except Exception:
            log.exception("projection failed after appending position %d; the read model is behind the log", position)

    def settled(self, position: int) -> bool:
        """Checked once: the catch-up after the commit has run (or failed) by now."""
        return self.projector.wait_for(position, 0)[0]
