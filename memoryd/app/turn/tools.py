"""The memory tool as the model sees it, so that the hint and the nudges name a tool the model can call.

The spec's runtime shows one tool, ``memory``, taking an ``action``; an MCP client shows one tool per verb
(``memory_search``, ...), maybe under a prefix of its own (Claude Code: ``mcp__memoryd__memory_search``). A turn
or a signal may say which in ``tool_names``: each action mapped to the name the model sees. An action left out
is the spec's ``memory(action=...)``; a name given to several actions (or ``memory``) is one tool taking
``action``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memoryd.kernel.errors import ValidationError

ACTIONS = ("save", "get", "search", "delete", "list")
SPEC_TOOL = "memory"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")  # what MCP allows in a tool name


@dataclass(frozen=True)
class ToolNames:
    names: tuple[tuple[str, str], ...] = ()  # (action, tool name), sorted; empty: the spec's one memory tool

    @classmethod
    def parse(cls, value: Any) -> ToolNames:
        """From a request's ``tool_names`` (None: the spec's tool); a bad one is a ``ValidationError``."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise ValidationError(f"tool_names must be an object mapping actions ({', '.join(ACTIONS)}) to tool names")
        for action, name in value.items():
            if action not in ACTIONS:
                raise ValidationError(f"tool_names: unknown action {action!r} (actions: {', '.join(ACTIONS)})")
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ValidationError(f"tool_names.{action} must be a tool name: 1 to 128 letters, digits, "
                                      "'_', '-' or '.'")
        return cls(tuple(sorted(value.items())))

    def call(self, action: str, **arguments: str) -> str:
        """How the model calls ``action``: ``memory(action='save', type='feedback')`` or ``memory_save(type='feedback')``."""
        names = dict(self.names)
        name = names.get(action, SPEC_TOOL)
        shared = name == SPEC_TOOL or list(names.values()).count(name) > 1
        given = ([f"action='{action}'"] if shared else []) + [f"{key}='{value}'" for key, value in arguments.items()]
        return f"{name}({', '.join(given)})"

    def to_dict(self) -> dict[str, str] | None:
        """As a request or a receipt carries it (None: the spec's tool)."""
        return dict(self.names) or None


SPEC_TOOLS = ToolNames()  # the spec's one ``memory`` tool, taking ``action``
