"""memoryd: an event-sourced memory service for AI agents.

This package holds what every layer shares: domain rules, configuration,
the database schema and the composition root. The layers themselves live in
the top-level packages ``commands``, ``events``, ``projections``, ``api`` and
``workers``.
"""
