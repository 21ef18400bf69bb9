"""Sessions, workstreams' attached project and persona lever, memory access telemetry.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workstreams") as batch:
        batch.add_column(sa.Column("project_id", sa.String(36), nullable=True))
        batch.add_column(sa.Column("persona_memory", sa.Boolean, nullable=False, server_default=sa.true()))
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(36), nullable=True),
        sa.Column("workstream_id", sa.String(36), sa.ForeignKey("workstreams.workstream_id"), nullable=False),
        sa.Column("parent_session_id", sa.String(36), nullable=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created", sa.String(19), nullable=False),
    )
    op.create_table(
        "memory_access",
        sa.Column("memory_id", sa.String(36), primary_key=True),
        sa.Column("last_accessed", sa.String(19), nullable=False),
        sa.Column("access_count", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_access")
    op.drop_table("sessions")
    with op.batch_alter_table("workstreams") as batch:
        batch.drop_column("persona_memory")
        batch.drop_column("project_id")
