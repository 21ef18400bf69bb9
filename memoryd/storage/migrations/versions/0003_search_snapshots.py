"""Snapshots of the search index.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "search_snapshots",
        sa.Column("snapshot_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("created", sa.String(19), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("search_snapshots")
