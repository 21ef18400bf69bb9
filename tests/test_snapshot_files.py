"""Search snapshots as files every process on a host maps: shared, checked, refused when wrong, rebuilt."""

from __future__ import annotations

import logging
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, update

from commands.model import SaveMemory
from events.types import EventMetadata, MemoryDeleted, MemorySaved, MemoryUpdated, RecordedEvent
from memoryd.app.services import Services
from memoryd.bootstrap import build_services
from memoryd.kernel.domain import Memory, Namespace
from memoryd.storage.schema import search_snapshots
from projections.filters import MemoryFilter
from projections.search import SearchIndex, snapshot
from projections.search.snapshot import SnapshotCorrupt, SnapshotFormatError
from tests.helpers import SPACES, WORDS, MakeCaller, answers, index_of, memory, recorded, tiny_segments

EVERYTHING = MemoryFilter()


def _save(services: Services, name: str, content: str) -> str:
    saved = services.bus.handle(SaveMemory(name, content, "d", None, Namespace("global", "")), EventMetadata())
    return saved.memory.memory_id


_started: list[Services] = []


def _restarted(services: Services) -> Services:
    """Another API process on the same database and host (disposed after the test)."""
    _started.append(build_services(services.config))
    return _started[-1]


@pytest.fixture(autouse=True)
def _dispose_restarted() -> Iterator[None]:
    yield
    while _started:
        _started.pop().database.dispose()


def _files(services: Services) -> list[Path]:
    directory = services.search.files.directory
    return sorted(directory.glob("*.snapshot")) if directory.is_dir() else []


@pytest.fixture
def stored(any_services: Services) -> Services:
    for number in range(20):
        _save(any_services, f"note_{number}", f"deploy {'rollback ' * number}canary")
    any_services.search.save_snapshot()
    return any_services


def test_processes_on_one_host_map_one_file_of_the_stored_snapshot(stored: Services) -> None:
    first = _restarted(stored)
    expected = stored.search.search(EVERYTHING, "rollback canary", 5)
    assert first.search.search(EVERYTHING, "rollback canary", 5) == expected
    [path] = _files(stored)
    written = path.stat()

    second = _restarted(stored)
    assert second.search.search(EVERYTHING, "rollback canary", 5) == expected
    assert path.stat().st_ino == written.st_ino and path.stat().st_mtime_ns == written.st_mtime_ns  # not written again
    if sys.platform == "linux":
        assert str(path) in Path("/proc/self/maps").read_text()  # served from the mapping, not a copy


def test_a_mapped_index_takes_new_writes_and_a_newer_snapshot_replaces_the_file(stored: Services) -> None:
    follower = _restarted(stored)
    follower.search.catch_up()
    [old] = _files(stored)
    added = _save(stored, "note_new", "rollback rollback rollback rollback rollback rollback rollback rollback "
                                      "rollback rollback rollback rollback rollback rollback rollback rollback "
                                      "rollback rollback rollback rollback rollback rollback canary")
    assert follower.search.search(EVERYTHING, "rollback", 1)[0].memory_id == added
    stored.search.save_snapshot()
    _restarted(stored).search.catch_up()
    [new] = _files(stored)
    assert new != old and not old.exists()
    assert follower.search.search(EVERYTHING, "rollback", 1)[0].memory_id == added  # its mapping outlives the file


@pytest.mark.parametrize("damage", ["a flipped byte", "truncated", "another format", "not a snapshot"])
def test_a_damaged_file_is_refused_removed_and_written_again_from_the_database(stored: Services, damage: str,
                                                                               caplog: pytest.LogCaptureFixture) -> None:
    expected = _restarted(stored).search.search(EVERYTHING, "rollback canary", 5)
    [path] = _files(stored)
    data = bytearray(path.read_bytes())
    if damage == "a flipped byte":
        data[len(data) // 2] ^= 0x01
    elif damage == "truncated":
        data = data[: len(data) - 4096]
    elif damage == "another format":
        data[16] += 1
    else:
        data = bytearray(b"PK\x03\x04" + bytes(100))
    path.write_bytes(bytes(data))

    with caplog.at_level(logging.WARNING):
        restarted = _restarted(stored)
        assert restarted.search.search(EVERYTHING, "rollback canary", 5) == expected
    assert "refused" in caplog.text
    assert path.read_bytes() == stored_blob(stored)  # the database's copy, written again


def test_a_snapshot_of_another_log_is_refused_and_the_index_built_from_this_log(any_services: Services,
                                                                                caplog: pytest.LogCaptureFixture) -> None:
    mine = _save(any_services, "mine", "kubernetes canary")
    theirs = SearchIndex()  # another database's index at the same position
    theirs.apply(RecordedEvent(1, "s", 1, "memory.save", 1, MemorySaved(memory("theirs", "kubernetes")).payload(),
                               {}, ""))
    with any_services.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=1, created="2026-01-01T00:00:00",
                                                      data=theirs.to_bytes("0" * 64)))
    with caplog.at_level(logging.WARNING):
        restarted = _restarted(any_services)
        assert [hit.memory_id for hit in restarted.search.search(EVERYTHING, "kubernetes", 5)] == [mine]
    assert "another log" in caplog.text
    assert not any_services.search.files.directory.exists()  # refused before anything was written


def test_a_file_of_another_log_under_this_snapshots_name_is_replaced_from_the_database(stored: Services,
                                                                                       caplog: pytest.LogCaptureFixture) -> None:
    expected = stored.search.search(EVERYTHING, "rollback canary", 5)
    _restarted(stored).search.catch_up()
    [path] = _files(stored)
    theirs = SearchIndex()  # what a database once at this path left under the same name
    theirs.apply(RecordedEvent(stored.store.head_position(), "s", 1, "memory.save", 1,
                               MemorySaved(memory("theirs", "rollback")).payload(), {}, ""))
    snapshot.write_file(theirs.to_bytes("0" * 64), path)
    with caplog.at_level(logging.WARNING):
        assert _restarted(stored).search.search(EVERYTHING, "rollback canary", 5) == expected
    assert "another log" in caplog.text and "from the log" not in caplog.text
    assert path.read_bytes() == stored_blob(stored)


def test_a_corrupt_snapshot_in_the_database_is_refused_and_the_index_built_from_the_log(stored: Services,
                                                                                        caplog: pytest.LogCaptureFixture) -> None:
    expected = stored.search.search(EVERYTHING, "rollback canary", 5)
    blob = bytearray(stored_blob(stored))
    blob[-100] ^= 0xFF
    with stored.database.write() as conn:
        conn.execute(update(search_snapshots).values(data=bytes(blob)))
    with caplog.at_level(logging.WARNING):
        assert _restarted(stored).search.search(EVERYTHING, "rollback canary", 5) == expected
    assert "checksum" in caplog.text and not _files(stored)


def test_without_a_writable_directory_a_process_holds_its_own_copy(stored: Services, tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the directory should be")
    restarted = _restarted(stored)
    restarted.search.files.directory = blocked / "search"
    with caplog.at_level(logging.WARNING):
        assert restarted.search.search(EVERYTHING, "rollback canary", 5) == stored.search.search(
            EVERYTHING, "rollback canary", 5)
    assert "a copy of its own" in caplog.text


def test_an_erasure_removes_this_hosts_files_of_earlier_snapshots(stored: Services, any_make_caller: MakeCaller) -> None:
    _restarted(stored).search.catch_up()
    assert _files(stored)
    checks = _erase_one(stored, any_make_caller)
    assert not _files(stored)
    assert checks["search snapshots"]["free"], checks


def _erase_one(services: Services, make_caller: MakeCaller) -> dict[str, dict[str, Any]]:
    """Erase the best match for "rollback" through the admin API; the certificate's checks by store."""
    [erased] = services.search.search(EVERYTHING, "rollback", 1)
    admin = make_caller("read,write", ("admin.memories",))
    answer = admin.post("/v1/api/admin/erasures", json={"memory_id": erased.memory_id, "reason": "test"})
    assert answer.status_code == 201, answer.get_json()
    return {check["store"]: check for check in answer.get_json()["checks"]}


def stored_blob(services: Services) -> bytes:
    with services.database.read() as conn:
        return bytes(conn.execute(select(search_snapshots.c.data)).scalar_one())


# -- the format and the index over it ---------------------------------------------------------------------------


def test_an_index_over_a_mapped_snapshot_changes_as_a_fresh_index_would(tmp_path: Path) -> None:
    rng = random.Random(5)
    index, live = tiny_segments(), dict[tuple[str, str, str], Memory]()
    for step in range(1_500):
        _random_change(rng, index, live, step)
    path = tmp_path / "index.snapshot"
    snapshot.write_file(index.to_bytes(), path)
    mapped = SearchIndex.from_snapshot(snapshot.open_file(path), tuning=index.tuning)
    query = " ".join(WORDS[:8])
    assert answers(mapped, query) == answers(index, query) and len(mapped) == len(live)
    for step in range(1_500, 4_000):  # past the room the snapshot left for new slots, with merges
        _random_change(rng, mapped, live, step)
        if step % 500 == 0:
            query = " ".join(rng.sample(WORDS, 5))
            assert answers(mapped, query) == answers(index_of(list(live.values())), query)
    mapped.wait_for_merges()
    assert answers(mapped, query) == answers(index_of(list(live.values())), query) and len(mapped) == len(live)
    again = SearchIndex.from_bytes(mapped.to_bytes())
    assert answers(again, query) == answers(mapped, query) and sorted(again.holding(
        [m.memory_id for m in live.values()])) == sorted(m.memory_id for m in live.values())
    assert path.read_bytes() == index.to_bytes()  # changes stay in the process: the file is never written


def _random_change(rng: random.Random, index: SearchIndex, live: dict[tuple[str, str, str], Memory], step: int) -> None:
    scope, scope_id = rng.choice(SPACES)
    key = (f"m{rng.randrange(300)}", scope, scope_id)
    if rng.random() < 0.2 and key in live:
        index.apply(recorded(MemoryDeleted(live.pop(key))))
        return
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25)))
    changed = memory(key[0], text, scope, scope_id, rng.choice(["user", "general", "feedback"]),
                     updated=f"2026-01-01T{step // 3600 % 24:02d}:{step // 60 % 60:02d}:{step % 60:02d}")
    index.apply(recorded(MemoryUpdated(changed) if key in live else MemorySaved(changed)))
    live[key] = changed


def test_an_empty_index_round_trips() -> None:
    empty = SearchIndex.from_bytes(SearchIndex().to_bytes())
    assert len(empty) == 0 and empty.search(EVERYTHING, "anything", 5) == []
    empty.apply(recorded(MemorySaved(memory("first", "hello world"))))
    assert [hit.memory_id for hit in empty.search(EVERYTHING, "hello", 5)] == ["id-global--first"]


def test_the_format_is_checked_before_anything_is_read(tmp_path: Path) -> None:
    blob = index_of([memory("a", "alpha beta"), memory("b", "beta gamma")]).to_bytes("f" * 64)
    assert snapshot.load(blob).log_hash == "f" * 64
    with pytest.raises(SnapshotFormatError):
        snapshot.load(b"memoryd-search\x00\x00" + (3).to_bytes(4, "little") + bytes(60))
    with pytest.raises(SnapshotFormatError):
        snapshot.load(blob[:10])
    for at in (100, len(blob) // 2, len(blob) - 1):
        changed = bytearray(blob)
        changed[at] ^= 0x10
        with pytest.raises(SnapshotCorrupt):
            snapshot.load(bytes(changed))


# -- files left behind, rows that move, what the directory lets through ------------------------------------------


def test_an_erasure_removes_temporary_files_too_and_a_process_started_later_clears_the_older_files(
        stored: Services, any_make_caller: MakeCaller, tmp_path: Path) -> None:
    _restarted(stored).search.catch_up()
    [path] = _files(stored)
    torn = path.with_name(f".{path.name}.0123abcd.tmp")  # a writer killed before its rename
    torn.write_bytes(path.read_bytes()[:4096])
    elsewhere = tmp_path / "another-host"
    elsewhere.mkdir()
    (elsewhere / path.name).write_bytes(path.read_bytes())  # a host whose processes were all stopped
    assert _erase_one(stored, any_make_caller)["search snapshots"]["free"]
    assert not torn.exists() and not _files(stored)

    later = _restarted(stored)
    later.search.files.directory = elsewhere  # that host starts a process after the erasure
    later.search.catch_up()
    assert list(elsewhere.iterdir()) == []


def test_a_file_that_cannot_be_removed_is_reported_by_the_erasure_not_fatal(stored: Services, any_make_caller: MakeCaller,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _restarted(stored).search.catch_up()
    [path] = _files(stored)
    real_unlink = Path.unlink

    def stuck(self: Path, missing_ok: bool = False) -> None:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", stuck)
    checks = _erase_one(stored, any_make_caller)
    assert not checks["search snapshots"]["free"] and "1 files" in checks["search snapshots"]["detail"], checks
    assert stored.search.search(EVERYTHING, "canary", 5)  # and search goes on


def test_an_erasure_that_cannot_list_this_hosts_files_does_not_certify_them(stored: Services, any_make_caller: MakeCaller,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _restarted(stored).search.catch_up()
    directory, real_iterdir = stored.search.files.directory, Path.iterdir

    def unreadable(self: Path) -> Iterator[Path]:
        if self == directory:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", unreadable)
    checks = _erase_one(stored, any_make_caller)
    assert not checks["search snapshots"]["free"] and "could not be listed" in checks["search snapshots"]["detail"]


def test_two_snapshots_at_one_position_still_give_one_file(stored: Services) -> None:
    roomier = snapshot.load(stored_blob(stored))  # a second worker's at the same position, not the same bytes
    roomier.slot = {name: np.concatenate([values, np.zeros(4096, values.dtype)]) for name, values in roomier.slot.items()}
    with stored.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=stored.store.head_position(),
                                                      created="2026-01-01T00:00:00", data=snapshot.dump(roomier)))
    _restarted(stored).search.catch_up()
    [path] = _files(stored)
    written = path.stat().st_ino
    _restarted(stored).search.catch_up()
    assert _files(stored) == [path] and path.stat().st_ino == written  # found, not written again


def test_a_snapshot_replaced_while_a_process_starts_is_looked_up_again(stored: Services) -> None:
    starting = _restarted(stored)
    real_open = starting.search.files.open
    added = []

    def replaced_meanwhile(position: int, snapshot_id: int) -> snapshot.Snapshot | None:
        starting.search.files.open = real_open  # type: ignore[method-assign]
        added.append(_save(stored, "note_late", "rollback late"))
        stored.search.save_snapshot()  # deletes the row the starting process looked up
        return real_open(position, snapshot_id)

    starting.search.files.open = replaced_meanwhile  # type: ignore[method-assign]
    assert [hit.memory_id for hit in starting.search.search(EVERYTHING, "late", 5)] == added
    assert [path.name for path in _files(stored)] == [f"search-{stored.store.head_position()}-2.snapshot"]


def test_snapshot_files_are_the_owners_alone(stored: Services) -> None:
    _restarted(stored).search.catch_up()
    [path] = _files(stored)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
