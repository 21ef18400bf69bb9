"""Indexes for point-in-time reads and erasures: the log by time (an ``as_of`` timestamp becomes a
position) and by event type (supersedes and erasures are read by type), and on PostgreSQL the log's
stream ids in code point order (``COLLATE "C"``), so a namespace's streams are one index range whatever
the database's collation (SQLite's unique ``(stream_id, stream_version)`` index is in that order already).

The memory counts drop their zero rows: the projection now deletes a namespace's count when it reaches
0 (a replay of a log with erasures has none), and ``memoryd projections verify`` compares the two.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    op.create_index("ix_events_event_type", "events", ["event_type"])
    op.execute("DELETE FROM memory_counts WHERE count <= 0")
    if op.get_bind().dialect.name == "postgresql":
        op.execute('CREATE INDEX ix_events_stream_code_points ON events (stream_id COLLATE "C", stream_version)')


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_events_stream_code_points")
    op.drop_index("ix_events_event_type", "events")
    op.drop_index("ix_events_recorded_at", "events")
