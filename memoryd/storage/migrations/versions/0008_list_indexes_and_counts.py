"""Lists that read one index range per namespace, and live counts per namespace and type.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

INDEXES = {  # each in the lists' order: updated newest first, then id
    "ix_structured_memories_namespace_newest": ["scope", "scope_id"],
    "ix_structured_memories_namespace_type_newest": ["scope", "scope_id", "type"],
    "ix_structured_memories_scope_newest": ["scope"],
    "ix_structured_memories_scope_type_newest": ["scope", "type"],
    "ix_structured_memories_type_newest": ["type"],
    "ix_structured_memories_all_newest": [],
}


def upgrade() -> None:
    for old in ("ix_structured_memories_scope", "ix_structured_memories_type", "ix_structured_memories_recency"):
        op.drop_index(old, "structured_memories")
    for name, columns in INDEXES.items():
        op.create_index(name, "structured_memories", [*columns, sa.text("updated DESC"), "memory_id"])
    op.create_table(
        "memory_counts",
        sa.Column("scope", sa.String(32), primary_key=True),
        sa.Column("scope_id", sa.Text, primary_key=True),
        sa.Column("type", sa.String(32), primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
    )
    op.execute("INSERT INTO memory_counts (scope, scope_id, type, count) "
               "SELECT scope, scope_id, type, COUNT(*) FROM structured_memories GROUP BY scope, scope_id, type")


def downgrade() -> None:
    op.drop_table("memory_counts")
    for name in INDEXES:
        op.drop_index(name, "structured_memories")
    op.create_index("ix_structured_memories_recency", "structured_memories", ["updated", "memory_id"])
    op.create_index("ix_structured_memories_type", "structured_memories", ["type"])
    op.create_index("ix_structured_memories_scope", "structured_memories", ["scope", "scope_id"])
