"""The structured_memories projection: exactly once, idempotent, rebuildable."""

from commands.model import DeleteMemory, DeleteMemoryById
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from memoryd.storage.driver import Transaction
from tests.helpers import rebuild_equals_live, save_memory, table_rows

GLOBAL = Namespace("global", "")


def test_applying_every_event_a_second_time_changes_nothing(any_services: Services) -> None:
    services = any_services
    for index in range(5):
        save_memory(services, f"note_{index}", memory_type="feedback")
    save_memory(services, "note_1", "changed")
    services.bus.handle(DeleteMemory("note_2", GLOBAL), EventMetadata())
    before = table_rows(services)
    with services.database.transaction(Transaction) as tx:
        for recorded in services.store.iter_all():
            services.memory_table.apply(tx, recorded)
    assert table_rows(services) == before


def test_catching_up_again_applies_nothing_twice(any_services: Services) -> None:
    services = any_services
    save_memory(services, "note")
    before = table_rows(services)
    head = services.store.head_position()
    assert services.projector.catch_up() == head
    assert services.projector.catch_up() == head
    assert table_rows(services) == before


def test_a_rebuild_from_the_log_equals_the_live_table_after_mixed_writes(any_services: Services) -> None:
    services = any_services
    for index in range(30):
        save_memory(services, f"note_{index % 12}", f"version {index}", memory_type=["user", None, "reference"][index % 3])
    save_memory(services, "mine", namespace=Namespace("user", "u1"))
    services.bus.handle(DeleteMemory("note_3", GLOBAL), EventMetadata())
    doomed = save_memory(services, "note_4").memory.memory_id
    services.bus.handle(DeleteMemoryById(doomed), EventMetadata(surface="admin"))
    recreated = save_memory(services, "note_3", "back again")
    assert recreated.created
    assert len(table_rows(services)) == 12
    assert rebuild_equals_live(services)
    assert services.projector.checkpoint("structured_memories") == services.store.head_position()


def test_a_rebuild_repairs_a_damaged_read_model(any_services: Services) -> None:
    services = any_services
    save_memory(services, "note")
    expected = table_rows(services)
    with services.database.write() as conn:
        services.memory_table.reset(conn)
    assert table_rows(services) == []
    services.projector.rebuild(services.memory_table)
    assert table_rows(services) == expected


def test_a_save_after_a_delete_creates_a_new_memory_id(services: Services) -> None:
    first = save_memory(services, "note").memory.memory_id
    services.bus.handle(DeleteMemory("note", GLOBAL), EventMetadata())
    second = save_memory(services, "note")
    assert second.created and second.memory.memory_id != first
