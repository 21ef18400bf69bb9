"""The reference implementation's SDK names: ``from memoryd_sdk.compat.turnstone import TurnstoneServer``."""

from memoryd_sdk import (
    AsyncMemorydConsole,
    AsyncMemorydServer,
    MemorydAPIError,
    MemorydConsole,
    MemorydServer,
)

TurnstoneServer = MemorydServer
AsyncTurnstoneServer = AsyncMemorydServer
TurnstoneConsole = MemorydConsole
AsyncTurnstoneConsole = AsyncMemorydConsole
TurnstoneAPIError = MemorydAPIError

__all__ = ["AsyncTurnstoneConsole", "AsyncTurnstoneServer", "TurnstoneAPIError", "TurnstoneConsole", "TurnstoneServer"]
