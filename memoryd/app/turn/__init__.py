"""The turn: per-turn relevance injection, nudges and receipts for agent runtimes.

``composer`` is the one entry (HTTP, embedding, SDKs and MCP all call it), and
``answers`` types what it answers;
``request`` checks what a runtime sends; ``conversation`` extracts the
context from its messages; ``block`` renders the ``<memories>`` block, the
hint and the messages they go in; ``nudges`` decides which reminders a
message or a tool-loop event earns; ``tools`` names the memory tool in those
texts as the model sees it; ``records`` keeps the turn counter, receipts and
nudge cooldowns.
"""

from memoryd.app.turn.answers import Item, Turn, TurnReceipt
from memoryd.app.turn.composer import TurnComposer
from memoryd.app.turn.nudges import Nudge
from memoryd.app.turn.request import Signal, TurnRequest
from memoryd.app.turn.tools import ToolNames

__all__ = ["Item", "Nudge", "Signal", "ToolNames", "Turn", "TurnComposer", "TurnReceipt", "TurnRequest"]
