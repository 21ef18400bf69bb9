"""Group commit: writes that arrive together in one process share a transaction, its append lock and its commit.

On PostgreSQL a commit returns once its WAL is on disk (an fsync: 2 to 4 ms on this project's machine), and
the log's append lock is held until then, so one write at a time pays for a whole fsync and the others queue
behind it. Here the writes that arrive while a transaction runs wait for it, then go together in the next:
the first to arrive leads (it runs the group in its own thread), the others wait for their answers. Alone, a
write runs at once, as before. Each write keeps its own event, metadata, idempotency key and answer; only the
transaction is shared.

A group that fails for any reason (one write refused, a lost race, a database error) runs again one write per
transaction, so every write gets exactly the answer it would have got alone, and nothing of a failed group was
committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

T = TypeVar("T")
R = TypeVar("R")


@dataclass(eq=False)
class _Ticket(Generic[T, R]):
    """One write waiting in line: woken when answered, or when it is its turn to lead."""

    item: T
    woken: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    result: R | None = None
    error: BaseException | None = None

    def answer(self) -> R:
        if self.error is not None:
            raise self.error
        return cast(R, self.result)


class GroupCommit(Generic[T, R]):
    """Runs ``run_group`` on the items submitted while another group ran (at most ``limit``), ``run_one`` on an
    item alone, and on each item of a group that raised."""

    def __init__(self, run_group: Callable[[Sequence[T]], Sequence[R]], run_one: Callable[[T], R],
                 limit: int = 64) -> None:
        self._run_group = run_group
        self._run_one = run_one
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: list[_Ticket[T, R]] = []
        self._leading = False

    @property
    def queued(self) -> int:
        """Writes waiting for a group to start."""
        with self._lock:
            return len(self._waiting)

    def submit(self, item: T) -> R:
        ticket: _Ticket[T, R] = _Ticket(item)
        with self._lock:
            self._waiting.append(ticket)
            leads, self._leading = not self._leading, True
        if not leads:
            ticket.woken.wait()
        if not ticket.done:  # first in line, or handed the lead by the group before
            self._lead()
        return ticket.answer()

    def _lead(self) -> None:
        with self._lock:
            group, self._waiting = self._waiting[:self._limit], self._waiting[self._limit:]
        try:
            self._answer(group)
        finally:
            for ticket in group:
                if not ticket.done:  # only when the leader itself is interrupted
                    ticket.done, ticket.error = True, RuntimeError("the write's group was interrupted")
                ticket.woken.set()
            with self._lock:
                if self._waiting:
                    self._waiting[0].woken.set()  # it leads the next group
                else:
                    self._leading = False

    def _answer(self, group: list[_Ticket[T, R]]) -> None:
        if len(group) > 1:
            try:
                results = self._run_group([ticket.item for ticket in group])
            except Exception:  # each write again, alone: its own answer, refusal or error
                pass
            else:
                for ticket, result in zip(group, results):
                    ticket.done, ticket.result = True, result
                return
        for ticket in group:
            try:
                ticket.result = self._run_one(ticket.item)
            except Exception as error:
                ticket.error = error
            ticket.done = True
