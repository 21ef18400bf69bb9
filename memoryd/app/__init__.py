"""Application services: what agents and operators use, built on commands, projections and events.

The memory tool (``tool``), the turn (``turn``: relevance injection, nudges, receipts), identities through
their lifecycle, erasure, bulk import and export, and the scope rules they share (``scope``). They never
import ``api`` or ``workers``; the HTTP handlers and the CLI call them, and each gets its collaborators,
not the whole ``Services`` bag (``services`` is that bag, as the composition root builds it).
"""
