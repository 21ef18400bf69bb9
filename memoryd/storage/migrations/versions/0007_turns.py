"""Turns: receipts of what each turn injected, nudge cooldowns, and a turn counter per session.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("turns", sa.Integer, nullable=False, server_default="0"))
    op.create_table(
        "turn_receipts",
        sa.Column("receipt_id", sa.String(36), primary_key=True),
        sa.Column("session_id", sa.String(36), sa.ForeignKey("sessions.session_id"), nullable=False),
        sa.Column("turn_id", sa.String(255), nullable=False),
        sa.Column("turn", sa.Integer, nullable=False),
        sa.Column("created", sa.String(19), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("request_sha256", sa.String(64), nullable=False),
        sa.Column("block_sha256", sa.String(64), nullable=False),
        sa.Column("system_sha256", sa.String(64), nullable=False),
        sa.Column("details", sa.JSON().with_variant(JSONB(), "postgresql"), nullable=False),
        sa.UniqueConstraint("session_id", "turn_id", name="uq_turn_receipts_turn_id"),
    )
    op.create_index("ix_turn_receipts_session_turn", "turn_receipts", ["session_id", "turn"])
    op.create_index("ix_turn_receipts_created", "turn_receipts", ["created"])
    op.create_table(
        "nudge_deliveries",
        sa.Column("session_id", sa.String(36), primary_key=True),
        sa.Column("nudge_type", sa.String(32), primary_key=True),
        sa.Column("delivered_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("nudge_deliveries")
    op.drop_index("ix_turn_receipts_created", "turn_receipts")
    op.drop_index("ix_turn_receipts_session_turn", "turn_receipts")
    op.drop_table("turn_receipts")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("turns")
