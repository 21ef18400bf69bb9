"""Projections: read models derived from the event log, rebuildable at will."""
