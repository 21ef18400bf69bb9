"""Which memories a read may see: plain values, no SQL, shared by the table queries and the search index."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ScopePattern:
    """Rows of ``scope``; with ``scope_id`` None, whatever their scope id."""

    scope: str
    scope_id: str | None = None


@dataclass(frozen=True)
class MemoryFilter:
    """Which rows a read may return; ``scopes`` None means every scope (admins)."""

    type: str = ""
    scopes: tuple[ScopePattern, ...] | None = None


def admitted_namespaces(where: MemoryFilter, numbers: Mapping[tuple[str, str], int],
                        by_scope: Mapping[str, Iterable[int]]) -> set[int] | None:
    """The numbers of the namespaces ``where`` may see, of those an index numbered (``numbers`` by ``(scope,
    scope id)``, ``by_scope`` by scope); None when it may see every one (admins)."""
    if where.scopes is None:
        return None
    admitted: set[int] = set()
    for pattern in where.scopes:
        if pattern.scope_id is None:
            admitted.update(by_scope.get(pattern.scope, ()))
        elif (number := numbers.get((pattern.scope, pattern.scope_id))) is not None:
            admitted.add(number)
    return admitted
