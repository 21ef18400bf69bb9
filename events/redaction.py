"""Redaction, the one change the log ever takes: an erasure's events lose their content, the chain keeps
verifying (``events/chain.py``)."""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select, update

from events.chain import erased_stream_id
from events.types import ErasedEvent
from memoryd.storage.schema import events

AT_ONCE = 1_000  # positions per statement: databases cap bound parameters
_REDACT = update(events).where(events.c.position == bindparam("at")).values(
    payload=bindparam("stub"), stream_id=bindparam("erased_stream"))


def redact(conn: Connection, erased_by: int, memory_of: dict[int, str]) -> None:
    """(In the erasure at ``erased_by``'s transaction) Replace the payloads of the events at ``memory_of``'s
    positions by content-free stubs and their stream ids (which name the memory) by digests."""
    positions = sorted(memory_of)
    for first in range(0, len(positions), AT_ONCE):
        chunk = positions[first:first + AT_ONCE]
        streams = dict(conn.execute(select(events.c.position, events.c.stream_id)
                                    .where(events.c.position.in_(chunk))).all())
        conn.execute(_REDACT, [{"at": position, "stub": ErasedEvent.stub(erased_by, memory_of[position]),
                                "erased_stream": erased_stream_id(streams[position], erased_by)}
                               for position in chunk])
