"""The log's hash chain: every event gets its payload's digest and its chain hash (events/chain.py),
computed once here in position order. Positions that never held an event (the database's sequence
burned them) are recorded as gaps, and ``event_head`` starts at the highest position ever taken:
appends take positions from it from now on.

Stop API processes and workers running older code first: their appends would not be sealed.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

Document = sa.JSON().with_variant(JSONB(), "postgresql")
PAGE = 10_000
GENESIS = "0" * 64


# Chain format 1 as events/chain.py defines it, frozen here as migrations are (the kernel imports no
# layer); tests/test_chain.py checks that a log sealed here verifies with the store's code.
def _sha256(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                                     allow_nan=False).encode()).hexdigest()

log = sa.table("events", sa.column("position", sa.BigInteger), sa.column("stream_id", sa.Text),
               sa.column("stream_version", sa.Integer), sa.column("event_type", sa.String),
               sa.column("schema_version", sa.Integer), sa.column("payload", Document),
               sa.column("metadata", Document), sa.column("recorded_at", sa.String),
               sa.column("payload_sha256", sa.String), sa.column("hash", sa.String))


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for name in ("payload_sha256", "hash"):  # SQLite adds a NOT NULL column only with a default
        op.add_column("events", sa.Column(name, sa.String(64), nullable=not sqlite,
                                          server_default="" if sqlite else None))
    op.create_table(
        "event_gaps",
        sa.Column("first_position", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("last_position", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "event_head",
        sa.Column("log", sa.String(16), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    last, head_hash = _seal_every_event()
    taken = _highest_position_taken()
    if taken > last:
        _record_gaps([{"first_position": last + 1, "last_position": taken}])
    op.bulk_insert(sa.table("event_head", sa.column("log"), sa.column("position"), sa.column("hash")),
                   [{"log": "events", "position": max(last, taken), "hash": head_hash}])
    if not sqlite:
        for name in ("payload_sha256", "hash"):
            op.alter_column("events", name, nullable=False)


def _seal_every_event() -> tuple[int, str]:
    """Seal the log in position order; the last position and its hash."""
    conn = op.get_bind()
    seal = sa.update(log).where(log.c.position == sa.bindparam("at")).values(
        payload_sha256=sa.bindparam("digest"), hash=sa.bindparam("chain"))
    reading = sa.select(log).where(log.c.position > sa.bindparam("after")).order_by(log.c.position).limit(PAGE)
    previous, after = GENESIS, 0
    while rows := conn.execute(reading, {"after": after}).all():
        sealed, gaps = [], []
        for row in rows:
            if row.position != after + 1:
                gaps.append({"first_position": after + 1, "last_position": row.position - 1})
            digest = _sha256(row.payload)
            stream = hashlib.sha256(row.stream_id.encode("utf-8", "surrogatepass")).hexdigest()
            previous = _sha256([row.position, stream, row.stream_version, row.event_type, row.schema_version,
                                digest, row.metadata, row.recorded_at, previous])
            sealed.append({"at": row.position, "digest": digest, "chain": previous})
            after = row.position
        conn.execute(seal, sealed)
        _record_gaps(gaps)
    return after, previous


def _record_gaps(gaps: list[dict[str, int]]) -> None:
    if gaps:
        op.bulk_insert(sa.table("event_gaps", sa.column("first_position"), sa.column("last_position")), gaps)


def _highest_position_taken() -> int:
    """What the position's sequence has handed out (a vanished newest event's position included)."""
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        return int(conn.exec_driver_sql("SELECT coalesce(max(seq), 0) FROM sqlite_sequence WHERE name = 'events'")
                   .scalar_one())
    sequence = conn.exec_driver_sql("SELECT pg_get_serial_sequence('events', 'position')").scalar_one()  # quoted
    taken, called = conn.exec_driver_sql(f"SELECT last_value, is_called FROM {sequence}").one()
    return int(taken) if called else 0


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":  # older code takes positions from the sequence again: hand it the head
        conn.exec_driver_sql("SELECT setval(pg_get_serial_sequence('events', 'position'), position) "
                             "FROM event_head WHERE position > 0")
    op.drop_table("event_head")
    op.drop_table("event_gaps")
    with op.batch_alter_table("events", recreate="never") as batch:  # SQLite drops columns itself: no table copy
        batch.drop_column("hash")
        batch.drop_column("payload_sha256")
