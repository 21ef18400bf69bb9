"""Idempotency keys claimed before the request runs; projections that stopped on an event.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.alter_column("position", existing_type=sa.BigInteger, nullable=True)
        batch.add_column(sa.Column("attempt", sa.String(32), nullable=True))
    op.create_table(
        "projection_faults",
        sa.Column("projection", sa.String(64), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.String(19), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("projection_faults")
    op.execute("DELETE FROM idempotency_keys WHERE position IS NULL")
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_column("attempt")
        batch.alter_column("position", existing_type=sa.BigInteger, nullable=False)
