"""This process's search index, fed from the log and rebuildable with an atomic swap.

Each API process holds its own ``SearchIndex``. On first use it maps the
newest snapshot (which workers and ``memoryd projections rebuild search``
store) from this host's file of it, which every process on the host shares
(``snapshot_files``), or, when there is none or it was made by another
analyzer, builds the index from the log; then it follows the log: before every search it applies
whatever was committed since, so a search always sees every committed write
(one indexed range read when there is nothing new). A rebuild fills a fresh
index from the log while the old one keeps serving, catches it up, then swaps
it in: readers never see an empty or half-built index.

An event the index cannot apply stops it just before that event, visibly
(``fault``, shown by ``/readyz``); searches keep answering from what it
holds, and it moves on once the event is superseded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

import projections.search.snapshot as snapshot
from events.erasure import newest_erasure
from events.store import EventStore, take_append_lock
from events.streams import memory_versions
from events.types import ErasedEvent, EventSuperseded, MemoriesErased, RecordedEvent
from memoryd.kernel.domain import Memory, utc_timestamp
from memoryd.storage.schema import search_snapshots
from projections.filters import MemoryFilter
from projections.projector import Fault, ProjectionStopped
from projections.queries import memories_in_order
from projections.search.analysis import Analyzer
from projections.search.fused import FusedSearch
from projections.search.index import IndexShape, SearchIndex
from projections.search.reading import Candidates, Hit
from projections.search.snapshot import SnapshotCorrupt, SnapshotFormatError
from projections.search.snapshot_files import SnapshotFiles

PAGE = 2_000
NAME = "search"
VERSIONS_KEPT = 10_000  # memory versions kept for rendering, the last indexed or used (a version never changes unless superseded)
log = logging.getLogger(__name__)
Progress = Callable[[int], None]  # called with the number of events just applied


class SearchService:
    def __init__(self, store: EventStore, k1: float, b: float, snapshot_dir: Path,
                 analyzer: Analyzer | None = None, fused: FusedSearch | None = None) -> None:
        """``fused``: the semantic channel's ranking (None: BM25 alone)."""
        self.store = store
        self.fused = fused
        self.files = SnapshotFiles(snapshot_dir)
        self.k1, self.b = k1, b
        self.analyzer = analyzer or Analyzer()
        self._index: SearchIndex | None = None
        self.origin = "not loaded yet: the first search loads it"  # where the live index came from, for /readyz
        self._building = False  # the first index is being built from the log
        self._following = threading.Lock()  # one catch-up at a time; others wait for it
        self.fault: Fault | None = None  # where the live index stopped, if it did
        self._versions: OrderedDict[int, Memory] = OrderedDict()  # by log position, least recently used first
        self._versions_lock = threading.Lock()
        self._supersedes = 0  # supersedes and erasures seen; a read that raced one is not kept

    def search(self, where: MemoryFilter, query: str, limit: int) -> list[Hit]:
        index = self.catch_up()
        if self.fused is None:
            return index.search(where, query, limit)
        return [Hit(candidate.memory_id, candidate.score or 0.0)
                for candidate in self.fused.candidates(index, where, query, limit)[0].ranked]

    def candidates(self, where: MemoryFilter, query: str, limit: int) -> Candidates:
        """Ranked (or, with no words, newest) candidates and the count in scope, at one caught-up position."""
        return self.ranked(self.catch_up(), where, query, limit)[0]

    def ranked(self, index: SearchIndex, where: MemoryFilter, query: str, limit: int) -> tuple[Candidates, str | None]:
        """``index``'s candidates, fused with the semantic channel's when it is on; and why they are BM25's
        alone when the channel is on but could not answer (None otherwise)."""
        if self.fused is None:
            return index.candidates(where, query, limit), None
        return self.fused.candidates(index, where, query, limit)

    def versions(self, positions: list[int]) -> dict[int, Memory]:
        """The memory each position's event left, as ``events.streams.memory_versions``; the versions recently
        used or indexed are kept.

        A version is immutable: only a supersede changes what a position means, and
        following the log drops that position from what is kept.
        """
        with self._versions_lock:
            found = {position: self._versions[position] for position in positions if position in self._versions}
            for position in found:
                self._versions.move_to_end(position)
            supersedes = self._supersedes
        missing = [position for position in positions if position not in found]
        if missing:
            read = memory_versions(self.store, missing)
            found |= read
            self._keep(read, supersedes)
        return found

    def _keep(self, versions: dict[int, Memory], supersedes: int | None = None) -> None:
        """Keep these versions, the newest used last; read ones (``supersedes`` counted before the read) only if
        no supersede landed since."""
        with self._versions_lock:
            if supersedes is not None and supersedes != self._supersedes:  # it may have been the superseded one
                return
            self._versions.update(versions)
            while len(self._versions) > VERSIONS_KEPT:
                self._versions.popitem(last=False)

    def catch_up(self) -> SearchIndex:
        """The live index, with every event committed so far applied."""
        with self._following:
            if self._index is None:
                self._index = self._first_index()
            fault = self._feed(self._index)
            if self._index.held_erased:  # its parts still hold what an erasure took out: from the log again
                with self.store.database.read() as conn:
                    self.files.remove_before(newest_erasure(conn))  # and this host's files of earlier snapshots
                self._index = self._from_the_log()
                log.warning("the search index was built again from the log after an erasure (position %d)",
                            self._index.position)
            if fault is not None and fault != self.fault:
                log.error("%s", fault.describe())
            self.fault = fault
            return self._index

    def _first_index(self) -> SearchIndex:
        """(Following) the newest stored snapshot's index, or one built from the log, saying why."""
        loaded, refused = self._snapshot_index()
        if loaded is not None:
            self.origin = f"the stored snapshot at position {loaded.position}"
            return loaded
        self.origin, self._building = f"building from the log: {refused}", True
        log.info("building the search index from the log (%s), analyzer %s", refused, self.analyzer.identity)
        started = time.monotonic()
        try:
            built = self._from_the_log()
        finally:
            self._building = False
        self.origin = f"built from the log: {refused}"
        log.info("search index built from the log in %.1f s: %d memories, position %d", time.monotonic() - started,
                 len(built), built.position)
        return built

    def shape(self) -> IndexShape | None:
        """The live index's shape, without loading or catching it up (for metrics); None until it is loaded."""
        index = self._index
        return index.shape() if index is not None else None

    def position(self) -> int:
        """The log position the live index has applied, without catching it up; 0 until it is loaded."""
        index = self._index
        return index.position if index is not None else 0

    def current_fault(self) -> Fault | None:
        """Where the live index is stopped now (it first tries to follow the log); None if not loaded yet, or
        still being built."""
        if self._index is not None and not self._building:
            self.catch_up()
        return self.fault

    def building(self) -> bool:
        """The first index is being built from the log: searches wait for it."""
        return self._building

    def empty_index(self) -> SearchIndex:
        """A new index with this service's ranking and analyzer, holding nothing."""
        return SearchIndex(self.k1, self.b, analyzer=self.analyzer)

    def warm_up(self) -> threading.Thread:
        """Load or build the index, then the semantic channel's model, in the background, so the first search
        need not wait."""
        thread = threading.Thread(target=self._warm, name="memoryd-search-warm-up", daemon=True)
        thread.start()
        return thread

    def _warm(self) -> None:
        self.catch_up()
        if self.fused is not None:
            self.fused.channel.warm()

    def save_snapshot(self) -> int:
        """Store the caught-up index for other processes to start from; keep only the newest."""
        reached = -1
        while True:
            index = self.catch_up()
            if index.position == reached:  # stopped before an erasure it cannot pass: store nothing
                log.warning("no search snapshot stored: the index is stopped at position %d, before an erasure",
                            reached)
                return self.snapshot_position()
            reached, blob = index.position, index.to_bytes(self.log_hash(index.position))
            with self.store.database.write() as conn:
                take_append_lock(conn)  # no erasure commits between the check and the insert
                if newest_erasure(conn) > index.position:  # it may hold what the erasure took out: again
                    continue
                conn.execute(insert(search_snapshots).values(position=index.position, created=utc_timestamp(),
                                                             data=blob))
                conn.execute(delete(search_snapshots).where(search_snapshots.c.position < index.position))
            return index.position

    def snapshot_position(self) -> int:
        with self.store.database.read() as conn:
            return int(conn.execute(select(func.coalesce(func.max(search_snapshots.c.position), 0))).scalar_one())

    def newest_snapshot(self) -> SearchIndex | None:
        """The index the newest stored snapshot holds, mapped from this host's file of it (written from the
        database first if need be); None if there is none, or it was refused: another index version, bytes
        that fail its checksum, a snapshot of another log, or of another analyzer. This host's files of older
        snapshots go."""
        return self._snapshot_index()[0]

    def _snapshot_index(self) -> tuple[SearchIndex | None, str]:
        """``newest_snapshot``, and when there is none to serve, why."""
        newest = select(search_snapshots.c.position, search_snapshots.c.snapshot_id) \
            .order_by(search_snapshots.c.position.desc(), search_snapshots.c.snapshot_id.desc()).limit(1)
        for _ in range(3):  # a snapshot stored meanwhile deletes the row looked up: look again
            with self.store.database.read() as conn:  # never one taken before an erasure: it holds what was erased
                erased = newest_erasure(conn)
                row = conn.execute(newest.where(search_snapshots.c.position >= erased)).first()
            if row is None:
                self.files.remove_before(erased)
                return None, "no snapshot is stored"
            position, snapshot_id = int(row.position), int(row.snapshot_id)
            expected = self.log_hash(position)
            self.files.remove_older(position, snapshot_id)
            loaded = self.files.open(position, snapshot_id)
            if loaded is not None and loaded.log_hash != expected:  # a file of another database at this path once
                self.files.refuse(self.files.path(position, snapshot_id), "a snapshot of another log")
                loaded = None
            try:
                loaded = loaded or self._fetched(position, snapshot_id, expected)
            except (SnapshotFormatError, SnapshotCorrupt) as error:
                return None, self._refused(position, error)
            if loaded is None:
                continue
            try:
                return SearchIndex.from_snapshot(loaded, self.k1, self.b, analyzer=self.analyzer), ""
            except SnapshotFormatError as error:  # another analyzer's: the file stays, for the processes it serves
                return None, self._refused(position, error)
        log.warning("the stored search snapshots kept changing while this process looked; building the index from "
                    "the log")
        return None, "the stored snapshots kept changing while this process looked"

    @staticmethod
    def _refused(position: int, error: Exception) -> str:
        reason = f"the stored snapshot at position {position} was refused: {error}"
        log.warning("%s; building the search index from the log", reason)
        return reason

    def _fetched(self, position: int, snapshot_id: int, log_hash: str) -> snapshot.Snapshot | None:
        """The stored snapshot, checked (``log_hash`` is this log's at ``position``), written to this host's file
        and mapped (read into this process alone if the file cannot be written); None if the row is gone."""
        with self.store.database.read() as conn:
            blob = conn.execute(select(search_snapshots.c.data)
                                .where(search_snapshots.c.snapshot_id == snapshot_id)).scalar()
        if blob is None:
            return None
        if snapshot.verified(blob) != (position, log_hash):
            raise SnapshotFormatError("it was taken of another log")
        try:
            return self.files.write(position, snapshot_id, blob)
        except OSError as error:
            log.warning("cannot write the search snapshot to %s (%s): this process holds a copy of its own",
                        self.files.directory, error)
            return snapshot.load(blob)

    def log_hash(self, position: int) -> str:
        """The hash of the log's event at ``position``: what a snapshot of this log records."""
        event = self.store.event_at(position) if position else None
        return event.hash if event is not None else ""

    def rebuild(self, progress: Progress | None = None) -> SearchIndex:
        """Build a fresh index from the whole log, then swap it in once caught up."""
        fresh = self._from_the_log(progress)  # the live index keeps serving meanwhile
        with self._following:
            fault = self._feed(fresh, progress)  # what was written during the rebuild (and a fault, if any)
            if fresh.held_erased:  # an erasure landed meanwhile
                fresh = self._from_the_log(progress)
                fault = self._feed(fresh, progress)
            if fault is not None:
                raise ProjectionStopped(fault)
            self._index = fresh
            self.fault = None
        return fresh

    def replayed(self, until: int, analyzer: Analyzer | None = None) -> SearchIndex:
        """A fresh index of the log up to ``until``, built as ``rebuild`` builds one (with ``analyzer`` in place of
        this service's, if given), the live one untouched (``memoryd projections verify`` compares it with the
        stored snapshot)."""
        fresh = SearchIndex(self.k1, self.b, analyzer=analyzer or self.analyzer)
        with fresh.bulk():
            if (fault := self._feed(fresh, until=until)) is not None:
                raise ProjectionStopped(fault)
        return fresh

    def memories(self, conn: Connection, where: MemoryFilter, query: str, limit: int, offset: int = 0
                 ) -> list[dict[str, Any]]:
        """The best matches as table rows, in rank order, each with its ``score`` (BM25's, or the fused score with
        the semantic channel on): the ``limit`` after the
        ``offset`` best (the index ranks ``offset + limit``; only the page's rows are read)."""
        scores = {hit.memory_id: hit.score for hit in self.search(where, query, offset + limit)[offset:]}
        return [row | {"score": scores[row["memory_id"]]} for row in memories_in_order(conn, list(scores))]

    def drop_snapshots_before(self, position: int) -> int:
        """Delete the stored snapshots taken before ``position`` (an erasure's: they hold what it erased), and
        this host's files of them."""
        with self.store.database.write() as conn:
            dropped = conn.execute(delete(search_snapshots).where(search_snapshots.c.position < position)).rowcount
        self.files.remove_before(position)  # what cannot be removed, the erasure's certificate reports
        return dropped

    def _from_the_log(self, progress: Progress | None = None) -> SearchIndex:
        """A fresh index of the whole log, built again for as long as an erasure lands while it reads (it
        would hold what the erasure took out). A fault is left for the caller's next feed to meet."""
        while True:
            fresh = self.empty_index()
            with fresh.bulk():
                self._feed(fresh, progress)
            if not fresh.held_erased:
                return fresh

    def _forget(self, positions: list[int], indexed: dict[int, Memory]) -> None:
        """Positions whose events changed meaning (superseded, or erased): no version of theirs is kept."""
        with self._versions_lock:
            for position in positions:
                indexed.pop(position, None)
                self._versions.pop(position, None)
            self._supersedes += 1

    def _feed(self, index: SearchIndex, progress: Progress | None = None, until: int | None = None) -> Fault | None:
        """Apply what the log holds past the index (up to ``until``, if given); the fault where it had to stop,
        if it did."""
        while True:
            with self.store.database.read() as conn:
                read = self.store.read_after(conn, index.position, PAGE)
            batch = read if until is None else [event for event in read if event.position <= until]
            fault = self._apply(index, batch)
            if progress is not None and batch:
                progress(len(batch))
            if fault is not None or len(batch) < len(read) or len(read) < PAGE:
                return fault

    def _apply(self, index: SearchIndex, batch: list[RecordedEvent]) -> Fault | None:
        """Apply the batch; an event that fails is replaced by its stand-in, or stops the index before it.

        The live index's batch, once applied whole, leaves the versions it indexed in the
        versions kept: those a turn is likeliest to render next.
        """
        indexed: dict[int, Memory] = {}
        for recorded in batch:
            if recorded.event_type == EventSuperseded.event_type and ErasedEvent.of(recorded.payload) is None:
                self._forget([int(recorded.payload["position"])], indexed)
            elif recorded.event_type == MemoriesErased.event_type and index is self._index:
                self._forget(MemoriesErased.from_payload(recorded.payload).positions, indexed)
            try:
                if (memory := index.apply(recorded)) is not None:
                    indexed[recorded.position] = memory
            except Exception as error:
                with self.store.database.read() as conn:
                    stand_in = self.store.stand_in(conn, recorded)
                if stand_in is None:
                    return Fault(NAME, recorded.position, recorded.event_type, f"{type(error).__name__}: {error}")
                index.apply(stand_in)
        if index is self._index:
            self._keep(indexed)
        return None

