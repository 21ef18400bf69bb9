"""This host's copies of the stored search snapshots: one file per snapshot, mapped by every process.

The database holds the snapshot (workers store it, any host can read it); the
first process on a host to start from it writes it to a file named after its
position and row, and every process then maps that file, so the host
holds one copy of it in the page cache however many processes serve. A file
that fails its checks (another format, a checksum that does not match, a
snapshot of another log) is removed and never served: the caller writes it
again from the database, or builds the index from the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

import projections.search.snapshot as snapshot
from projections.search.snapshot import Snapshot, SnapshotCorrupt, SnapshotFormatError

log = logging.getLogger(__name__)
_NAME = re.compile(r"\.?search-(\d+)-(\d+)\.snapshot(?:\.[0-9a-f]+\.tmp)?")  # a temporary one too


class SnapshotFiles:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, position: int, snapshot_id: int) -> Path:
        """The file of the stored snapshot ``snapshot_id`` (named by its row: reading a stored snapshot's header
        would read the whole blob on SQLite)."""
        return self.directory / f"search-{position}-{snapshot_id}.snapshot"

    def open(self, position: int, snapshot_id: int) -> Snapshot | None:
        """The mapped snapshot in this host's file of that stored snapshot; None if there is no such file, or it
        was refused (and removed)."""
        path = self.path(position, snapshot_id)
        try:
            opened = snapshot.open_file(path)
        except OSError:  # none here, or none this process may read: the database's copy serves
            return None
        except (SnapshotFormatError, SnapshotCorrupt) as error:
            self.refuse(path, str(error))
            return None
        if opened.position != position:
            self.refuse(path, "it is not the snapshot its name says")
            return None
        return opened

    def write(self, position: int, snapshot_id: int, blob: bytes) -> Snapshot:
        """Write the stored snapshot ``blob`` (checked by the caller) to this host's file and map it. The
        directory is the owner's alone: the files hold memory ids, namespaces and the vocabulary."""
        path = self.path(position, snapshot_id)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        snapshot.write_file(blob, path)
        return snapshot.open_file(path)

    def refuse(self, path: Path, reason: str) -> None:
        log.warning("search snapshot file %s refused (%s): removed, never served", path, reason)
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            log.warning("cannot remove %s: %s", path, error)

    def remove_before(self, position: int) -> None:
        """Remove this host's snapshot files (temporary ones too) taken before ``position`` (a process mapping one
        keeps its pages until it lets go); what cannot be removed is logged (and ``before`` still lists it)."""
        self._remove(lambda named: named[0] < position)

    def remove_older(self, position: int, snapshot_id: int) -> None:
        """Remove this host's files of snapshots stored before that one."""
        self._remove(lambda named: named < (position, snapshot_id))

    def before(self, position: int) -> list[Path]:
        """This host's files of snapshots taken before ``position``; ``OSError`` if the directory cannot be read."""
        return [path for path, (taken, _) in self._named() if taken < position]

    def _named(self) -> list[tuple[Path, tuple[int, int]]]:
        """The snapshot files here, by (position, row); none when there is no directory yet. Any other error
        (one this process may not list) is raised: "no files" must never stand for "could not look"."""
        try:
            paths = list(self.directory.iterdir())
        except FileNotFoundError:
            return []
        return [(path, (int(named.group(1)), int(named.group(2)))) for path in paths
                if (named := _NAME.fullmatch(path.name))]

    def _remove(self, chosen: Callable[[tuple[int, int]], bool]) -> None:
        try:
            paths = [path for path, named in self._named() if chosen(named)]
        except OSError as error:
            log.warning("cannot list the search snapshot files in %s: %s", self.directory, error)
            return
        for path in paths:
            try:
                path.unlink(missing_ok=True)
            except OSError as error:
                log.warning("cannot remove the search snapshot file %s: %s", path, error)
