"""Read models of projects and their members.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("project_id", sa.String(36), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("owner_user_id", sa.String(36), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created", sa.String(19), nullable=False),
        sa.Column("updated", sa.String(19), nullable=False),
    )
    op.create_table(
        "project_members",
        sa.Column("project_id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), primary_key=True),
        sa.Column("access", sa.String(8), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("project_members")
    op.drop_table("projects")
