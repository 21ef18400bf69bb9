"""A save's type through the command handler: the last explicit one wins, else general."""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.handlers import Dependencies, save_memory
from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from projections.queries import ProjectedMemoryLocator

TYPES_OR_UNSET = st.sampled_from(["user", "general", "feedback", "reference", None])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(types=st.lists(TYPES_OR_UNSET, min_size=1, max_size=6))
def test_a_memory_keeps_the_last_explicit_type_it_was_saved_with_or_general(services: Services, types: Any) -> None:
    deps = Dependencies(store=services.store, locator=ProjectedMemoryLocator(services.database), users=services.directory)
    name = f"typed_{uuid.uuid4().hex}"  # every example writes its own memory
    saved = []
    for memory_type in types:
        with services.store.transaction() as tx:
            command = SaveMemory(name, "content", "description", memory_type, Namespace("global", ""))
            saved.append(save_memory(tx, command, EventMetadata(), deps))
    explicit = [memory_type for memory_type in types if memory_type is not None]
    assert saved[-1].memory.type == (explicit[-1] if explicit else "general")
    assert {outcome.memory.memory_id for outcome in saved} == {saved[0].memory.memory_id}
    assert [outcome.created for outcome in saved] == [True] + [False] * (len(types) - 1)
