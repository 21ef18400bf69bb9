"""``memoryd projections verify``: the log replayed into scratch copies equals every live read model, and a
live copy that drifted from the log is caught with the rows that differ; on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import delete, update

from commands.model import DeleteMemory, SaveMemory
from commands.projects import CreateProject
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.cli import main
from memoryd.kernel.domain import Namespace
from memoryd.storage.schema import memory_counts, search_snapshots, structured_memories
from tests.helpers import table_rows

GLOBAL = Namespace("global", "")


def _verify(services: Services) -> Any:
    url = services.database.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main, ["projections", "verify"], env={"MEMORYD_DATABASE_URL": url})


def _history(services: Services) -> None:
    for number in range(12):
        services.bus.handle(SaveMemory(f"note_{number}", f"content {number}", "d", None, GLOBAL), EventMetadata())
    services.bus.handle(SaveMemory("note_3", "changed", "d", "feedback", GLOBAL), EventMetadata())
    services.bus.handle(DeleteMemory("note_5", GLOBAL), EventMetadata())
    services.bus.handle(CreateProject("apollo", services.directory.create_user("owner")), EventMetadata())


def test_a_live_store_equals_its_replay_snapshot_included(any_services: Services) -> None:
    _history(any_services)
    any_services.search.save_snapshot()
    before = table_rows(any_services)
    result = _verify(any_services)
    assert result.exit_code == 0, result.output
    head = any_services.store.head_position()
    assert f"structured_memories: equal at position {head}, 13 compared" in result.output  # 11 rows, 2 counts
    assert f"projects: equal at position {head}, 1 compared" in result.output
    assert f"search snapshot: equal at position {head}, 11 compared" in result.output
    assert table_rows(any_services) == before  # only read


def test_a_live_row_that_drifted_from_the_log_is_listed(any_services: Services) -> None:
    _history(any_services)
    with any_services.database.write() as conn:
        conn.execute(update(structured_memories).where(structured_memories.c.name == "note_1")
                     .values(content="edited behind the log's back"))
        conn.execute(delete(structured_memories).where(structured_memories.c.name == "note_2"))
        conn.execute(update(memory_counts).values(count=memory_counts.c.count + 1))
    result = _verify(any_services)
    assert result.exit_code == 1
    assert "structured_memories: DIFFERENT" in result.output
    drifted = [line for line in result.output.splitlines() if line.startswith("  structured_memories")]
    assert any("edited behind the log's back" in line and "content 1" in line for line in drifted), result.output
    assert any("only in the replay" in line for line in drifted)
    assert any(line.startswith("  memory_counts") for line in result.output.splitlines())
    assert "projects: equal" in result.output


def test_a_stored_snapshot_that_is_not_the_log_s_is_caught(any_services: Services) -> None:
    _history(any_services)
    head = any_services.store.head_position()
    stale = any_services.search.replayed(head - 3)  # without the update and the delete
    stale.state.position = head  # stamped with the head's position: a snapshot that is not the log's
    with any_services.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=head, created="2026-12-01T00:00:00",
                                                      data=stale.to_bytes(any_services.search.log_hash(head))))
    result = _verify(any_services)
    assert result.exit_code == 1
    assert f"search snapshot: DIFFERENT at position {head}, 12 compared" in result.output
    assert "2 differ" in result.output  # note_3 changed type and content, note_5 was deleted


@pytest.mark.parametrize("damage", ["corrupt", "another log"])
def test_a_stored_snapshot_that_fails_its_checks_is_reported_not_compared(any_services: Services, damage: str) -> None:
    _history(any_services)
    head = any_services.store.head_position()
    index = any_services.search.replayed(head)
    blob = bytearray(index.to_bytes(any_services.search.log_hash(head) if damage == "corrupt" else "0" * 64))
    if damage == "corrupt":
        blob[len(blob) // 2] ^= 0x01
    with any_services.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=head, created="2026-12-01T00:00:00", data=bytes(blob)))
    result = _verify(any_services)
    assert result.exit_code == 1
    assert f"search snapshot: DIFFERENT at position {head}" in result.output
    assert ("checksum" if damage == "corrupt" else "another log") in result.output


def test_it_runs_beside_writers_and_compares_at_one_position(any_services: Services) -> None:
    _history(any_services)
    stop = threading.Event()

    def write() -> None:
        number = 0
        while not stop.is_set():
            any_services.bus.handle(SaveMemory(f"busy_{number % 7}", f"v{number}", "d", None, GLOBAL), EventMetadata())
            number += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        result = _verify(any_services)
    finally:
        stop.set()
        writer.join()
    assert result.exit_code == 0, result.output


def test_a_stored_snapshot_whose_lookup_arrays_disagree_with_its_segment_is_caught(any_services: Services) -> None:
    from projections.search import snapshot

    _history(any_services)
    head = any_services.store.head_position()
    loaded = snapshot.load(any_services.search.replayed(head).to_bytes(any_services.search.log_hash(head)))
    with any_services.database.write() as conn:  # a good one first: the one served is the newest row
        conn.execute(search_snapshots.insert().values(position=head, created="2026-12-01T00:00:00",
                                                      data=snapshot.dump(loaded)))
    loaded.sorted_slots = loaded.sorted_slots[::-1].copy()  # ids would be found in the wrong slots
    with any_services.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=head, created="2026-12-01T00:00:01",
                                                      data=snapshot.dump(loaded)))
    result = _verify(any_services)
    assert result.exit_code == 1
    assert "sorted ids disagree" in result.output, result.output


def test_a_stored_snapshot_with_another_recency_holds_another_updated_time(any_services: Services) -> None:
    """A memory's ``updated`` is kept only as its recency key: a changed key is a memory that differs."""
    from projections.search import snapshot

    _history(any_services)
    head = any_services.store.head_position()
    loaded = snapshot.load(any_services.search.replayed(head).to_bytes(any_services.search.log_hash(head)))
    loaded.slot["recency"][0] += 1  # the newest first in the wrong order
    with any_services.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=head, created="2026-12-01T00:00:01",
                                                      data=snapshot.dump(loaded)))
    result = _verify(any_services)
    assert result.exit_code == 1
    assert "search snapshot: DIFFERENT" in result.output and "1 differ" in result.output, result.output


def test_a_stored_snapshot_whose_sorted_ids_miss_a_memory_is_caught(any_services: Services) -> None:
    from projections.search import snapshot

    _history(any_services)
    head = any_services.store.head_position()
    loaded = snapshot.load(any_services.search.replayed(head).to_bytes(any_services.search.log_hash(head)))
    loaded.sorted_ids, loaded.sorted_slots = loaded.sorted_ids[1:], loaded.sorted_slots[1:]  # one id not found
    with any_services.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=head, created="2026-12-01T00:00:00",
                                                      data=snapshot.dump(loaded)))
    result = _verify(any_services)
    assert result.exit_code == 1 and "sorted slots (not every slot once)" in result.output, result.output
