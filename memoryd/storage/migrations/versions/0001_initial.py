"""The event log, the structured_memories read model and the directory.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Position = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Document = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("position", Position, primary_key=True, autoincrement=True),
        sa.Column("stream_id", sa.Text, nullable=False),
        sa.Column("stream_version", sa.Integer, nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("payload", Document, nullable=False),
        sa.Column("metadata", Document, nullable=False),
        sa.Column("recorded_at", sa.String(32), nullable=False),
        sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "structured_memories",
        sa.Column("memory_id", sa.String(36), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("scope", sa.String(32), nullable=False),
        sa.Column("scope_id", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("created", sa.String(19), nullable=False),
        sa.Column("updated", sa.String(19), nullable=False),
        sa.Column("last_accessed", sa.String(19), nullable=False),
        sa.Column("access_count", sa.Integer, nullable=False),
        sa.UniqueConstraint("name", "scope", "scope_id", name="uq_structured_memories_identity"),
    )
    op.create_index("ix_structured_memories_scope", "structured_memories", ["scope", "scope_id"])
    op.create_index("ix_structured_memories_type", "structured_memories", ["type"])
    op.create_index("ix_structured_memories_recency", "structured_memories", ["updated", "memory_id"])
    op.create_table(
        "projection_checkpoints",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("created", sa.String(19), nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("token_id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), sa.ForeignKey("users.user_id"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("scopes", sa.Text, nullable=False),
        sa.Column("permissions", sa.Text, nullable=False),
        sa.Column("created", sa.String(19), nullable=False),
    )
    op.create_table(
        "workstreams",
        sa.Column("workstream_id", sa.String(36), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("owner_user_id", sa.String(36), sa.ForeignKey("users.user_id"), nullable=True),
        sa.Column("created", sa.String(19), nullable=False),
    )


def downgrade() -> None:
    for table in ("workstreams", "tokens", "users", "projection_checkpoints", "structured_memories", "events"):
        op.drop_table(table)
