"""Identities with a lifecycle: deactivated users, named tokens that expire and are revoked, closed sessions.

* ``users``: ``deactivated_at``; names become unique (``uq_users_name``). A database that already holds
  the same name more than once keeps the oldest user (by ``created``, then id) under it and renames each
  later one ``NAME (2)``, ``NAME (3)``, ... (the first such name that is free), logging every rename on
  the ``memoryd.storage.migrations`` logger: ids, tokens and memories are untouched, only the display name changes.
* ``tokens``: ``name``, ``prefix`` (``mdt_`` and 4 characters, for telling tokens apart in a list; "" for
  tokens made before this revision, whose clear value memoryd never kept), ``expires_at``,
  ``last_used_at``, ``revoked_at``, and an index by user.
* ``sessions``: ``closed_at``, ``last_active_at``, and an index by parent (a coordinator's children
  close with it).

Only columns and indexes are added (no table is rebuilt), so the upgrade is quick on both backends.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

import logging

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

log = logging.getLogger("memoryd.storage.migrations")


def upgrade() -> None:
    op.add_column("users", sa.Column("deactivated_at", sa.String(19), nullable=True))
    _rename_duplicate_names()
    op.create_index("uq_users_name", "users", ["name"], unique=True)
    for column in (sa.Column("name", sa.Text, nullable=False, server_default=""),
                   sa.Column("prefix", sa.String(8), nullable=False, server_default=""),
                   sa.Column("expires_at", sa.String(19), nullable=True),
                   sa.Column("last_used_at", sa.String(19), nullable=True),
                   sa.Column("revoked_at", sa.String(19), nullable=True)):
        op.add_column("tokens", column)
    op.create_index("ix_tokens_user_id", "tokens", ["user_id"])
    op.add_column("sessions", sa.Column("closed_at", sa.String(19), nullable=True))
    op.add_column("sessions", sa.Column("last_active_at", sa.String(19), nullable=True))
    op.create_index("ix_sessions_parent_session_id", "sessions", ["parent_session_id"])


def _rename_duplicate_names() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT user_id, name FROM users ORDER BY created, user_id")).all()
    taken = {name for _, name in rows}
    seen: set[str] = set()
    for user_id, name in rows:
        if name not in seen:
            seen.add(name)
            continue
        suffix = 2
        while f"{name} ({suffix})" in taken:
            suffix += 1
        renamed = f"{name} ({suffix})"
        taken.add(renamed)
        conn.execute(sa.text("UPDATE users SET name = :name WHERE user_id = :user_id"),
                     {"name": renamed, "user_id": user_id})
        log.warning("user %s: renamed from %r to %r (user names are unique from revision 0014)",
                    user_id, name, renamed)


def downgrade() -> None:
    """Drops what upgrade added (DROP COLUMN: SQLite 3.35 and later, no table rebuilt); renamed users keep
    their new names."""
    op.drop_index("ix_sessions_parent_session_id", "sessions")
    op.drop_index("ix_tokens_user_id", "tokens")
    op.drop_index("uq_users_name", "users")
    for table, columns in (("sessions", ("last_active_at", "closed_at")),
                           ("tokens", ("revoked_at", "last_used_at", "expires_at", "prefix", "name")),
                           ("users", ("deactivated_at",))):
        for column in columns:
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
