"""Erasure with a certificate: run the erasure, let every read model take it in, and check that each one is
free of the erased memories before saying so.

The command (``commands/erasure.py``) redacts the log and forgets the idempotency answers in one
transaction. Then this service waits for the table projection to pass the erasure, catches this
process's search index up (which builds it again from the redacted log), drops the search snapshots
taken before it, and reads each store back: the certificate reports what it found, not what it meant
to do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from commands.bus import CommandBus
from commands.erasure import EraseMemories
from events.idempotency import IdempotencyClaim
from events.store import EventStore
from events.types import ErasedEvent, EventMetadata
from memoryd.db import Database
from memoryd.schema import idempotency_keys, search_snapshots, structured_memories
from projections.projector import Projector
from projections.search import SearchService


@dataclass(frozen=True)
class Check:
    store: str
    free: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "free": self.free, "detail": self.detail}


class Erasures:
    def __init__(self, bus: CommandBus, store: EventStore, projector: Projector, search: SearchService,
                 wait_seconds: float) -> None:
        self.bus, self.store, self.projector, self.search = bus, store, projector, search
        self.wait_seconds = wait_seconds

    @property
    def database(self) -> Database:
        return self.store.database

    def erase(self, selector: dict[str, str], reason: str, metadata: EventMetadata,
              claim: IdempotencyClaim | None = None) -> dict[str, Any]:
        """Erase what ``selector`` names; the certificate (``free`` is true only if every check found nothing)."""
        outcome = self.bus.handle(EraseMemories(selector, reason), metadata, claim)
        erasure, position = outcome.erasure, outcome.position
        projected, reached = self.projector.wait_for(position, self.wait_seconds)
        self.search.catch_up()
        dropped = self.search.drop_snapshots_before(position)
        checks = [self._log(erasure.positions, position), self._table(erasure.memory_ids, projected, reached),
                  self._index(erasure.memory_ids), self._snapshots(position), self._answers(erasure.positions)]
        recorded = self.store.event_at(position)
        return {"position": position, "erased_at": recorded.recorded_at if recorded else "",
                "erased_by": metadata.actor_user_id, "selector": erasure.selector, "reason": erasure.reason,
                "memories": erasure.memory_ids, "positions": erasure.positions,
                "idempotency_keys_forgotten": outcome.idempotency_keys_forgotten, "snapshots_dropped": dropped,
                "checks": [check.to_dict() for check in checks], "free": all(check.free for check in checks)}

    def _log(self, positions: list[int], erased_by: int) -> Check:
        stored = self.store.events_at(positions)
        stubs = [at for at, event in stored.items() if (stub := ErasedEvent.of(event.payload)) and stub.erased_by == erased_by]
        return Check("log", len(stubs) == len(positions),
                     f"{len(stubs)} of {len(positions)} events hold a content-free stub; their digests keep the chain")

    def _table(self, memory_ids: list[str], projected: bool, reached: int) -> Check:
        with self.database.read() as conn:
            left = conn.execute(select(func.count()).select_from(structured_memories)
                                .where(structured_memories.c.memory_id.in_(memory_ids))).scalar_one()
        if not projected:
            return Check("structured_memories", False, f"the projection is at position {reached}, before the erasure")
        return Check("structured_memories", left == 0, f"{left} rows of erased memories")

    def _index(self, memory_ids: list[str]) -> Check:
        held = self.search.catch_up().holding(memory_ids)
        return Check("search index", not held, f"{len(held)} erased memories indexed in this process, built again "
                                               "from the log (other processes build theirs when they reach it)")

    def _snapshots(self, position: int) -> Check:
        with self.database.read() as conn:
            older = conn.execute(select(func.count()).select_from(search_snapshots)
                                 .where(search_snapshots.c.position < position)).scalar_one()
        return Check("search snapshots", older == 0, f"{older} stored snapshots taken before the erasure")

    def _answers(self, positions: list[int]) -> Check:
        with self.database.read() as conn:
            left = conn.execute(select(func.count()).select_from(idempotency_keys)
                                .where(idempotency_keys.c.position.in_(positions))).scalar_one()
        return Check("idempotency answers", left == 0, f"{left} stored answers of erased writes")
