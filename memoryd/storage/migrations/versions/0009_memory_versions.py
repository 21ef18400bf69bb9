"""Each memory row carries its version (its stream's version), for ETags and conditional writes.

The version is the log's to give, so the table is replayed from it: its rows and counts are cleared and
its checkpoint set back to 0, and the next catch-up (``memoryd db upgrade`` and ``memoryd serve`` run one;
so do workers) projects every event again, versions included. Read counts live in ``memory_access`` and
are kept. Stop workers and API processes running older code first: they would write rows without versions.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("structured_memories") as batch:
        batch.add_column(sa.Column("version", sa.Integer, nullable=False, server_default="0"))
    op.execute("DELETE FROM structured_memories")
    op.execute("DELETE FROM memory_counts")
    op.execute("DELETE FROM projection_faults WHERE projection = 'structured_memories'")
    op.execute("UPDATE projection_checkpoints SET position = 0 WHERE name = 'structured_memories'")


# 0008's list indexes: SQLite's batch mode copies the table to drop a column, and the copy's indexes
# would lose their ``DESC`` (lists would sort again), so they are made again as 0008 made them
LIST_INDEXES = {
    "ix_structured_memories_namespace_newest": ["scope", "scope_id"],
    "ix_structured_memories_namespace_type_newest": ["scope", "scope_id", "type"],
    "ix_structured_memories_scope_newest": ["scope"],
    "ix_structured_memories_scope_type_newest": ["scope", "type"],
    "ix_structured_memories_type_newest": ["type"],
    "ix_structured_memories_all_newest": [],
}


def downgrade() -> None:
    with op.batch_alter_table("structured_memories") as batch:
        batch.drop_column("version")
    if op.get_bind().dialect.name == "sqlite":
        for name, columns in LIST_INDEXES.items():
            op.drop_index(name, "structured_memories")
            op.create_index(name, "structured_memories", [*columns, sa.text("updated DESC"), "memory_id"])
