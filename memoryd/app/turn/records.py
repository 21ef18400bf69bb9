"""What turns leave behind: the session's turn counter, receipts, and nudge cooldowns.

These are records of reads, kept beside the log (like the access counters):
nothing derives them from the log and a projection rebuild leaves them alone.
Every function takes the caller's connection, so one turn records all of it
in one transaction or none of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Text, bindparam, cast, delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from memoryd.storage.schema import nudge_deliveries, sessions, turn_receipts


@dataclass(frozen=True)
class Receipt:
    receipt_id: str
    session_id: str
    turn_id: str
    turn: int
    created: str
    position: int
    request_sha256: str
    block_sha256: str
    system_sha256: str
    details: dict[str, Any]  # placement, memory_enabled, tool_visible, in_scope, candidates, items, nudges, ...


# Built once: a turn runs these (building a statement costs more than SQLite takes to run it).
_TURNS = select(sessions.c.turns).where(sessions.c.session_id == bindparam("session_id"))
_NEXT_TURN = (update(sessions).where(sessions.c.session_id == bindparam("which_session"))
              .values(turns=sessions.c.turns + 1).returning(sessions.c.turns))
_RECORD = insert(turn_receipts)
_FIND = select(turn_receipts).where(turn_receipts.c.session_id == bindparam("session_id"),
                                    turn_receipts.c.turn_id == bindparam("turn_id"))
_AGAIN = (update(nudge_deliveries)
          .where(nudge_deliveries.c.session_id == bindparam("which_session"),
                 nudge_deliveries.c.nudge_type == bindparam("which_type"),
                 nudge_deliveries.c.delivered_ms <= bindparam("cutoff"))
          .values(delivered_ms=bindparam("now")).returning(nudge_deliveries.c.nudge_type))
_FIRST = {dialect: insert_of(nudge_deliveries).on_conflict_do_nothing().returning(nudge_deliveries.c.nudge_type)
          for dialect, insert_of in (("postgresql", postgres_insert), ("sqlite", sqlite_insert))}


def turns_so_far(conn: Connection, session_id: str) -> int:
    return int(conn.execute(_TURNS, {"session_id": session_id}).scalar() or 0)


def next_turn(conn: Connection, session_id: str) -> int:
    """Count one more turn and answer its number; holds the session's row, so a session's turns queue here."""
    return int(conn.execute(_NEXT_TURN, {"which_session": session_id}).scalar_one())


def record(conn: Connection, receipt: Receipt) -> None:
    conn.execute(_RECORD, receipt.__dict__)


def find(conn: Connection, session_id: str, turn_id: str) -> Receipt | None:
    row = conn.execute(_FIND, {"session_id": session_id, "turn_id": turn_id}).first()
    return Receipt(**row._mapping) if row else None


def page(conn: Connection, session_id: str, after_turn: int, limit: int) -> list[Receipt]:
    """Receipts of a session in turn order, after ``after_turn``."""
    query = (select(turn_receipts).where(turn_receipts.c.session_id == session_id, turn_receipts.c.turn > after_turn)
             .order_by(turn_receipts.c.turn).limit(limit))
    return [Receipt(**row._mapping) for row in conn.execute(query)]


def showing(conn: Connection, memory_id: str, limit: int) -> list[Receipt]:
    """The newest receipts (newest first) whose turn put ``memory_id`` in front of the model. The receipts
    are scanned, the id matched in their details' text and then checked item by item: no index serves this
    auditor's question, and receipts expire, so the scan stays as long as the retention."""
    query = (select(turn_receipts).where(cast(turn_receipts.c.details, Text).contains(memory_id, autoescape=True))
             .order_by(turn_receipts.c.created.desc(), turn_receipts.c.turn.desc(), turn_receipts.c.receipt_id)
             .limit(limit))
    found = [Receipt(**row._mapping) for row in conn.execute(query)]
    return [receipt for receipt in found
            if any(item.get("memory_id") == memory_id for item in receipt.details.get("items", ()))]


def purge(conn: Connection, created_before: str, delivered_before_ms: int) -> None:
    """Forget receipts older than the retention, and nudge deliveries whose cooldown ended before it."""
    conn.execute(delete(turn_receipts).where(turn_receipts.c.created < created_before))
    conn.execute(delete(nudge_deliveries).where(nudge_deliveries.c.delivered_ms < delivered_before_ms))


def charge(conn: Connection, session_id: str, nudge_type: str, now_ms: int, cooldown_ms: int) -> bool:
    """Take the nudge type's cooldown for the session if it has run out; False if another delivery holds it.

    The first delivery inserts the row; later ones move it forward only if the
    last delivery is at least ``cooldown_ms`` old. Both are single statements on
    the row, so two processes racing for one nudge cannot both win it.
    """
    row = {"session_id": session_id, "nudge_type": nudge_type, "delivered_ms": now_ms}
    if conn.execute(_FIRST[conn.dialect.name], row).first() is not None:  # RETURNING: rowcount may be -1
        return True
    again = {"which_session": session_id, "which_type": nudge_type, "cutoff": now_ms - cooldown_ms, "now": now_ms}
    return conn.execute(_AGAIN, again).first() is not None


def deliveries(conn: Connection, session_id: str) -> dict[str, int]:
    """When each nudge type was last delivered to the session (milliseconds since the epoch)."""
    rows = conn.execute(select(nudge_deliveries.c.nudge_type, nudge_deliveries.c.delivered_ms)
                        .where(nudge_deliveries.c.session_id == session_id))
    return {row.nudge_type: int(row.delivered_ms) for row in rows}
