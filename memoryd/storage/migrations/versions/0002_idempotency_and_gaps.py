"""Idempotency keys, and the record of positions projections passed.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Document = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("response", Document, nullable=True),
        sa.Column("created", sa.String(19), nullable=False),
    )
    op.create_index("ix_idempotency_keys_created", "idempotency_keys", ["created"])
    op.create_table(
        "projection_gaps",
        sa.Column("gap_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("projection", sa.String(64), nullable=False),
        sa.Column("first_position", sa.BigInteger, nullable=False),
        sa.Column("last_position", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.String(19), nullable=False),
        sa.UniqueConstraint("projection", "first_position", name="uq_projection_gaps_start"),
    )


def downgrade() -> None:
    op.drop_table("projection_gaps")
    op.drop_index("ix_idempotency_keys_created", "idempotency_keys")
    op.drop_table("idempotency_keys")
