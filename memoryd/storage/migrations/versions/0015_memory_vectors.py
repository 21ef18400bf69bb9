"""The semantic channel's vectors: ``memory_vectors``, one row per live memory and embedding model.

A read model like ``structured_memories``: empty after the upgrade, filled from the log by the vectors
projection when the semantic channel is on (its checkpoint starts at 0).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_vectors",
        sa.Column("model", sa.String(128), primary_key=True),
        sa.Column("memory_id", sa.String(36), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_memory_vectors_model_position", "memory_vectors", ["model", "position"])


def downgrade() -> None:
    """Drops the vectors and their checkpoints: the next upgrade builds them again from the log."""
    op.drop_table("memory_vectors")
    op.execute("DELETE FROM projection_checkpoints WHERE name LIKE 'memory_vectors:%'")
    op.execute("DELETE FROM projection_faults WHERE projection LIKE 'memory_vectors:%'")
