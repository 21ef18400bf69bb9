"""Replay that proves the read models (``memoryd projections verify``).

The whole log is replayed into scratch copies (another database for the tables, a fresh index for
search) and each is compared with the live one at the same log position: a digest per read model,
and on a difference the rows or documents that differ. The live read models keep serving: the long
replay reads the log a page at a time, and only the comparison itself holds one consistent read of
the live tables (with their checkpoint), after a short replay up to that checkpoint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sqlalchemy import Connection, Table, select, tuple_

from events.chain import canonical
from memoryd.storage.db import Database
from memoryd.storage.driver import Transaction
from memoryd.storage.schema import projection_checkpoints, search_snapshots
from projections.projector import Projection, Projector
from projections.search import Analyzer, snapshot
from projections.search.service import SearchService

LISTED = 20  # differences listed per read model (all are counted)
PAGE = 5_000  # rows per read of a table's comparison


@runtime_checkable
class TableProjection(Projection, Protocol):
    tables: tuple[Table, ...]  # the read model's tables, compared row by row


@dataclass
class Verified:
    """One read model: live beside replayed, at one log position."""

    read_model: str
    position: int
    compared: int  # rows or documents, on the live side
    live: str  # digests
    replayed: str
    different: int = 0
    differences: list[str] = field(default_factory=list)  # the first LISTED

    @property
    def ok(self) -> bool:
        return self.different == 0 and self.live == self.replayed


class ReadModelVerifier:
    def __init__(self, database: Database, projector: Projector, search: SearchService, scratch: Database) -> None:
        self.database, self.projector, self.search, self.scratch = database, projector, search, scratch

    def tables(self, projection: TableProjection) -> Verified:
        """The projection's tables, live and replayed into the scratch database, at the live checkpoint."""
        with self.scratch.transaction(Transaction) as out:
            projection.reset(out.conn)
            reached = self.projector.replay(projection, out, 0, self.projector.checkpoint(projection.name))
        with self.database.consistent_read() as live, self.scratch.transaction(Transaction) as out:  # stand still
            checkpoint = int(live.execute(select(projection_checkpoints.c.position)
                                          .where(projection_checkpoints.c.name == projection.name)).scalar() or 0)
            self.projector.replay(projection, out, reached, checkpoint)
            comparison = _Comparison(projection.name, checkpoint)
            for table in projection.tables:
                comparison.add(table.name, _rows(live, table), _rows(out.conn, table))
        return comparison.result()

    def search_snapshot(self) -> Verified | None:
        """The newest stored search snapshot (what API processes start from) beside the log replayed to its
        position; None when no snapshot is stored."""
        query = select(search_snapshots.c.position, search_snapshots.c.data) \
            .order_by(search_snapshots.c.position.desc(), search_snapshots.c.snapshot_id.desc()).limit(1)  # as served
        with self.database.read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        try:
            stored = snapshot.load(row.data)
        except (snapshot.SnapshotFormatError, snapshot.SnapshotCorrupt) as error:
            return Verified("search snapshot", row.position, 0, "refused", "", 1, [f"the stored snapshot: {error}"])
        if stored.log_hash != self.search.log_hash(stored.position):
            return Verified("search snapshot", row.position, 0, "refused", "", 1,
                            ["the stored snapshot was taken of another log (its log hash differs)"])
        if found := snapshot.inconsistencies(stored):
            return Verified("search snapshot", row.position, 0, "refused", "", len(found), found)
        if (analyzer := Analyzer.of(stored.analyzer)) is None:
            return Verified("search snapshot", row.position, 0, "refused", "", 1, [
                f"the stored snapshot was built with the analyzer {stored.analyzer}, which this installation cannot "
                f"reproduce (it analyzes with {self.search.analyzer.identity}); no process serves it"])
        replayed = snapshot.load(self.search.replayed(stored.position, analyzer).to_bytes())  # like with like
        comparison = _Comparison("search snapshot", stored.position)
        comparison.add("documents", _keyed(snapshot.documents(stored)), _keyed(snapshot.documents(replayed)))
        return comparison.result()


class _Comparison:
    """Two ordered streams of (key, row) per table, merged: digests over both, the differing keys listed."""

    def __init__(self, read_model: str, position: int) -> None:
        self.read_model, self.position = read_model, position
        self.live, self.replayed = hashlib.sha256(), hashlib.sha256()
        self.compared, self.different = 0, 0
        self.listed: list[str] = []

    def add(self, table: str, live: Iterable[tuple[Any, Any]], replayed: Iterable[tuple[Any, Any]]) -> None:
        self.live.update(canonical(table))
        self.replayed.update(canonical(table))
        for key, mine, theirs in _merged(iter(live), iter(replayed)):
            if mine is not None:
                self.compared += 1
                self.live.update(canonical([key, mine]))
            if theirs is not None:
                self.replayed.update(canonical([key, theirs]))
            if mine != theirs:
                self.different += 1
                if len(self.listed) < LISTED:
                    self.listed.append(f"{table} {key}: " + (
                        "only in the replay" if mine is None else "only in the live copy" if theirs is None
                        else f"live {_shown(mine)}, replayed {_shown(theirs)}"))

    def result(self) -> Verified:
        return Verified(self.read_model, self.position, self.compared, self.live.hexdigest(), self.replayed.hexdigest(),
                        self.different, self.listed)


def _merged(live: Iterator[tuple[Any, Any]], replayed: Iterator[tuple[Any, Any]]) -> Iterator[tuple[Any, Any, Any]]:
    """(key, live row or None, replayed row or None), by key: both streams ascend."""
    mine, theirs = next(live, None), next(replayed, None)
    while mine is not None or theirs is not None:
        if theirs is None or (mine is not None and mine[0] < theirs[0]):
            assert mine is not None
            yield mine[0], mine[1], None
            mine = next(live, None)
        elif mine is None or theirs[0] < mine[0]:
            yield theirs[0], None, theirs[1]
            theirs = next(replayed, None)
        else:
            yield mine[0], mine[1], theirs[1]
            mine, theirs = next(live, None), next(replayed, None)


def _rows(conn: Connection, table: Table) -> Iterator[tuple[Any, Any]]:
    """The table's rows as (primary key, row), by primary key in code point order on both databases."""
    keys = list(table.primary_key.columns)
    ordered = [key.collate("C") if conn.dialect.name == "postgresql" and _is_text(key) else key for key in keys]
    after: Sequence[Any] | None = None
    while True:
        query = select(table).order_by(*ordered).limit(PAGE)
        if after is not None:
            query = query.where(tuple_(*ordered) > tuple_(*after))
        rows = conn.execute(query).all()
        for row in rows:
            yield tuple(row._mapping[key.name] for key in keys), list(row)
        if len(rows) < PAGE:
            return
        after = [rows[-1]._mapping[key.name] for key in keys]


def _is_text(column: Any) -> bool:
    return column.type.python_type is str


def _keyed(documents: list[tuple[str, bytes]]) -> Iterator[tuple[Any, Any]]:
    return ((memory_id, digest.hex()) for memory_id, digest in documents)


def _shown(row: Any) -> str:
    text = canonical(row).decode()
    return text if len(text) <= 300 else text[:300] + "…"
