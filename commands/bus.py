"""The command bus: run a command's handler, then tell the projections."""

from __future__ import annotations

from typing import Protocol

from commands.handlers import HANDLERS, Dependencies, Outcome
from commands.model import Command
from events.types import EventMetadata


class Dispatcher(Protocol):
    """Gets projections to catch up after an append (in-process, or via workers)."""

    def appended(self, position: int) -> None: ...


class CommandBus:
    def __init__(self, deps: Dependencies, dispatcher: Dispatcher) -> None:
        self.deps = deps
        self.dispatcher = dispatcher

    def handle(self, command: Command, metadata: EventMetadata) -> Outcome:
        outcome = HANDLERS[type(command)](command, metadata, self.deps)
        self.dispatcher.appended(outcome.position)
        return outcome
