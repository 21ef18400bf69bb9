"""The search index inside the service: searches over HTTP, rebuilds under writes, snapshots of another version."""

from __future__ import annotations

import threading

import pytest

from commands.model import DeleteMemory, SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from projections.search import SearchIndex, SnapshotFormatError
from tests.helpers import GLOBAL_FILTER, Caller


def test_search_over_http_uses_the_index_and_sees_each_write_at_once(alice: Caller) -> None:
    alice.save("deploy_notes", "we deploy with buildkite every friday")
    assert [m["name"] for m in alice.post("/v1/api/memories/search", json={"query": "buildkite"}).json["memories"]] == [
        "deploy_notes"]
    alice.save("deploy_notes", "we deploy with github actions now")
    assert alice.post("/v1/api/memories/search", json={"query": "buildkite"}).json["memories"] == []
    alice.delete("/v1/api/memories/deploy_notes")
    assert alice.post("/v1/api/memories/search", json={"query": "github"}).json["memories"] == []


def test_a_rebuild_while_writes_continue_swaps_in_with_no_failed_or_empty_reads(services: Services) -> None:
    namespace = Namespace("global", "")
    for index in range(300):
        services.bus.handle(SaveMemory(f"note_{index}", f"common word{index}", "d", None, namespace), EventMetadata())
    services.search.catch_up()
    stop, failures, results = threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            try:
                results.append(len(services.search.search(GLOBAL_FILTER, "common", 50)))
            except Exception as error:  # any failure is what this test looks for
                failures.append(error)

    def write() -> None:
        for index in range(300, 400):
            services.bus.handle(SaveMemory(f"note_{index}", f"common word{index}", "d", None, namespace), EventMetadata())

    readers = [threading.Thread(target=read) for _ in range(2)]
    writer = threading.Thread(target=write)
    for thread in [*readers, writer]:
        thread.start()
    before = services.search.catch_up()
    rebuilt = services.search.rebuild()
    writer.join()
    stop.set()
    for thread in readers:
        thread.join()
    assert not failures
    assert results and min(results) == 50  # never an empty or partial answer
    assert rebuilt is not before and services.search.catch_up() is rebuilt
    assert len(rebuilt) == 400
    services.bus.handle(DeleteMemory("note_0", namespace), EventMetadata())
    assert len(services.search.catch_up()) == 399


def test_a_snapshot_from_another_index_version_is_refused_and_the_log_rebuilds_it(services: Services, sqlite_url: str) -> None:
    import io

    import numpy as np

    from memoryd.bootstrap import build_services
    from memoryd.kernel.config import Config, SearchSettings, StorageSettings
    from memoryd.storage.schema import search_snapshots

    old = io.BytesIO()
    np.savez(old, position=np.array([5], np.int64))  # the first layout had no "format" entry
    with pytest.raises(SnapshotFormatError):
        SearchIndex.from_bytes(old.getvalue())
    saved = services.bus.handle(SaveMemory("deploy_notes", "buildkite", "d", None, Namespace("global", "")),
                                EventMetadata())
    with services.store.database.write() as conn:
        conn.execute(search_snapshots.insert().values(position=1, created="2026-01-01T00:00:00", data=old.getvalue()))
    later = build_services(Config(storage=StorageSettings(database_url=sqlite_url), search=SearchSettings()))
    assert [h.memory_id for h in later.search.search(GLOBAL_FILTER, "buildkite", 5)] == [saved.memory.memory_id]
