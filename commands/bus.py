"""The command bus: one table from each command to its handler; then tell the projections."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar, cast, overload

from sqlalchemy import Connection

from commands.erasure import EraseMemories, ErasureOutcome, erase_memories
from commands.group_commit import GroupCommit
from commands.handlers import (
    Dependencies,
    Outcome,
    Write,
    delete_memory,
    delete_memory_by_id,
    save_many,
    save_memory,
    write_many,
)
from commands.model import DeleteMemory, DeleteMemoryById, OneMemoryCommand, SaveMemory
from commands.projects import (
    ArchiveProject,
    CreateProject,
    DeleteProject,
    GrantProjectAccess,
    ProjectOutcome,
    ReactivateProject,
    RevokeProjectAccess,
    archive_project,
    create_project,
    delete_project,
    grant_project_access,
    reactivate_project,
    revoke_project_access,
)
from commands.restore import RestoreMemory, restore_memory
from commands.supersede import SupersedeEvent, SupersedeOutcome, supersede_event
from events.idempotency import IdempotencyClaim, IdempotencyKeys
from events.store import ConcurrencyConflict
from events.transaction import AppendTransaction
from events.types import EventMetadata
from memoryd.kernel.errors import Conflict

MAX_ATTEMPTS = 25
R = TypeVar("R")
log = logging.getLogger(__name__)

HANDLERS: dict[type, Callable[..., Any]] = {
    SaveMemory: save_memory,
    DeleteMemory: delete_memory,
    DeleteMemoryById: delete_memory_by_id,
    RestoreMemory: restore_memory,
    CreateProject: create_project,
    GrantProjectAccess: grant_project_access,
    RevokeProjectAccess: revoke_project_access,
    ArchiveProject: archive_project,
    ReactivateProject: reactivate_project,
    DeleteProject: delete_project,
    SupersedeEvent: supersede_event,
    EraseMemories: erase_memories,
}


MemoryCommand = SaveMemory | DeleteMemory | DeleteMemoryById | RestoreMemory
MEMORY_COMMANDS = (SaveMemory, DeleteMemory, DeleteMemoryById, RestoreMemory)
ProjectCommand = (CreateProject | GrantProjectAccess | RevokeProjectAccess | ArchiveProject | ReactivateProject
                  | DeleteProject)
AnyCommand = MemoryCommand | ProjectCommand | SupersedeEvent | EraseMemories
AnyOutcome = Outcome | ProjectOutcome | SupersedeOutcome | ErasureOutcome


class Dispatcher(Protocol):
    """Gets projections to catch up after an append (in-process, or via workers)."""

    def appending(self, tx: AppendTransaction, position: int) -> bool:
        """Inside the command's transaction ``tx``, after its append: True if the projections reached
        ``position`` in it (an in-process projection then commits with the append). Raising rolls the command
        back; it runs again without this step, and ``appended`` projects after its commit. So does a write it
        deferred (``memoryd.storage.driver``) that fails only when the command commits."""

    def appended(self, position: int, projected: bool) -> None:
        """After the command's transaction committed: project what ``appending`` did not, or tell workers."""

    def settled(self, position: int) -> bool:
        """For a write's answer, after ``appended`` and when its own step did not project it: whether
        ``position`` is projected, waiting as long as this dispatcher's policy says a projection can soon come."""


class _ProjectAfterCommit(Exception):
    """The in-transaction projection failed: roll the command back and run it again without that step."""

    def __init__(self, position: int) -> None:
        super().__init__(f"the projection of position {position} failed")
        self.position = position


class _AppendFailed(Exception):
    """A write the command deferred (its event's insert) failed where a later statement sent it, for a reason
    that is not a lost race: raised as it is, not taken for the step's failure."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


MemoryWrite = tuple[MemoryCommand, EventMetadata, IdempotencyClaim | None]


class CommandBus:
    """With ``group_commit``, memory writes that arrive while another runs share its next transaction
    (``commands.group_commit``): worth it where a commit waits for the disk (PostgreSQL)."""

    def __init__(self, deps: Dependencies, dispatcher: Dispatcher, keys: IdempotencyKeys,
                 group_commit: bool = False) -> None:
        self.deps = deps
        self.dispatcher = dispatcher
        self.keys = keys
        self._writes: GroupCommit[MemoryWrite, Outcome] | None = \
            GroupCommit(self._write_together, self._write_alone) if group_commit else None

    @overload
    def handle(self, command: MemoryCommand, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> Outcome: ...

    @overload
    def handle(self, command: ProjectCommand, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> ProjectOutcome: ...

    @overload
    def handle(self, command: SupersedeEvent, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> SupersedeOutcome: ...

    @overload
    def handle(self, command: EraseMemories, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> ErasureOutcome: ...

    def handle(self, command: AnyCommand, metadata: EventMetadata, claim: IdempotencyClaim | None = None
               ) -> AnyOutcome:
        """Run the command in one transaction (load, decide, append, and an in-process projection); with
        ``claim``, its key is taken atomically with the append. Then tell the dispatcher, in the caller's own
        thread: a catch-up after the commit never holds up the writes in line behind it."""
        outcome: AnyOutcome
        if self._writes is not None and isinstance(command, MEMORY_COMMANDS):
            written = self._writes.submit((command, metadata, claim))
            outcome, projected = written, written.projected
        else:
            outcome, projected = self._transact(command, metadata, claim)
        if outcome.position is not None:
            self.dispatcher.appended(outcome.position, projected)
        return outcome

    def _transact(self, command: AnyCommand, metadata: EventMetadata, claim: IdempotencyClaim | None
                  ) -> tuple[AnyOutcome, bool]:
        handler = HANDLERS[type(command)]
        outcome: AnyOutcome
        reading = command.stream_id if isinstance(command, OneMemoryCommand) else None
        outcome, projected = self._in_one_transaction(
            lambda tx: handler(tx, command, metadata, self.deps, self._taking(claim)), lambda outcome: outcome.position,
            reading)
        return (replace(outcome, projected=projected) if isinstance(outcome, Outcome) else outcome), projected

    def _write_alone(self, write: MemoryWrite) -> Outcome:
        return cast(Outcome, self._transact(*write)[0])  # a memory command's handler answers an Outcome

    def _write_together(self, writes: Sequence[MemoryWrite]) -> list[Outcome]:
        """Several writes, each with its own metadata and key, in one transaction; the first's stream is read
        with the lock."""
        first = writes[0][0]
        outcomes, projected = self._in_one_transaction(
            lambda tx: [HANDLERS[type(command)](tx, command, metadata, self.deps, self._taking(claim))
                        for command, metadata, claim in writes],
            lambda outcomes: outcomes[-1].position, first.stream_id if isinstance(first, OneMemoryCommand) else None)
        return [replace(outcome, projected=projected) for outcome in outcomes]

    def _taking(self, claim: IdempotencyClaim | None) -> Callable[[Connection, int], None] | None:
        """What takes ``claim``'s key in the append's transaction, at the position it appends."""
        return (lambda conn, position: self.keys.claim(conn, claim, position)) if claim else None

    def handle_many(self, commands: list[SaveMemory], metadata: EventMetadata) -> list[Outcome]:
        """Save a batch in one transaction (bulk imports), then tell the projections once."""
        outcomes, projected = self._in_one_transaction(lambda tx: save_many(tx, commands, metadata, self.deps),
                                                       lambda outcomes: outcomes[-1].position if outcomes else None)
        if outcomes:
            self.dispatcher.appended(outcomes[-1].position, projected)
        return outcomes

    def write_many(self, commands: list[Write], metadata: EventMetadata,
                   claim: IdempotencyClaim | None = None) -> list[Outcome | None]:
        """Save and delete a batch in one transaction, all or none (``handlers.write_many``); with ``claim``, its
        key is taken with the append."""
        outcomes, projected = self._in_one_transaction(
            lambda tx: write_many(tx, commands, metadata, self.deps, self._taking(claim)), _last_position)
        if (position := _last_position(outcomes)) is not None:
            self.dispatcher.appended(position, projected)
        return [replace(outcome, projected=projected) if outcome else None for outcome in outcomes]

    def settled(self, position: int, projected: bool = False) -> bool:
        """Whether a write at ``position`` is projected, as the dispatcher's write-wait decides (a write's answer
        says so; ``projected``: its outcome's, or False for an answer replayed from the log)."""
        return projected or self.dispatcher.settled(position)

    def _in_one_transaction(self, run: Callable[[AppendTransaction], R], position_of: Callable[[R], int | None],
                            reading: str | None = None) -> tuple[R, bool]:
        """``run`` and the in-process projection in one transaction, handed to both (and whether that projected
        it); when
        another writer appended to the same stream first, all of it is rolled back and run again on the new
        state, a bounded number of times. ``reading`` is the stream ``run`` decides on, if the command names
        it: the statement that takes the append lock reads it too.

        A projection that fails in it, or at its commit, takes the whole transaction back (no savepoint per
        command guards the append from it), and the command runs again without it: a projection's failure
        never fails a write."""
        project, conflicts = True, 0
        while True:
            try:
                with self.deps.store.transaction() as tx:
                    # decided on a state that stays the stream's until commit
                    self.deps.store.hold_appends(tx, reading=reading)
                    with tx.failing_as(_AppendFailed):  # a deferred insert's trouble, wherever it surfaces
                        outcome = run(tx)
                    position = position_of(outcome)
                    projected = project and position is not None and self._appending(tx, position)
                return outcome, projected
            except ConcurrencyConflict as conflict:
                conflicts += 1
                if conflicts >= MAX_ATTEMPTS:
                    raise Conflict(f"too many concurrent writes ({conflict}); try again") from conflict
                time.sleep(random.uniform(0, 0.002 * conflicts))
            except _AppendFailed as failed:
                raise failed.error from failed.error.__cause__
            except _ProjectAfterCommit as failed:  # once at most: the next run has no step to fail
                log.error("projection failed inside the append of position %d; running the command again and "
                          "catching up after it", failed.position, exc_info=failed.__cause__)
                project = False

    def _appending(self, tx: AppendTransaction, position: int) -> bool:
        try:
            with tx.failing_as(lambda error: _ProjectAfterCommit(position)):  # its deferred writes, at commit
                return self.dispatcher.appending(tx, position)
        except (ConcurrencyConflict, _AppendFailed):  # the append's own deferred write, sent by the step
            raise
        except Exception as error:
            raise _ProjectAfterCommit(position) from error


def _last_position(outcomes: list[Outcome | None]) -> int | None:
    return max((outcome.position for outcome in outcomes if outcome is not None), default=None)
