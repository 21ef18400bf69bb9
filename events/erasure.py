"""What an erasure takes out of the log: the events of the memories it names, found by reading the log.

A memory's events are all of its versions (whoever wrote them), plus any event that superseded one of
them (a supersede's replacement carries the memory too). Memories already erased are found no more:
their payloads hold only stubs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select

from events.types import MEMORY_DELETED, MEMORY_SAVED, MEMORY_UPDATED, EventSuperseded, MemoriesErased
from memoryd.storage.schema import event_type_is, events

AT_ONCE = 500  # ids or positions per statement: databases cap bound parameters
PERSONAL_SCOPES = ("user", "coordinator")  # a user's own scopes, keyed by the user's id

_MEMORY = events.c.payload[("memory", "memory_id")].as_string()
_SCOPE = events.c.payload[("memory", "scope")].as_string()
_SCOPE_ID = events.c.payload[("memory", "scope_id")].as_string()
_WRITES = events.c.event_type.in_([MEMORY_SAVED, MEMORY_UPDATED, MEMORY_DELETED])


def memories_selected(conn: Connection, selector: dict[str, str]) -> list[str]:
    """The ids of the memories ``selector`` names, from the log (deleted ones included), sorted:

    * ``user_id``: every memory in the user's ``user`` and ``coordinator`` scopes, and every memory one of
      whose events the user authored, in any scope;
    * ``memory_id``: that memory;
    * ``scope`` and ``scope_id``: every memory of that namespace.
    """
    if "user_id" in selector:
        user = selector["user_id"]
        where: Any = or_(and_(_SCOPE.in_(PERSONAL_SCOPES), _SCOPE_ID == user),
                         events.c.meta["actor_user_id"].as_string() == user)
    elif "memory_id" in selector:
        where = _MEMORY == selector["memory_id"]
    else:
        where = and_(_SCOPE == selector["scope"], _SCOPE_ID == selector["scope_id"])
    found = conn.execute(select(_MEMORY).where(_WRITES, where).distinct()).scalars()
    return sorted(memory_id for memory_id in found if memory_id)


def events_of(conn: Connection, memory_ids: Sequence[str]) -> dict[int, str]:
    """Every event to redact for these memories: position -> memory id (supersedes of their events too)."""
    found: dict[int, str] = {}
    for chunk in _chunks(memory_ids):
        query = select(events.c.position, _MEMORY).where(_WRITES, _MEMORY.in_(chunk))
        found.update({int(position): memory_id for position, memory_id in conn.execute(query)})
    superseded = events.c.payload["position"].as_integer()
    for chunk in _chunks(sorted(found)):
        query = select(events.c.position, superseded).where(
            event_type_is(EventSuperseded.event_type), superseded.in_(chunk))
        found.update({int(position): found[int(target)] for position, target in conn.execute(query)})
    return found


def newest_versions(conn: Connection, memory_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each memory as its newest write in the log left it (a delete: as it was), by id."""
    newest: dict[str, tuple[int, dict[str, Any]]] = {}
    for chunk in _chunks(memory_ids):
        query = select(events.c.position, events.c.payload).where(_WRITES, _MEMORY.in_(chunk))
        for position, payload in conn.execute(query):
            memory = payload["memory"]
            if memory["memory_id"] not in newest or newest[memory["memory_id"]][0] < position:
                newest[memory["memory_id"]] = (int(position), memory)
    return {memory_id: memory for memory_id, (_, memory) in newest.items()}


def erased_positions(conn: Connection) -> dict[int, int]:
    """Every position an erasure redacted -> that erasure's position (what the chain verifier accepts)."""
    found: dict[int, int] = {}
    for position, payload in conn.execute(select(events.c.position, events.c.payload)
                                          .where(event_type_is(MemoriesErased.event_type))):
        found.update(dict.fromkeys((int(redacted) for redacted in payload.get("positions", ())), int(position)))
    return found


def newest_erasure(conn: Connection) -> int:
    """The position of the newest erasure in the log (0: none)."""
    return int(conn.execute(select(func.coalesce(func.max(events.c.position), 0))
                            .where(event_type_is(MemoriesErased.event_type))).scalar_one())


def erasures_since(conn: Connection, after: int, besides: int | None) -> bool:
    """Whether an erasure past ``after`` is in the log, other than the one at ``besides``."""
    query = select(events.c.position).where(event_type_is(MemoriesErased.event_type), events.c.position > after)
    if besides is not None:
        query = query.where(events.c.position != besides)
    return conn.execute(query.limit(1)).first() is not None


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for first in range(0, len(items), AT_ONCE):
        yield items[first:first + AT_ONCE]
