"""The command bus: run a command's handler, then tell the projections."""

from __future__ import annotations

from typing import Protocol

from commands.handlers import HANDLERS, Dependencies, Outcome, save_many
from commands.model import Command, SaveMemory
from events.idempotency import IdempotencyClaim, IdempotencyKeys
from events.types import EventMetadata


class Dispatcher(Protocol):
    """Gets projections to catch up after an append (in-process, or via workers)."""

    def appended(self, position: int) -> None: ...


class CommandBus:
    def __init__(self, deps: Dependencies, dispatcher: Dispatcher, keys: IdempotencyKeys) -> None:
        self.deps = deps
        self.dispatcher = dispatcher
        self.keys = keys

    def handle(self, command: Command, metadata: EventMetadata, claim: IdempotencyClaim | None = None) -> Outcome:
        """Run the command; with ``claim``, its key is taken atomically with the append."""
        take_key = (lambda conn, position: self.keys.claim(conn, claim, position)) if claim else None
        outcome = HANDLERS[type(command)](command, metadata, self.deps, take_key)
        self.dispatcher.appended(outcome.position)
        return outcome

    def handle_many(self, commands: list[SaveMemory], metadata: EventMetadata) -> list[Outcome]:
        """Save a batch in one transaction (bulk imports), then tell the projections once."""
        outcomes = save_many(commands, metadata, self.deps)
        if outcomes:
            self.dispatcher.appended(outcomes[-1].position)
        return outcomes
