"""What a batch of events leaves the vectors projection to do: each live memory's newest version embedded once,
nothing embedded for a memory the batch deletes or erases; and the projection's name per model."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from events.types import MemoriesErased, MemoryDeleted, MemorySaved, MemoryUpdated, RecordedEvent
from memoryd.embeddings.embedder import memory_text
from memoryd.kernel.domain import Memory
from projections.vectors import NAME_LENGTH, Changes, projection_name

IDS = ("a", "b", "c")


def recorded(position: int, event: Any, version: int = 1) -> RecordedEvent:
    return RecordedEvent(position, f"stream-{position}", version, event.event_type, event.schema_version,
                         event.payload(), {}, "2026-12-06T00:00:00Z")


def memory(memory_id: str, content: str) -> Memory:
    return Memory(memory_id, f"name_{memory_id}", "about it", "general", "global", "", content,
                  "2026-12-06T00:00:00", "2026-12-06T00:00:00")


WRITES = st.lists(st.tuples(st.sampled_from(["save", "update", "delete", "erase"]), st.sampled_from(IDS),
                            st.text(max_size=20)), max_size=15)


@given(writes=WRITES)
def test_a_batch_leaves_the_newest_version_of_each_memory_it_does_not_remove(writes: list[tuple[str, str, str]]) -> None:
    changes, newest = Changes(), dict[str, tuple[int, str] | None]()
    for position, (kind, memory_id, content) in enumerate(writes, start=1):
        if kind == "erase":
            event: Any = MemoriesErased([memory_id], [], {"memory_id": memory_id}, "asked")
            newest[memory_id] = None
        elif kind == "delete":
            event = MemoryDeleted(memory(memory_id, content))
            newest[memory_id] = None
        else:
            event = (MemorySaved if kind == "save" else MemoryUpdated)(memory(memory_id, content))
            newest[memory_id] = (position, memory_text("about it", content))
        changes.add(recorded(position, event, version=position))
    assert {memory_id: (found.position, found.text) for memory_id, found in changes.to_embed} == \
        {memory_id: state for memory_id, state in newest.items() if state is not None}
    assert set(changes.gone) == {memory_id for memory_id, state in newest.items() if state is None}
    assert all(found.version == found.position for _, found in changes.to_embed)  # the event's own version


def test_an_event_of_another_family_leaves_nothing_to_do() -> None:
    changes = Changes()
    changes.add(RecordedEvent(1, "project:x", 1, "project.create", 1, {"nonsense": True}, {}, "2026-12-06T00:00:00Z"))
    assert changes.latest == {}


def test_forgetting_erased_memories_removes_them_instead_of_embedding_them() -> None:
    changes = Changes()
    for position, memory_id in enumerate(IDS, start=1):
        changes.add(recorded(position, MemorySaved(memory(memory_id, "words"))))
    changes.forget(["b", "z"])
    assert [memory_id for memory_id, _ in changes.to_embed] == ["a", "c"]
    assert changes.gone == ["b"]  # "z" was not in the batch: nothing to remove for it


@given(model=st.text(min_size=1, max_size=200))
def test_every_model_gets_a_projection_name_a_checkpoint_can_hold(model: str) -> None:
    name = projection_name(model)
    assert name.startswith("memory_vectors:") and len(name) <= NAME_LENGTH
    assert projection_name(model + "/768") != name
