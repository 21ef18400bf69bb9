"""The audit trail: ``GET /v1/api/admin/audit``, read straight from the event log.

Every successful save, update and delete leaves exactly one record saying
who did it, through which door, from where and in which request; reads and
failed mutations leave none.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from memoryd.app.services import Services
from tests.helpers import Caller, MakeCaller, present

AUDIT = "/v1/api/admin/audit"
ADMIN_MEMORIES = "/v1/api/admin/memories"
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
CLIENT = {"REMOTE_ADDR": "203.0.113.7"}
METADATA_KEYS = {"actor_user_id", "token_id", "surface", "client_ip", "request_id"}


def save(caller: Caller, name: str, request_id: str = "", **fields: Any) -> Any:
    """Save from CLIENT's address, sending ``request_id`` as X-Request-Id when given."""
    body = {"name": name, "content": "some content", "description": "a description", **fields}
    headers = {"X-Request-Id": request_id} if request_id else {}
    return caller.post("/v1/api/memories", json=body, headers=headers, environ_base=CLIENT)


def records(admin: Caller, query: str = "") -> Any:
    response = admin.get(f"{AUDIT}{query}")
    assert response.status_code == 200, response.json
    return response.json["records"]


PROJECT_AND_TOOL_FIELDS = ("session_id", "workstream_id", "project_id", "member", "access", "user_id", "token_id", "reason")


def without_position_and_time(record: dict[str, Any]) -> dict[str, Any]:
    """The memory record's fields (the tool and project fields are empty for REST writes: checked here)."""
    assert all(record[key] == "" for key in PROJECT_AND_TOOL_FIELDS)
    return {key: value for key, value in record.items() if key not in ("position", "time", *PROJECT_AND_TOOL_FIELDS)}


def test_an_empty_log_has_no_audit_records(admin: Caller) -> None:
    assert admin.get(AUDIT).json == {"records": [], "next_after": 0}


def test_save_update_and_delete_each_leave_one_record_describing_the_change(admin: Caller, alice: Caller) -> None:
    saved = save(alice, "deploy-notes", "req-save", scope="user").json
    save(alice, "deploy_notes", "req-update", scope="user", type="feedback")
    alice.delete("/v1/api/memories/deploy_notes?scope=user", headers={"X-Request-Id": "req-delete"}, environ_base=CLIENT)

    found = records(admin)
    common = {"actor": alice.user_id, "memory_id": saved["memory_id"], "name": "deploy_notes", "scope": "user",
              "scope_id": alice.user_id, "surface": "rest", "client_ip": "203.0.113.7"}
    assert [without_position_and_time(record) for record in found] == [
        common | {"action": "memory.save", "type": "general", "request_id": "req-save"},
        common | {"action": "memory.update", "type": "feedback", "request_id": "req-update"},
        common | {"action": "memory.delete", "type": "feedback", "request_id": "req-delete"},
    ]
    assert all(TIME.fullmatch(record["time"]) for record in found)
    positions = [record["position"] for record in found]
    assert positions == sorted(set(positions))


def test_an_admin_delete_is_recorded_with_the_admin_as_actor_and_the_admin_surface(admin: Caller, alice: Caller) -> None:
    memory_id = alice.save("stale").json["memory_id"]
    admin.delete(f"{ADMIN_MEMORIES}/{memory_id}", headers={"X-Request-Id": "cleanup"}, environ_base=CLIENT)
    last = records(admin)[-1]
    assert without_position_and_time(last) == {
        "action": "memory.delete", "actor": admin.user_id, "memory_id": memory_id, "name": "stale", "scope": "global",
        "scope_id": "", "type": "general", "surface": "admin", "client_ip": "203.0.113.7", "request_id": "cleanup",
    }


def test_a_request_id_the_client_did_not_send_is_generated_and_matches_the_response_header(admin: Caller, alice: Caller) -> None:
    response = alice.save("note")
    generated = response.headers["X-Request-Id"]
    assert generated
    assert [record["request_id"] for record in records(admin)] == [generated]


def test_a_forwarded_for_header_from_an_untrusted_client_does_not_become_the_client_ip(admin: Caller, alice: Caller) -> None:
    alice.post("/v1/api/memories", json={"name": "note", "content": "c", "description": "d"},
               headers={"X-Forwarded-For": "10.9.8.7"}, environ_base=CLIENT)
    assert [record["client_ip"] for record in records(admin)] == ["203.0.113.7"]


def test_reads_are_never_audited(admin: Caller, alice: Caller) -> None:
    memory_id = alice.save("note").json["memory_id"]
    alice.get("/v1/api/memories")
    alice.post("/v1/api/memories/search", json={"query": "note"})
    admin.get(ADMIN_MEMORIES)
    admin.get(f"{ADMIN_MEMORIES}/search?q=note")
    admin.get(f"{ADMIN_MEMORIES}/{memory_id}")
    assert [record["action"] for record in records(admin)] == ["memory.save"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("DELETE", "/v1/api/memories/nothing_here", None, 404),
        ("DELETE", "/v1/api/memories/kept?scope=user", None, 404),
        ("DELETE", f"{ADMIN_MEMORIES}/no-such-id", None, 404),
        ("POST", "/v1/api/memories", {"name": "x", "content": "y"}, 400),
        ("POST", "/v1/api/memories", {"name": "x", "content": "y", "description": "d", "type": "bogus"}, 400),
        ("POST", "/v1/api/memories", {"name": "x", "content": "y", "description": "d", "scope": "project"}, 400),
        ("POST", "/v1/api/memories",
         {"name": "x", "content": "y", "description": "d", "scope": "user", "scope_id": "someone"}, 403),
    ],
)
def test_a_failed_mutation_leaves_no_audit_record_and_nothing_in_the_log(admin: Caller, services: Services, method: str,
                                                                         path: str, body: dict[str, Any] | None,
                                                                         status: int) -> None:
    admin.save("kept")
    head = services.store.head_position()
    assert admin.request(method, path, json=body).status_code == status
    assert services.store.head_position() == head
    assert [record["action"] for record in records(admin)] == ["memory.save"]


def test_a_write_refused_for_lack_of_scope_leaves_no_audit_record(admin: Caller, make_caller: MakeCaller) -> None:
    reader = make_caller("read")
    assert reader.save("note").status_code == 403
    assert records(admin) == []


@pytest.mark.parametrize("surface", ["rest", "admin"])
def test_the_delete_record_carries_the_row_the_client_was_told_was_deleted(admin: Caller, alice: Caller, services: Services,
                                                                           surface: str) -> None:
    alice.save("Runbook", content="first", description="v1")
    latest = alice.save("runbook", content="second", description="v2", type="reference").json
    if surface == "rest":
        told = alice.delete("/v1/api/memories/RUNBOOK").json
        assert told == {"status": "ok", "name": "runbook"}
    else:
        assert admin.delete(f"{ADMIN_MEMORIES}/{latest['memory_id']}").json == {"status": "ok"}
    record = records(admin, "?action=memory.delete")[0]
    assert (record["memory_id"], record["name"], record["scope"], record["scope_id"], record["type"]) == (
        latest["memory_id"], "runbook", "global", "", "reference")
    deleted = list(services.store.iter_all())[-1]
    assert deleted.event_type == "memory.delete"
    assert deleted.payload["memory"] == {key: latest[key] for key in deleted.payload["memory"]}
    assert deleted.payload["memory"]["content"] == "second"


def test_every_event_in_the_log_records_who_did_it_and_from_where(admin: Caller, alice: Caller, services: Services) -> None:
    save(alice, "note", "r1")
    memory_id = save(alice, "note", "r2", content="changed").json["memory_id"]
    admin.delete(f"{ADMIN_MEMORIES}/{memory_id}", headers={"X-Request-Id": "r3"}, environ_base=CLIENT)

    events = list(services.store.iter_all())
    assert all(METADATA_KEYS <= set(event.metadata) for event in events)
    alice_token = present(services.directory.authenticate(alice.token)).token_id
    admin_token = present(services.directory.authenticate(admin.token)).token_id
    assert [
        tuple(event.metadata[key] for key in ("actor_user_id", "token_id", "surface", "client_ip", "request_id"))
        for event in events
    ] == [
        (alice.user_id, alice_token, "rest", "203.0.113.7", "r1"),
        (alice.user_id, alice_token, "rest", "203.0.113.7", "r2"),
        (admin.user_id, admin_token, "admin", "203.0.113.7", "r3"),
    ]


@pytest.fixture
def history(any_make_caller: MakeCaller) -> dict[str, Any]:
    """Alice saves and updates a note, Bob saves one, an admin deletes Bob's (on each backend)."""
    admin, alice, bob = any_make_caller("read,write", ("admin.memories",)), any_make_caller(), any_make_caller()
    alice_note = alice.save("alice_note").json["memory_id"]
    alice.save("alice_note", content="changed")
    bob_note = bob.save("bob_note").json["memory_id"]
    admin.delete(f"{ADMIN_MEMORIES}/{bob_note}")
    return {"admin": admin, "alice": alice, "bob": bob, "alice_note": alice_note, "bob_note": bob_note}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", [("memory.save", "alice_note"), ("memory.update", "alice_note"), ("memory.save", "bob_note"),
              ("memory.delete", "bob_note")]),
        ("action=memory.update", [("memory.update", "alice_note")]),
        ("actor={alice}", [("memory.save", "alice_note"), ("memory.update", "alice_note")]),
        ("actor={admin}", [("memory.delete", "bob_note")]),
        ("memory_id={bob_note}", [("memory.save", "bob_note"), ("memory.delete", "bob_note")]),
        ("memory_id={alice_note}&action=memory.save", [("memory.save", "alice_note")]),
        ("actor={bob}&action=memory.delete", []),
    ],
)
def test_audit_records_can_be_filtered_by_action_actor_and_memory(history: dict[str, Any], query: str,
                                                                  expected: list[Any]) -> None:
    ids = {"alice": history["alice"].user_id, "bob": history["bob"].user_id, "admin": history["admin"].user_id,
           "alice_note": history["alice_note"], "bob_note": history["bob_note"]}
    found = records(history["admin"], "?" + query.format(**ids))
    assert [(record["action"], record["name"]) for record in found] == expected


def test_audit_pages_follow_next_after_until_the_end(admin: Caller, alice: Caller) -> None:
    for index in range(5):
        alice.save(f"note_{index}")
    everything = records(admin)
    seen, after = [], 0
    for expected_size in (2, 2, 1, 0):
        page = admin.get(f"{AUDIT}?after={after}&limit=2").json
        assert len(page["records"]) == expected_size
        seen += page["records"]
        after = page["next_after"]
    assert seen == everything
    assert after == everything[-1]["position"]
    assert [record["name"] for record in seen] == [f"note_{index}" for index in range(5)]


def test_audit_defaults_to_at_most_100_records(admin: Caller, alice: Caller) -> None:
    for index in range(101):
        alice.save(f"note_{index}")
    page = admin.get(AUDIT).json
    assert len(page["records"]) == 100
    assert page["next_after"] == page["records"][-1]["position"]


@pytest.mark.parametrize(
    ("query", "mentions"),
    [
        ("action=memory.get", "action must be one of"),
        ("action=bogus", "action must be one of"),
        ("after=-1", "after"),
        ("after=abc", "after must be an integer"),
        ("limit=0", "limit"),
        ("limit=abc", "limit must be an integer"),
    ],
)
def test_invalid_audit_queries_are_rejected(admin: Caller, query: str, mentions: str) -> None:
    response = admin.get(f"{AUDIT}?{query}")
    assert response.status_code == 400
    assert list(response.json) == ["error"]
    assert mentions in response.json["error"]


def test_an_absurdly_large_after_is_not_a_server_error(admin: Caller, alice: Caller) -> None:
    alice.save("note")
    response = admin.get(f"{AUDIT}?after={10 ** 30}")
    assert response.status_code in (200, 400)
    assert response.json.get("records", []) == []


@pytest.mark.parametrize(("family", "expected"), [
    ("memory.*", ["memory.save", "memory.update", "memory.save", "memory.delete"]),
    ("identity.*", ["user.create"]),
    ("project.*", []),
])
def test_audit_records_can_be_filtered_by_a_family_of_actions(history: dict[str, Any], family: str,
                                                              expected: list[str]) -> None:
    admin = history["admin"]
    assert admin.post("/v1/api/admin/users", json={"name": "carol"}).status_code == 201
    assert [record["action"] for record in records(admin, f"?action={family}")] == expected
