"""Alembic migrations for every memoryd table (run with ``memoryd db upgrade``)."""
