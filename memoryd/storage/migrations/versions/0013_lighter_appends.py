"""Appends write two pages less on SQLite (a commit's cost follows the pages it writes).

* The log's index by type leaves out the types every save writes (``memory.save``, ``memory.update``):
  they are most of the log and are read in position order; the rare ones (deletes, erasures, supersedes,
  project events) keep their index, now partial and in position order within a type, so the audit
  trail's action filter reads one ordered range (``memoryd.storage.schema.event_type_is``). Both backends.
* SQLite: ``events`` is rebuilt without ``AUTOINCREMENT``. Positions come from ``event_head``, never from
  the database, so its ``sqlite_sequence`` row was written on every append for nothing. The rebuild copies
  every row as it is (positions, digests and hashes), so the chain verifies as before; it reads and writes
  the whole log once, in the upgrade's transaction.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_COMMON = "'memory.save', 'memory.update'"
_COLUMNS = ("position, stream_id, stream_version, event_type, schema_version, payload, metadata, recorded_at, "
            "payload_sha256, hash")
# ``events`` as migrations 0001 and 0010 left it on SQLite, but for AUTOINCREMENT
_SQLITE_EVENTS = """CREATE TABLE {name} (
    position INTEGER NOT NULL PRIMARY KEY{autoincrement},
    stream_id TEXT NOT NULL,
    stream_version INTEGER NOT NULL,
    event_type VARCHAR(64) NOT NULL,
    schema_version INTEGER NOT NULL,
    payload JSON NOT NULL,
    metadata JSON NOT NULL,
    recorded_at VARCHAR(32) NOT NULL,
    payload_sha256 VARCHAR(64) DEFAULT '' NOT NULL,
    hash VARCHAR(64) DEFAULT '' NOT NULL,
    CONSTRAINT uq_events_stream_version UNIQUE (stream_id, stream_version)
)"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite_events(autoincrement=False)  # its indexes go with the old table
    else:
        op.drop_index("ix_events_event_type", "events")
    op.execute("CREATE INDEX ix_events_rare_event_type ON events (event_type, position) "
               f"WHERE (event_type NOT IN ({_COMMON}))")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_sqlite_events(autoincrement=True)
    else:
        op.drop_index("ix_events_rare_event_type", "events")
    op.create_index("ix_events_event_type", "events", ["event_type"])


def _rebuild_sqlite_events(autoincrement: bool) -> None:
    """``events`` copied into a table of the new shape, which takes its name; then its indexes but the one by
    type (its caller makes that one). Nothing references the table (no foreign key, trigger or view)."""
    op.execute(_SQLITE_EVENTS.format(name="events_rebuilt", autoincrement=" AUTOINCREMENT" if autoincrement else ""))
    op.execute(f"INSERT INTO events_rebuilt ({_COLUMNS}) SELECT {_COLUMNS} FROM events ORDER BY position")
    op.execute("DROP TABLE events")  # and its row in sqlite_sequence; an AUTOINCREMENT copy has its own
    op.execute("ALTER TABLE events_rebuilt RENAME TO events")
    if autoincrement:  # never below the highest position taken (0010 set it so): a removed tail stays burnt
        op.execute("UPDATE sqlite_sequence SET seq = max(seq, (SELECT position FROM event_head WHERE log = 'events')) "
                   "WHERE name = 'events'")
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
