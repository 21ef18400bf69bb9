"""A memory's history from the log: every write, who made it, through which door, and the memory it left.

On SQLite and on the real PostgreSQL, through the admin API: deleted memories keep their history, a name
saved again after a delete is another memory with its own history, and an event an operator superseded is
shown as the projections applied it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from commands.supersede import SupersedeEvent
from events import store
from events.types import EventMetadata, memory_stream_id
from memoryd.app.services import Services
from tests.helpers import Caller, present

if TYPE_CHECKING:
    from tests.helpers import MakeCaller

MEMORIES = "/v1/api/memories"


def test_every_write_of_a_memory_is_listed_with_its_content_actor_and_version(any_make_caller: MakeCaller) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    memory_id = alice.save("deploy_steps", "first", "how we deploy").get_json()["memory_id"]
    alice.save("deploy_steps", "second", "how we deploy", type="reference")
    alice.delete(f"{MEMORIES}/deploy_steps")
    again = alice.save("deploy_steps", "a new memory of the same name").get_json()["memory_id"]

    answer = admin.get(f"/v1/api/admin/memories/{memory_id}/history")
    assert answer.status_code == 200 and answer.get_json()["memory_id"] == memory_id
    versions = answer.get_json()["versions"]
    assert [(v["version"], v["event_type"], v["memory"]["content"], v["memory"]["type"]) for v in versions] == [
        (1, "memory.save", "first", "general"), (2, "memory.update", "second", "reference"),
        (3, "memory.delete", "second", "reference")]
    assert {v["actor"] for v in versions} == {alice.user_id} and {v["surface"] for v in versions} == {"rest"}
    assert [v["position"] for v in versions] == sorted(v["position"] for v in versions)
    assert not any(v["superseded"] for v in versions)
    assert set(versions[0]["memory"]) == {"memory_id", "name", "description", "type", "scope", "scope_id", "content",
                                          "created", "updated"}

    recreated = admin.get(f"/v1/api/admin/memories/{again}/history").get_json()["versions"]
    assert [(v["version"], v["memory"]["content"]) for v in recreated] == [(4, "a new memory of the same name")]


def test_a_superseded_event_is_shown_as_the_projections_applied_it(any_make_caller: MakeCaller, any_services: Services) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    saved = alice.save("deploy_steps", "a secret slipped in", "d")
    memory_id, position = saved.get_json()["memory_id"], int(saved.headers["X-Memory-Position"])
    original = present(any_services.store.event_at(position))
    payload = {"memory": original.payload["memory"] | {"content": "[removed]"}}
    replacement = {"event_type": original.event_type, "payload": payload}
    any_services.bus.handle(SupersedeEvent(position, "a secret", replacement), EventMetadata(surface="cli"))
    versions = admin.get(f"/v1/api/admin/memories/{memory_id}/history").get_json()["versions"]
    assert [(v["memory"]["content"], v["superseded"]) for v in versions] == [("[removed]", True)]


def test_history_is_for_administrators_and_an_unknown_memory_is_a_404(any_make_caller: MakeCaller) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    memory_id = alice.save("deploy_steps", "c").get_json()["memory_id"]
    assert alice.get(f"/v1/api/admin/memories/{memory_id}/history").status_code == 403
    missing = admin.get("/v1/api/admin/memories/no-such-memory/history")
    assert missing.status_code == 404 and missing.get_json() == {"error": "Memory not found"}


def test_an_event_the_code_cannot_read_is_shown_as_stored_and_long_streams_are_read_in_pieces(
        any_make_caller: MakeCaller, any_services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = any_make_caller("read,write", ("admin.memories",))
    planted = {"memory_id": "id-odd", "name": "odd", "scope": "global", "scope_id": "", "content": "kept as stored"}
    any_services.store.append_rows([dict(  # no description, no type, no times: it does not decode
        stream_id=memory_stream_id("odd", "global", ""), stream_version=1, event_type="memory.save",
        schema_version=1, payload={"memory": planted}, meta={"actor_user_id": "intruder"},
        recorded_at="2026-12-01T00:00:00.000000Z")])
    monkeypatch.setattr(store, "AT_ONCE", 2)  # the stream's events are read two at a time
    for version, content in ((2, "two"), (3, "three")):
        any_services.store.append_rows([dict(
            stream_id=memory_stream_id("odd", "global", ""), stream_version=version, event_type="memory.update",
            schema_version=1, payload={"memory": planted | {"content": content}}, meta={},
            recorded_at="2026-12-01T00:00:01.000000Z")])
    answer = admin.get("/v1/api/admin/memories/id-odd/history")
    assert answer.status_code == 200
    assert [(v["version"], v["memory"]["content"], v["actor"]) for v in answer.get_json()["versions"]] == [
        (1, "kept as stored", "intruder"), (2, "two", ""), (3, "three", "")]


def restore(admin: Caller, memory_id: str, version: Any) -> Any:
    return admin.post(f"/v1/api/admin/memories/{memory_id}/restore", json={"version": version})


def test_a_restore_brings_a_version_back_as_a_new_audited_write(any_make_caller: MakeCaller) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    memory_id = alice.save("deploy_steps", "first", "how we deploy", type="reference").get_json()["memory_id"]
    alice.save("deploy_steps", "second", "changed", type="general")
    answer = restore(admin, memory_id, 1)
    assert answer.status_code == 200 and answer.headers["ETag"] == '"3"'
    assert (answer.get_json()["content"], answer.get_json()["description"], answer.get_json()["type"]) == (
        "first", "how we deploy", "reference")
    assert alice.get(f"{MEMORIES}/deploy_steps").get_json()["content"] == "first"
    last = admin.get(f"/v1/api/admin/memories/{memory_id}/history").get_json()["versions"][-1]
    assert (last["version"], last["event_type"], last["surface"], last["actor"]) == (3, "memory.update", "admin",
                                                                                     admin.user_id)


def test_a_deleted_memory_comes_back_under_its_own_id_unless_its_name_holds_another(any_make_caller: MakeCaller) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    memory_id = alice.save("deploy_steps", "first").get_json()["memory_id"]
    alice.delete(f"{MEMORIES}/deploy_steps")
    back = restore(admin, memory_id, 1)
    assert back.status_code == 201 and back.get_json()["memory_id"] == memory_id
    assert admin.get(f"/v1/api/admin/memories/{memory_id}").get_json()["content"] == "first"

    alice.delete(f"{MEMORIES}/deploy_steps")
    other = alice.save("deploy_steps", "someone else's").get_json()["memory_id"]
    refused = restore(admin, memory_id, 1)
    assert refused.status_code == 409 and other in refused.get_json()["error"]
    assert alice.get(f"{MEMORIES}/deploy_steps").get_json()["content"] == "someone else's"


@pytest.mark.parametrize(("version", "status", "message"), [
    (2, 400, "is the memory's delete"), (9, 404, "has no version 9"), (0, 400, "version must be 1 or more"),
    ("two", 400, "version must be an integer"), (None, 400, "version must be an integer")])
def test_a_restore_of_a_delete_a_missing_or_a_bad_version_writes_nothing(any_make_caller: MakeCaller, any_services: Services,
                                                                         version: Any, status: int, message: str) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    memory_id = alice.save("deploy_steps", "first").get_json()["memory_id"]
    alice.delete(f"{MEMORIES}/deploy_steps")
    head = any_services.store.head_position()
    answer = restore(admin, memory_id, version)
    assert answer.status_code == status and message in answer.get_json()["error"]
    assert any_services.store.head_position() == head
    assert restore(admin, "no-such-memory", 1).status_code == 404
    assert restore(alice, memory_id, 1).status_code == 403
