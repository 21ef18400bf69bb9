"""``POST /v1/api/memories/batch``: saves and deletes applied in order, in one append, all or none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from memoryd.app.services import Services
    from tests.helpers import Caller

BATCH = "/v1/api/memories/batch"
MEMORIES = "/v1/api/memories"


def save(name: str, content: str = "some content", **fields: Any) -> dict[str, Any]:
    return {"action": "save", "name": name, "content": content, "description": "a description", **fields}


def delete(name: str, **fields: Any) -> dict[str, Any]:
    return {"action": "delete", "name": name, **fields}


def names(caller: Caller) -> dict[str, str]:
    return {memory["name"]: memory["content"] for memory in caller.get(MEMORIES).get_json()["memories"]}


def test_a_batch_applies_its_writes_in_order_at_consecutive_positions(alice: Caller) -> None:
    alice.save("old_note", "old")
    answer = alice.post(BATCH, json={"writes": [save("a", "first"), save("a", "second"), delete("old_note"),
                                                save("b")]})
    assert answer.status_code == 200
    body = answer.get_json()
    assert [(write["action"], write["name"], write.get("created")) for write in body["writes"]] == [
        ("save", "a", True), ("save", "a", False), ("delete", "old_note", None), ("save", "b", True)]
    assert [write["memory"]["version"] for write in body["writes"]] == [1, 2, 2, 1]
    assert body["position"] == int(answer.headers["X-Memory-Position"])
    assert names(alice) == {"a": "second", "b": "some content"}


def test_a_refused_write_names_its_index_and_nothing_of_the_batch_is_written(alice: Caller, services: Services) -> None:
    head = services.store.head_position()
    answer = alice.post(BATCH, json={"writes": [save("kept_out"), delete("never_saved")]})
    assert answer.status_code == 404
    assert answer.get_json()["error"] == "writes[1]: Memory 'never_saved' not found"
    assert services.store.head_position() == head
    assert names(alice) == {}


@pytest.mark.parametrize(("writes", "status", "message"), [
    ([], 400, "writes must be a list of 1 to 1000 saves and deletes"),
    ("save", 400, "writes must be a list of 1 to 1000 saves and deletes"),
    ([save("x")] * 1001, 400, "writes must be a list of 1 to 1000 saves and deletes"),
    ([save("ok"), {"action": "rename", "name": "x"}], 400, "writes[1]: action must be save or delete"),
    ([save("ok"), save("x", content="")], 400, "writes[1]: content is required"),
    ([{"action": "save", "name": "x", "content": "c"}], 400, "writes[0]: description is required"),
    ([save("ok"), save("x", type="nonsense")], 400,
     "writes[1]: invalid type: nonsense; must be one of ['feedback', 'general', 'reference', 'user']"),
    ([save("x", scope="workstream", scope_id="ws_nowhere")], 404, None),
    ([save("x", expected_version=3)], 412, "writes[0]: the memory is not at version 3: no such memory; read it "
                                           "again and retry"),
])
def test_a_bad_batch_is_refused_whole_with_the_write_it_names(alice: Caller, writes: Any, status: int,
                                                               message: str | None) -> None:
    answer = alice.post(BATCH, json={"writes": writes})
    assert answer.status_code == status, answer.get_json()
    if message is not None:
        assert answer.get_json()["error"] == message
    else:
        assert answer.get_json()["error"].startswith("writes[0]: ")
    assert names(alice) == {}


def test_a_delete_with_missing_ok_counts_a_missing_memory_as_deleted(alice: Caller) -> None:
    answer = alice.post(BATCH, json={"writes": [delete("nothing_here", missing_ok=True)]})
    assert answer.status_code == 200
    assert answer.get_json() == {"writes": [{"action": "delete", "name": "nothing_here", "deleted": False,
                                             "memory": None}], "position": None}


def test_expected_version_guards_each_write(alice: Caller) -> None:
    alice.save("guarded", "v1")
    stale = alice.post(BATCH, json={"writes": [save("guarded", "v2", expected_version=2)]})
    assert stale.status_code == 412 and stale.get_json()["current_version"] == 1
    fresh = alice.post(BATCH, json={"writes": [save("guarded", "v2", expected_version=1)]})
    assert fresh.get_json()["writes"][0]["memory"]["version"] == 2


def test_a_retry_with_the_same_idempotency_key_replays_the_batch(alice: Caller, services: Services) -> None:
    request = {"writes": [save("once"), delete("once")]}
    first = alice.post(BATCH, json=request, headers={"Idempotency-Key": "batch-1"})
    head = services.store.head_position()
    again = alice.post(BATCH, json=request, headers={"Idempotency-Key": "batch-1"})
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == first.get_json()
    assert services.store.head_position() == head


def test_a_read_only_token_may_not_write_a_batch(make_caller: Any) -> None:
    reader = make_caller("read")
    assert reader.post(BATCH, json={"writes": [save("x")]}).status_code == 403


def test_search_hits_carry_their_bm25_score_best_first(alice: Caller) -> None:
    alice.save("deploys", "we deploy with buildkite every friday; deploy deploy")
    alice.save("lunch", "lunch is at noon; we deploy rarely")
    hits = alice.post("/v1/api/memories/search", json={"query": "deploy"}).get_json()["memories"]
    assert [hit["name"] for hit in hits] == ["deploys", "lunch"]
    assert hits[0]["score"] > hits[1]["score"] > 0
