"""Concurrent saves of the same identities, on SQLite and on the real PostgreSQL."""

from __future__ import annotations

import random
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from commands.model import DeleteMemory, SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from tests.helpers import rebuild_equals_live, table_rows

THREADS = 8
SAVES_PER_THREAD = 200
IDENTITIES = 20


def test_concurrent_saves_of_twenty_identities_make_exactly_twenty_memories(any_services: Services) -> None:
    services = any_services
    names = [f"memory_{index}" for index in range(IDENTITIES)]

    def writer(thread: int) -> list[tuple[str, str, int, str]]:
        rng = random.Random(thread)
        results = []
        for step in range(SAVES_PER_THREAD):
            name = rng.choice(names)
            content = f"thread {thread} step {step}"
            command = SaveMemory(name, content, "concurrent save", None, Namespace("global", ""))
            outcome = services.bus.handle(command, EventMetadata(surface="rest"))
            results.append((name, outcome.memory.memory_id, outcome.position, content))
        return results

    with ThreadPoolExecutor(THREADS) as pool:
        outcomes = [item for batch in pool.map(writer, range(THREADS)) for item in batch]

    ids_by_name = defaultdict(set)
    for name, memory_id, _, _ in outcomes:
        ids_by_name[name].add(memory_id)
    rows = table_rows(services)
    assert len(rows) == len(ids_by_name) == IDENTITIES
    assert all(len(ids) == 1 for ids in ids_by_name.values()), "an identity got a second memory id"

    events = list(services.store.iter_all())
    assert len(events) == THREADS * SAVES_PER_THREAD
    assert sorted(position for _, _, position, _ in outcomes) == [event.position for event in events]
    assert services.projector.checkpoint("structured_memories") == events[-1].position

    # No lost update: each row holds the content of the last event of its stream, which
    # is the save with the highest position for that name.
    latest = {}
    for name, _, _position, content in sorted(outcomes, key=lambda item: item[2]):
        latest[name] = content
    assert {row["name"]: row["content"] for row in rows} == latest

    versions = defaultdict(list)
    for event in events:
        versions[event.stream_id].append(event.stream_version)
    assert all(found == list(range(1, len(found) + 1)) for found in versions.values())
    assert rebuild_equals_live(services)


def test_racing_deletes_of_one_memory_have_exactly_one_winner(any_services: Services) -> None:
    services = any_services
    namespace = Namespace("global", "")
    services.bus.handle(SaveMemory("contested", "content", "description", None, namespace), EventMetadata())

    def delete(_: int) -> str:
        try:
            services.bus.handle(DeleteMemory("contested", namespace), EventMetadata())
        except Exception as error:  # the losers must all see "not found"
            return type(error).__name__
        return "deleted"

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(delete, range(THREADS)))
    assert sorted(results) == ["NotFound"] * (THREADS - 1) + ["deleted"]
    assert [event.event_type for event in services.store.iter_all()] == ["memory.save", "memory.delete"]
