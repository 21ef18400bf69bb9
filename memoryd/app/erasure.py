"""Erasure with a certificate: run the erasure, let every read model take it in, and check that each one is
free of the erased memories before saying so.

The command (``commands/erasure.py``) redacts the log, forgets the idempotency answers and deletes the
memories' vectors in one transaction. Then this service waits for the table projection to pass the erasure,
catches this process's search index up (which builds it again from the redacted log), drops the search snapshots
taken before it, and reads each store back: the certificate reports what it found, not what it meant
to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select

from commands.bus import CommandBus
from commands.erasure import EraseMemories, checked
from events.erasure import AT_ONCE, events_of, memories_selected, newest_versions
from events.idempotency import IdempotencyClaim
from events.store import EventStore
from events.types import ErasedEvent, EventMetadata, MemoriesErased
from memoryd.kernel.errors import NotFound
from memoryd.storage.db import Database
from memoryd.storage.schema import event_type_is, events, idempotency_keys, search_snapshots, structured_memories
from memoryd.storage.vectors import count_vectors
from projections.projector import Projector
from projections.search import SearchService
from projections.vector_index import VectorIndex


@dataclass(frozen=True)
class Check:
    store: str
    free: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "free": self.free, "detail": self.detail}


class Erasures:
    def __init__(self, bus: CommandBus, store: EventStore, projector: Projector, search: SearchService,
                 wait_seconds: float, vectors: VectorIndex | None = None) -> None:
        self.bus, self.store, self.projector, self.search = bus, store, projector, search
        self.wait_seconds = wait_seconds
        self.vectors = vectors  # this process's vectors in memory, when the semantic channel is on

    @property
    def database(self) -> Database:
        return self.store.database

    def erase(self, selector: dict[str, str], reason: str, metadata: EventMetadata,
              claim: IdempotencyClaim | None = None) -> tuple[dict[str, Any], bool]:
        """Erase what ``selector`` names: the certificate (``free`` is true only if every check found nothing),
        and whether this call erased (False: an earlier erasure of the same selector had left nothing to
        erase, and its certificate is issued again after its steps are run again, so a retry after a failure
        or a timeout finishes the work)."""
        command = EraseMemories(selector, reason)
        try:
            outcome = self.bus.handle(command, metadata, claim)
            erasure, position, forgotten, erased_now = (outcome.erasure, outcome.position,
                                                        outcome.idempotency_keys_forgotten, True)
        except NotFound:
            if (earlier := self._earlier(checked(command)[0])) is None:
                raise
            (position, erasure), forgotten, erased_now = earlier, 0, False
        projected, reached = self.projector.wait_for(position, self.wait_seconds)
        self.search.catch_up()
        dropped = self.search.drop_snapshots_before(position)
        checks = [self._log(erasure.positions, position), self._table(erasure.memory_ids, projected, reached),
                  self._index(erasure.memory_ids), self._vectors(erasure.memory_ids), self._snapshots(position),
                  self._answers(erasure.positions)]
        recorded = self.store.event_at(position)
        return {"position": position, "erased_at": recorded.recorded_at if recorded else "",
                "erased_by": recorded.metadata.get("actor_user_id", "") if recorded else "",
                "selector": erasure.selector, "reason": erasure.reason,
                "memories": erasure.memory_ids, "positions": erasure.positions,
                "idempotency_keys_forgotten": forgotten, "snapshots_dropped": dropped,
                "checks": [check.to_dict() for check in checks], "free": all(check.free for check in checks)}, erased_now

    def preview(self, selector: dict[str, str]) -> dict[str, Any]:
        """What ``erase`` would take out now, changing nothing: the memories (each as its newest write left
        it, so a deleted one shows too) and the log positions whose payloads it would redact."""
        selector = checked(EraseMemories(selector, "preview"))[0]
        with self.database.read() as conn:
            memory_ids = memories_selected(conn, selector)
            positions = sorted(events_of(conn, memory_ids))
            newest = newest_versions(conn, memory_ids)
        memories = [{"memory_id": memory_id, **{key: newest.get(memory_id, {}).get(key, "")
                                               for key in ("name", "scope", "scope_id", "type", "description")}}
                    for memory_id in memory_ids]
        return {"selector": selector, "memories": memories, "positions": positions}

    def _earlier(self, selector: dict[str, str]) -> tuple[int, MemoriesErased] | None:
        """The newest erasure of exactly this selector, and its position."""
        query = (select(events.c.position, events.c.payload).where(event_type_is(MemoriesErased.event_type))
                 .order_by(events.c.position.desc()))
        with self.database.read() as conn:
            for position, payload in conn.execute(query):
                if (erasure := MemoriesErased.from_payload(payload)).selector == selector:
                    return int(position), erasure
        return None

    def _log(self, positions: list[int], erased_by: int) -> Check:
        stored = self.store.events_at(positions)
        stubs = [at for at, event in stored.items() if (stub := ErasedEvent.of(event.payload)) and stub.erased_by == erased_by]
        return Check("log", len(stubs) == len(positions),
                     f"{len(stubs)} of {len(positions)} events hold a content-free stub; their digests keep the chain")

    def _table(self, memory_ids: list[str], projected: bool, reached: int) -> Check:
        left = self._counted(structured_memories.c.memory_id, memory_ids)
        if not projected:
            return Check("structured_memories", False, f"the projection is at position {reached}, before the erasure")
        return Check("structured_memories", left == 0, f"{left} rows of erased memories")

    def _index(self, memory_ids: list[str]) -> Check:
        held = self.search.catch_up().holding(memory_ids)
        return Check("search index", not held, f"{len(held)} erased memories indexed in this process, built again "
                                               "from the log (other processes build theirs when they reach it)")

    def _vectors(self, memory_ids: list[str]) -> Check:
        with self.database.read() as conn:
            left = count_vectors(conn, memory_ids)
        held = self.vectors.holding(memory_ids) if self.vectors is not None else []
        return Check("vectors", left == 0 and not held, f"{left} stored vectors of erased memories (any embedding "
                                                        f"model), {len(held)} held in this process's memory")

    def _snapshots(self, position: int) -> Check:
        with self.database.read() as conn:
            older = conn.execute(select(func.count()).select_from(search_snapshots)
                                 .where(search_snapshots.c.position < position)).scalar_one()
        try:
            files = len(self.search.files.before(position))
        except OSError as error:
            return Check("search snapshots", False, f"{older} stored snapshots taken before the erasure; this host's "
                                                    f"snapshot files could not be listed ({error})")
        return Check("search snapshots", older == 0 and files == 0,
                     f"{older} stored snapshots taken before the erasure, {files} files of them on this host")

    def _answers(self, positions: list[int]) -> Check:
        left = self._counted(idempotency_keys.c.position, positions)
        return Check("idempotency answers", left == 0, f"{left} stored answers of erased writes")

    def _counted(self, column: Any, values: Sequence[Any]) -> int:
        """Rows whose ``column`` is one of ``values``, counted a bounded number of values at a time."""
        with self.database.read() as conn:
            return sum(int(conn.execute(select(func.count()).select_from(column.table)
                                        .where(column.in_(values[first:first + AT_ONCE]))).scalar_one())
                       for first in range(0, len(values), AT_ONCE))
