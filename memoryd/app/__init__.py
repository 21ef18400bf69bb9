"""Application services: what agents and operators use, built on commands, projections and events.

The memory tool, bulk import and export (and the coming turn composer and
nudges) live here. They never import ``api`` or ``workers``; the HTTP
handlers and the CLI call them, and each gets its collaborators, not the
whole ``Services`` bag.
"""
