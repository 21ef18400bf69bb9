"""The commands: imperative, frozen, already validated."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from events.types import memory_stream_id
from memoryd.kernel.domain import (
    Namespace,
    clean_content,
    clean_description,
    clean_name,
    clean_type,
)


class OneMemoryCommand:
    """A command on the memory ``(name, scope, scope_id)``, which decides on that memory's stream alone."""

    name: str
    namespace: Namespace

    @cached_property  # the bus reads it with the append lock, then the handler decides on it
    def stream_id(self) -> str:
        return memory_stream_id(self.name, self.namespace.scope, self.namespace.scope_id)


@dataclass(frozen=True)
class SaveMemory(OneMemoryCommand):
    """Create the memory ``(name, scope, scope_id)`` or update it in place."""

    name: str
    content: str
    description: str
    type: str | None  # None: unset, so a new memory gets "general" and an update keeps its type
    namespace: Namespace
    expected_version: int | None = None  # only if the memory exists at this version (If-Match)

    @classmethod
    def validated(
        cls,
        *,
        name: Any,
        content: Any,
        description: Any,
        type: Any,
        max_content: int,
        resolve_namespace: Callable[[], Namespace],
        expected_version: int | None = None,
    ) -> SaveMemory:
        """Check the fields in the order clients rely on: name, content, description, type, scope."""
        clean = (clean_name(name), clean_content(content, max_content), clean_description(description), clean_type(type))
        return cls(*clean, namespace=resolve_namespace(), expected_version=expected_version)


@dataclass(frozen=True)
class DeleteMemory(OneMemoryCommand):
    """Delete the memory ``(name, scope, scope_id)``."""

    name: str
    namespace: Namespace
    expected_version: int | None = None
    missing_ok: bool = False  # in a batch: a memory that is not there is already deleted, not an error


@dataclass(frozen=True)
class DeleteMemoryById:
    """Delete a memory by its id (administrators)."""

    memory_id: str
    expected_version: int | None = None


Command = SaveMemory | DeleteMemory | DeleteMemoryById
