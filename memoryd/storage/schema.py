"""Every table memoryd stores, in one SQLAlchemy ``MetaData``.

Alembic migrations create these tables; ``tests/test_migrations.py`` checks
that the migrations and this module agree. Three groups:

* ``events``: the append-only log, the single source of truth;
* read models derived from it (``structured_memories`` and the projection
  checkpoints), which can be dropped and rebuilt at any time;
* the directory (users, tokens, workstreams): reference data the API
  consults for authentication and scope ownership.
"""

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    literal_column,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.elements import ColumnElement

metadata = MetaData()

# On SQLite an INTEGER PRIMARY KEY is the row's own key (no index beside the table). Positions come from
# ``event_head`` (events/store.py), never from the database, so the log needs no AUTOINCREMENT: that wrote
# its ``sqlite_sequence`` row on every append (migration 0013 rebuilt the table without it).
Position = BigInteger().with_variant(Integer(), "sqlite")
Document = JSON().with_variant(JSONB(), "postgresql")

events = Table(
    "events",
    metadata,
    Column("position", Position, primary_key=True, autoincrement=True),
    Column("stream_id", Text, nullable=False),
    Column("stream_version", Integer, nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("payload", Document, nullable=False),
    Column("metadata", Document, nullable=False, key="meta"),
    Column("recorded_at", String(32), nullable=False),
    Column("payload_sha256", String(64), nullable=False),  # events/chain.py: the chain commits to this digest
    Column("hash", String(64), nullable=False),  # the chain's hash at this position
    UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    Index("ix_events_recorded_at", "recorded_at"),  # as_of a time: the position it names
    # PostgreSQL also has ix_events_stream_code_points (stream_id COLLATE "C", stream_version), made by
    # migration 0011: a namespace's streams as one range (projections/as_of.py)
)

# The event types every save writes: most of the log, left out of the index by type, so an append writes one
# index page less (a SQLite commit's cost follows its pages). A query for one of them reads the log in
# position order, where they are the usual row; a query for any other type states ``_RARE_TYPE`` as the
# index does, which is what lets SQLite use a partial index (``event_type_is``). events/store.py checks
# that they are the types saves write.
COMMON_EVENT_TYPES = ("memory.save", "memory.update")
_RARE_TYPE = events.c.event_type.not_in([literal_column(f"'{name}'") for name in COMMON_EVENT_TYPES])
Index("ix_events_rare_event_type", events.c.event_type, events.c.position,  # by type, then in log order
      sqlite_where=_RARE_TYPE, postgresql_where=_RARE_TYPE)


def event_type_is(event_type: str) -> ColumnElement[bool]:
    """The log's events of ``event_type``: through the index by type unless it is a common one."""
    if event_type in COMMON_EVENT_TYPES:
        return events.c.event_type == event_type
    return and_(events.c.event_type == event_type, _RARE_TYPE)


structured_memories = Table(
    "structured_memories",
    metadata,
    Column("memory_id", String(36), primary_key=True),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("type", String(32), nullable=False),
    Column("scope", String(32), nullable=False),
    Column("scope_id", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("created", String(19), nullable=False),
    Column("updated", String(19), nullable=False),
    Column("last_accessed", String(19), nullable=False),
    Column("access_count", Integer, nullable=False),
    Column("version", Integer, nullable=False, server_default="0"),  # the stream's version: the ETag
    UniqueConstraint("name", "scope", "scope_id", name="uq_structured_memories_identity"),
)
# A list reads one index range per visible namespace in its own order (updated newest first, then id) and
# stops at the page, with or without a type; a scope without a scope id (global, an admin's scope filter)
# and no scope at all likewise. No sort, on SQLite or PostgreSQL.
_NEWEST = (structured_memories.c.updated.desc(), structured_memories.c.memory_id)
for _name, _columns in {"namespace": ("scope", "scope_id"), "namespace_type": ("scope", "scope_id", "type"),
                        "scope": ("scope",), "scope_type": ("scope", "type"), "type": ("type",), "all": ()}.items():
    Index(f"ix_structured_memories_{_name}_newest", *(structured_memories.c[c] for c in _columns), *_NEWEST)

# Live memories per namespace and type, kept by triggers on structured_memories (migration 0012) in the
# statement that writes a row, so a count (the admin list's total) adds a few rows instead of scanning the
# table. A migration that rebuilds structured_memories on SQLite (batch mode) must create them again.
memory_counts = Table(
    "memory_counts",
    metadata,
    Column("scope", String(32), primary_key=True),
    Column("scope_id", Text, primary_key=True),
    Column("type", String(32), primary_key=True),
    Column("count", Integer, nullable=False),
)

projection_checkpoints = Table(
    "projection_checkpoints",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("position", BigInteger, nullable=False),
)

# Users, tokens and sessions keep their credentials here, never in the log; every change of their lifecycle
# (create, deactivate, reactivate, revoke, close) is also an audit event appended in the same transaction
# (memoryd/app/identities.py). A name is unique (migration 0014 renamed older duplicates).
users = Table(
    "users",
    metadata,
    Column("user_id", String(36), primary_key=True),
    Column("name", Text, nullable=False),
    Column("created", String(19), nullable=False),
    Column("deactivated_at", String(19), nullable=True),  # None: active
    Index("uq_users_name", "name", unique=True),
)

tokens = Table(
    "tokens",
    metadata,
    Column("token_id", String(36), primary_key=True),
    Column("user_id", String(36), ForeignKey("users.user_id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("scopes", Text, nullable=False),
    Column("permissions", Text, nullable=False),
    Column("created", String(19), nullable=False),
    Column("name", Text, nullable=False, server_default=""),
    Column("prefix", String(8), nullable=False, server_default=""),  # "mdt_" and 4 characters; "" when unknown
    Column("expires_at", String(19), nullable=True),  # None: never
    Column("last_used_at", String(19), nullable=True),  # kept to about a minute (memoryd/storage/touches.py)
    Column("revoked_at", String(19), nullable=True),
    Index("ix_tokens_user_id", "user_id"),
)

workstreams = Table(
    "workstreams",
    metadata,
    Column("workstream_id", String(36), primary_key=True),
    Column("name", Text, nullable=False),
    Column("owner_user_id", String(36), ForeignKey("users.user_id"), nullable=True),
    Column("created", String(19), nullable=False),
    Column("project_id", String(36), nullable=True),  # the attached project, if any
    Column("persona_memory", Boolean, nullable=False, server_default=true()),  # the persona's memory lever
)

# Agent sessions: each acts for one user (or anonymously) in one workstream,
# through a token of its own.
sessions = Table(
    "sessions",
    metadata,
    Column("session_id", String(36), primary_key=True),
    Column("kind", String(16), nullable=False),  # interactive | coordinator
    Column("user_id", String(36), nullable=True),  # None: anonymous
    Column("workstream_id", String(36), ForeignKey("workstreams.workstream_id"), nullable=False),
    Column("parent_session_id", String(36), nullable=True),  # a coordinator's child
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created", String(19), nullable=False),
    Column("turns", Integer, nullable=False, server_default="0"),  # turns recorded so far (the last turn's number)
    Column("closed_at", String(19), nullable=True),  # None: open
    Column("last_active_at", String(19), nullable=True),  # kept to about a minute; None: not used since 0014
    Index("ix_sessions_parent_session_id", "parent_session_id"),
)

# What each recorded turn put in front of the model: ids, versions, scores and
# hashes, never memory text (the block is rebuilt from the log when a receipt is
# read). Like ``memory_access``, a record of reads kept beside the log: no
# projection derives it, a rebuild leaves it alone, and old receipts expire.
turn_receipts = Table(
    "turn_receipts",
    metadata,
    Column("receipt_id", String(36), primary_key=True),
    Column("session_id", String(36), ForeignKey("sessions.session_id"), nullable=False),
    Column("turn_id", String(255), nullable=False),
    Column("turn", Integer, nullable=False),
    Column("created", String(19), nullable=False),
    Column("position", BigInteger, nullable=False),  # the log position the turn was composed at
    Column("request_sha256", String(64), nullable=False),  # a retry of the turn_id must send the same request
    Column("block_sha256", String(64), nullable=False),
    Column("system_sha256", String(64), nullable=False),  # of the system message the runtime was to send
    Column("details", Document, nullable=False),  # placement, items (id, version, score), nudges, counts
    UniqueConstraint("session_id", "turn_id", name="uq_turn_receipts_turn_id"),
    Index("ix_turn_receipts_session_turn", "session_id", "turn"),
    Index("ix_turn_receipts_created", "created"),
)

# When each nudge type was last delivered to a session (milliseconds since the
# epoch): the cooldown, shared by every process on the database.
nudge_deliveries = Table(
    "nudge_deliveries",
    metadata,
    Column("session_id", String(36), primary_key=True),
    Column("nudge_type", String(32), primary_key=True),
    Column("delivered_ms", BigInteger, nullable=False),
)

# Reads of memories (tool get and search): telemetry beside the log, not in it,
# so it survives a rebuild of the read model instead of being part of it.
memory_access = Table(
    "memory_access",
    metadata,
    Column("memory_id", String(36), primary_key=True),
    Column("last_accessed", String(19), nullable=False),
    Column("access_count", Integer, nullable=False),
)

# An idempotency key is claimed by one attempt (``attempt``) before the request
# runs; the append that request makes records its position in the same
# transaction, and only if the claim is still that attempt's, so a retried
# request can never append twice.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("user_id", String(36), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("position", BigInteger, nullable=True),  # None: nothing appended (yet)
    Column("status", Integer, nullable=True),  # filled in once the response is known
    Column("response", Document, nullable=True),
    Column("created", String(19), nullable=False),  # claimed, or the claim's lease last renewed
    Column("attempt", String(32), nullable=True),  # the attempt holding the claim
    Index("ix_idempotency_keys_created", "created"),
)

# The log's head: the highest position ever taken and the chain's hash there, in one row. Appends read
# and move it under the append lock, in their own transaction, so positions are taken one after the
# other, never reused (not even if the newest event were deleted) and never burned by a rollback.
event_head = Table(
    "event_head",
    metadata,
    Column("log", String(16), primary_key=True),  # always "events"
    Column("position", BigInteger, nullable=False),
    Column("hash", String(64), nullable=False),
)

# Positions that never held an event (an append rolled back after taking a PostgreSQL sequence's
# value), found when the chain was first computed. The chain verifier counts any other missing
# position as removed.
event_gaps = Table(
    "event_gaps",
    metadata,
    Column("first_position", BigInteger, primary_key=True, autoincrement=False),
    Column("last_position", BigInteger, nullable=False),
)

# Every log position a projection passed without an event at it, and why.
projection_gaps = Table(
    "projection_gaps",
    metadata,
    Column("gap_id", Integer, primary_key=True, autoincrement=True),
    Column("projection", String(64), nullable=False),
    Column("first_position", BigInteger, nullable=False),
    Column("last_position", BigInteger, nullable=False),
    Column("reason", Text, nullable=False),
    Column("recorded_at", String(19), nullable=False),
    UniqueConstraint("projection", "first_position", name="uq_projection_gaps_start"),
)

# Where a projection stopped because it could not apply the event at ``position``
# (one row per stopped projection, gone once it moves past that position).
projection_faults = Table(
    "projection_faults",
    metadata,
    Column("projection", String(64), primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("error", Text, nullable=False),
    Column("recorded_at", String(19), nullable=False),
)

# The newest search index, serialized, so a starting process loads it instead of
# replaying the whole log (it then follows the log from ``position``).
search_snapshots = Table(
    "search_snapshots",
    metadata,
    Column("snapshot_id", Integer, primary_key=True, autoincrement=True),
    Column("position", BigInteger, nullable=False),
    Column("created", String(19), nullable=False),
    Column("data", LargeBinary, nullable=False),
)

# Read models of projects (the log holds the truth; access checks read the log).
projects = Table(
    "projects",
    metadata,
    Column("project_id", String(36), primary_key=True),
    Column("name", Text, nullable=False),
    Column("owner_user_id", String(36), nullable=False),
    Column("state", String(16), nullable=False),
    Column("created", String(19), nullable=False),
    Column("updated", String(19), nullable=False),
)

project_members = Table(
    "project_members",
    metadata,
    Column("project_id", String(36), primary_key=True),
    Column("user_id", String(36), primary_key=True),
    Column("access", String(8), nullable=False),
)

# The semantic channel's read model (projections/vectors.py): one unit-length float32 vector per live memory and
# model, from the memory's newest version. ``model`` names the model and its dimension, so two models' vectors
# never mix; ``position`` is the log position of the event the vector was made from (readers load what changed
# after the last position they saw). An erasure deletes a memory's rows of every model in its own transaction.
memory_vectors = Table(
    "memory_vectors",
    metadata,
    Column("model", String(128), primary_key=True),
    Column("memory_id", String(36), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Index("ix_memory_vectors_model_position", "model", "position"),
)
