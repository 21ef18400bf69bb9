"""Bringing a vectors projection to the head of the log, apart from the saves: a save never waits for its embedding.

Each step reads a batch of events past the checkpoint (read-only), embeds it with no transaction open, so a slow
model holds no lock a save needs, then writes the rows and moves the checkpoint in one short transaction, and only
if the checkpoint still stands where the batch was read (another catch-up, in this process or a worker, may have
written it meanwhile: its rows stand, this batch is dropped). An erasure committed after the read has deleted its
memories' rows already (``memoryd.storage.vectors.erase_vectors``, which waits on the same checkpoint lock); the
step leaves them out rather than write them back.

The embedder being unavailable is not a fault: the step raises ``EmbeddingUnavailable``, and the loop retries with
a growing pause while searches go on with BM25 alone. An event that cannot be decoded, or that the embedder fails
on otherwise, stops the projection just before it as ``projections.projector`` stops any projection: a fault for
``/readyz`` and ``memoryd status``, until an operator supersedes the event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from sqlalchemy import Connection, select

from events.store import EventStore
from events.types import MemoriesErased, RecordedEvent
from memoryd.embeddings.embedder import EmbeddingUnavailable, Vectors
from memoryd.storage.db import Database
from memoryd.storage.driver import Transaction
from memoryd.storage.schema import event_type_is, events, projection_checkpoints
from projections.projector import Fault, lock_checkpoint, record_fault, save_checkpoint, stopped_at
from projections.vectors import Changes, VectorProjection

BATCH_SIZE = 256  # events per step: one embedder call, one short write
IDLE_SECONDS = 0.5  # between looks at the log once caught up
RETRY_SECONDS, RETRY_CAP_SECONDS = 0.5, 30.0  # the pause after the embedder was unavailable, doubling up to the cap
log = logging.getLogger(__name__)


class VectorCatchUp:
    def __init__(self, database: Database, store: EventStore, projection: VectorProjection,
                 batch_size: int = BATCH_SIZE) -> None:
        self.database, self.store, self.projection, self.batch_size = database, store, projection, batch_size

    def checkpoint(self) -> int:
        with self.database.read() as conn:
            found = conn.execute(select(projection_checkpoints.c.position)
                                 .where(projection_checkpoints.c.name == self.projection.name)).scalar()
        return int(found or 0)

    def step(self) -> tuple[int, bool]:
        """One batch: the checkpoint reached, and whether events may remain past it (False: at the head, or
        stopped on an event). Raises ``EmbeddingUnavailable`` with nothing written."""
        start = self.checkpoint()
        with self.database.read() as conn:
            batch = self.store.read_after(conn, start, self.batch_size)
            if batch:
                superseded = self.store.superseded(conn)
                batch = [superseded[e.position].stand_in(e) if e.position in superseded else e for e in batch]
        if not batch:
            return start, False
        changes, fault = self._decoded(batch)
        vectors, fault = self._embedded(changes, fault, batch)
        end = fault.position - 1 if fault else batch[-1].position
        with self.database.transaction(Transaction) as tx:
            if lock_checkpoint(tx.conn, self.projection.name) != start:  # another catch-up wrote this batch
                return self.checkpoint(), True
            if erased := _erased_after(tx.conn, end):
                vectors = _without(changes, vectors, erased)
            self.projection.write(tx.conn, changes, vectors)
            save_checkpoint(tx.conn, self.projection.name, end)
        if fault is not None:
            record_fault(self.database, fault)
            return end, False
        return end, len(batch) == self.batch_size

    def run(self) -> int:
        """Step until the head (or a fault); the checkpoint reached. Raises ``EmbeddingUnavailable``."""
        while True:
            reached, more = self.step()
            if not more:
                return reached

    def _decoded(self, batch: list[RecordedEvent]) -> tuple[Changes, Fault | None]:
        """The batch's changes up to the first event that cannot be decoded (and that event's fault)."""
        changes = Changes()
        for recorded in batch:
            try:
                changes.add(recorded)
            except Exception as error:
                return changes, stopped_at(self.projection.name, recorded)(error).fault
        return changes, None

    def _embedded(self, changes: Changes, fault: Fault | None, batch: list[RecordedEvent]
                  ) -> tuple[Vectors, Fault | None]:
        """The changes' vectors; when the embedder fails (other than unavailable) on the batch, the changes are cut
        before the first event whose text it fails on, and that event is the fault."""
        try:
            return self.projection.embed(changes), fault
        except EmbeddingUnavailable:
            raise
        except Exception:
            log.warning("embedding a batch for %s failed; embedding its events one by one", self.projection.name)
        kept = Changes()
        for recorded in batch:
            if fault is not None and recorded.position >= fault.position:
                break
            alone = Changes()
            alone.add(recorded)
            try:
                self.projection.embed(alone)
            except EmbeddingUnavailable:
                raise
            except Exception as error:
                fault = stopped_at(self.projection.name, recorded)(error).fault
                break
            kept.add(recorded)
        changes.latest = kept.latest
        return self.projection.embed(changes), fault


class VectorLoop(threading.Thread):
    """The catch-up, run in the background: by the serving process without workers, by ``memoryd worker`` with."""

    def __init__(self, catch_up: VectorCatchUp, idle_seconds: float = IDLE_SECONDS) -> None:
        super().__init__(name=f"memoryd-{catch_up.projection.name}", daemon=True)
        self.catch_up, self.idle_seconds = catch_up, idle_seconds
        self.stopped = threading.Event()

    def run(self) -> None:
        pause = RETRY_SECONDS
        while not self.stopped.is_set():
            try:
                _, more = self.catch_up.step()
                pause = RETRY_SECONDS
                wait = 0.0 if more else self.idle_seconds
            except EmbeddingUnavailable as error:
                log.warning("%s: the embedder is unavailable (%s); retrying in %.1f s (search uses BM25 alone "
                            "for memories without a vector)", self.catch_up.projection.name, error, pause)
                wait, pause = pause, min(pause * 2, RETRY_CAP_SECONDS)
            except Exception:
                log.exception("%s: catch-up failed; retrying in %.1f s", self.catch_up.projection.name, pause)
                wait, pause = pause, min(pause * 2, RETRY_CAP_SECONDS)
            self.stopped.wait(wait)

    def stop(self, timeout: float = 10.0) -> None:
        self.stopped.set()
        self.join(timeout)


def _erased_after(conn: Connection, position: int) -> list[str]:
    """The memories erasures past ``position`` took out (committed after the batch was read)."""
    query = select(events.c.payload).where(event_type_is(MemoriesErased.event_type), events.c.position > position)
    return [memory_id for payload in conn.execute(query).scalars()
            for memory_id in MemoriesErased.from_payload(payload).memory_ids]


def _without(changes: Changes, vectors: Vectors, erased: Sequence[str]) -> Vectors:
    """``changes`` with ``erased`` gone instead of embedded, and their rows out of ``vectors``."""
    out = set(erased)
    kept = [index for index, (memory_id, _) in enumerate(changes.to_embed) if memory_id not in out]
    changes.forget(erased)
    return vectors[kept]
