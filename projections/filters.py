"""Which memories a read may see: plain values, no SQL, shared by the table queries and the search index."""

from __future__ import annotations

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
