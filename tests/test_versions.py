"""Optimistic concurrency: a memory's version as its ETag, and conditional writes (If-Match, expected_version).

A version is the memory's stream version. A conditional write that finds another version appends nothing
and answers 412 (the tool: ``ok: false``) with the version it found; of racing conditional writes at one
version exactly one wins, on SQLite and on the real PostgreSQL.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest
from alembic import command

from commands.model import DeleteMemory, SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from memoryd.kernel.errors import NotFound, VersionMismatch
from memoryd.storage import migrate
from tests.helpers import World, rebuild_equals_live, table_rows

if TYPE_CHECKING:
    from tests.helpers import Caller

MEMORIES = "/v1/api/memories"
GLOBAL = Namespace("global", "")


def if_match(version: int | str) -> dict[str, str]:
    return {"If-Match": f'"{version}"' if isinstance(version, int) else version}


def test_every_write_and_read_of_a_memory_gives_its_version_as_etag(alice: Caller) -> None:
    assert alice.save("deploy_steps", "one").headers["ETag"] == '"1"'
    assert alice.get(f"{MEMORIES}/deploy_steps").headers["ETag"] == '"1"'
    assert alice.save("deploy_steps", "two").headers["ETag"] == '"2"'
    assert alice.get(f"{MEMORIES}/deploy_steps").headers["ETag"] == '"2"'


def test_a_save_at_a_stale_version_is_a_412_with_the_current_one_and_appends_nothing(alice: Caller, services: Services) -> None:
    alice.save("deploy_steps", "one")
    assert alice.post(MEMORIES, json={"name": "deploy_steps", "content": "two", "description": "d"},
                      headers=if_match(1)).status_code == 200
    head = services.store.head_position()
    stale = alice.post(MEMORIES, json={"name": "deploy_steps", "content": "lost", "description": "d"},
                       headers=if_match(1))
    assert stale.status_code == 412
    assert stale.get_json()["current_version"] == 2 and stale.headers["ETag"] == '"2"'
    assert "version 1" in stale.get_json()["error"]
    assert services.store.head_position() == head
    assert alice.get(f"{MEMORIES}/deploy_steps").get_json()["content"] == "two"


def test_if_match_on_a_memory_that_does_not_exist_creates_nothing(alice: Caller, services: Services) -> None:
    answer = alice.post(MEMORIES, json={"name": "nothing_yet", "content": "c", "description": "d"}, headers=if_match(1))
    assert answer.status_code == 412 and answer.get_json()["current_version"] is None and "ETag" not in answer.headers
    assert services.store.head_position() == 0


def test_a_conditional_delete_removes_only_the_version_it_names(alice: Caller) -> None:
    alice.save("deploy_steps", "one")
    alice.save("deploy_steps", "two")
    stale = alice.delete(f"{MEMORIES}/deploy_steps", headers=if_match(1))
    assert stale.status_code == 412 and stale.get_json()["current_version"] == 2
    assert alice.get(f"{MEMORIES}/deploy_steps").status_code == 200
    assert alice.delete(f"{MEMORIES}/deploy_steps", headers=if_match(2)).status_code == 200
    gone = alice.delete(f"{MEMORIES}/deploy_steps", headers=if_match(3))  # no memory is at any version
    assert gone.status_code == 412 and gone.get_json()["current_version"] is None
    assert alice.delete(f"{MEMORIES}/deploy_steps").status_code == 404


def test_a_memory_deleted_and_saved_again_goes_on_counting(alice: Caller) -> None:
    alice.save("deploy_steps", "one")
    alice.delete(f"{MEMORIES}/deploy_steps")
    assert alice.save("deploy_steps", "again").headers["ETag"] == '"3"'


def test_the_admin_api_gives_etags_and_honours_if_match_on_delete(alice: Caller, admin: Caller) -> None:
    memory_id = alice.save("deploy_steps", "one").get_json()["memory_id"]
    alice.save("deploy_steps", "two")
    path = f"/v1/api/admin/memories/{memory_id}"
    assert admin.get(path).headers["ETag"] == '"2"'
    stale = admin.delete(path, headers=if_match(1))
    assert stale.status_code == 412 and stale.get_json()["current_version"] == 2
    assert admin.delete(path, headers=if_match(2)).status_code == 200
    assert admin.get(path).status_code == 404


@pytest.mark.parametrize("header", ['W/"1"', "*", "1", '"1", "2"', '"one"', '""'])
def test_an_if_match_memoryd_did_not_give_is_a_400_naming_the_form(alice: Caller, services: Services, header: str) -> None:
    alice.save("deploy_steps", "one")
    head = services.store.head_position()
    answer = alice.post(MEMORIES, json={"name": "deploy_steps", "content": "two", "description": "d"},
                        headers={"If-Match": header})
    assert answer.status_code == 400 and 'If-Match: "3"' in answer.get_json()["error"]
    assert services.store.head_position() == head


def test_one_idempotency_key_with_another_if_match_is_another_request(alice: Caller) -> None:
    alice.save("deploy_steps", "one")
    body = {"name": "deploy_steps", "content": "two", "description": "d"}
    first = alice.post(MEMORIES, json=body, headers=if_match(1) | {"Idempotency-Key": "k-1"})
    again = alice.post(MEMORIES, json=body, headers=if_match(1) | {"Idempotency-Key": "k-1"})
    other = alice.post(MEMORIES, json=body, headers=if_match(2) | {"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 200 and again.headers["ETag"] == '"2"'
    assert other.status_code == 409


@pytest.mark.parametrize("writers", [2, 8])
def test_of_racing_conditional_writes_at_one_version_exactly_one_wins(any_services: Services, writers: int) -> None:
    any_services.bus.handle(SaveMemory("contested", "v1", "d", None, GLOBAL), EventMetadata())
    start = threading.Barrier(writers)
    results: list[str] = []

    def write(number: int) -> None:
        command = (DeleteMemory("contested", GLOBAL, expected_version=1) if number % 2
                   else SaveMemory("contested", f"writer {number}", "d", None, GLOBAL, expected_version=1))
        start.wait()
        try:
            any_services.bus.handle(command, EventMetadata())
            results.append(f"won {number}")
        except VersionMismatch as mismatch:
            results.append(f"lost at {mismatch.current}")
        except NotFound:  # not reached: a conditional write to a deleted memory is a mismatch
            results.append("not found")

    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [result for result in results if result.startswith("won")]
    assert len(results) == writers and len(winners) == 1, results
    assert any_services.store.head_position() == 2  # the first save and the one winner: nothing else appended
    assert all(result in ("lost at 2", "lost at None") for result in results if not result.startswith("won"))
    assert rebuild_equals_live(any_services)


def test_the_tool_writes_only_at_the_version_it_names(world: World, services: Services) -> None:
    tool = world.session(world.workstream(world.owner), world.owner)
    saved = tool.save("deploy_steps", "one")
    assert saved["ok"] and saved["memory"]["version"] == 1
    assert tool("get", name="deploy_steps")["memory"]["version"] == 1
    assert tool.save("deploy_steps", "two", expected_version=1)["ok"]
    stale = tool.save("deploy_steps", "lost", expected_version=1)
    assert not stale["ok"] and "at version 2, not 1" in stale["error"]
    assert not tool("delete", name="deploy_steps", expected_version="1")["ok"]
    assert tool("delete", name="deploy_steps", expected_version="2")["ok"]
    for bad in (0, -1, True, "two", 1.5):
        refused = tool.save("other", "c", expected_version=bad)
        assert not refused["ok"] and "'expected_version' must be" in refused["error"]
    assert table_rows(services) == []


def test_upgrading_an_older_database_replays_the_table_with_versions(any_services: Services) -> None:
    for content in ("one", "two", "three"):
        any_services.bus.handle(SaveMemory("deploy_steps", content, "d", None, GLOBAL), EventMetadata())
    any_services.bus.handle(SaveMemory("other", "c", "d", None, GLOBAL), EventMetadata())
    settings = migrate._alembic_config()
    with any_services.database.write() as conn:
        settings.attributes["connection"] = conn
        command.downgrade(settings, "0008")
    migrate.upgrade(any_services.database)
    assert table_rows(any_services) == []  # handed back to the log
    any_services.projector.catch_up()
    assert {row["name"]: row["version"] for row in table_rows(any_services)} == {"deploy_steps": 3, "other": 1}
    assert rebuild_equals_live(any_services)
    with any_services.database.read() as conn:  # the lists' indexes kept their order through the round trip
        if conn.dialect.name == "sqlite":
            definitions = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'index' "
                                               "AND name LIKE 'ix_structured_memories_%_newest'").scalars().all()
        else:
            definitions = conn.exec_driver_sql("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND "
                                               "tablename = 'structured_memories' AND indexname LIKE '%%_newest'"
                                               ).scalars().all()
    assert len(definitions) == 6 and all("updated DESC" in definition for definition in definitions), definitions
