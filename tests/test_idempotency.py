"""``Idempotency-Key`` on POST and DELETE, as a client that retries sees it.

A retry with the same key and request gets the first answer back and appends
nothing; the same key with another request is refused; failed requests are
not remembered; keys expire after the configured window.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import select, update

from memoryd.app.services import Services
from memoryd.storage.schema import idempotency_keys
from tests.helpers import until

if TYPE_CHECKING:
    from tests.helpers import Caller, MakeCaller

MEMORIES = "/v1/api/memories"
ADMIN_MEMORIES = "/v1/api/admin/memories"
BODY = {"name": "phoenix", "content": "launch on friday", "description": "the launch plan"}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def event_count(services: Services) -> int:
    return len(list(services.store.iter_all()))


def save(caller: Caller, key: str, body: dict[str, Any] = BODY) -> Any:
    return caller.post(MEMORIES, json=body, headers=keyed(key))


def stored_keys(services: Services) -> list[tuple[str, str]]:
    with services.database.read() as conn:
        return [(row.user_id, row.key) for row in conn.execute(select(idempotency_keys))]


def connection_lost(*args: Any, **kwargs: Any) -> None:
    """Stands in for ``remember``: the first attempt dies after its append committed."""
    raise ConnectionError("the connection dropped after the append committed")


BOTH_BACKENDS = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)


def age_every_key(services: Services, created: str = "2000-01-01T00:00:00") -> None:
    """Pretend every stored key was taken long ago (the window can't be set below an hour)."""
    with services.database.write() as conn:
        conn.execute(update(idempotency_keys).values(created=created))


# -- retries get the first answer back -----------------------------------------


def test_a_retried_save_returns_the_same_status_and_body_without_appending_again(alice: Caller, services: Services) -> None:
    first = save(alice, "save-1")
    events_after_first = event_count(services)

    retry = save(alice, "save-1")

    assert first.status_code == 201
    assert (retry.status_code, retry.json) == (first.status_code, first.json)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["X-Memory-Position"] == first.headers["X-Memory-Position"]
    assert event_count(services) == events_after_first == 1


def test_the_first_answer_to_a_key_is_not_marked_as_replayed(alice: Caller) -> None:
    first = save(alice, "save-1")

    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first.headers


def test_a_retried_create_stays_201_with_the_original_content_after_the_memory_changed(
    alice: Caller, services: Services
) -> None:
    first = save(alice, "create-1")
    assert alice.save("phoenix", content="moved to monday").status_code == 200  # a fresh save is now an update

    retry = save(alice, "create-1")

    assert retry.status_code == 201
    assert retry.json == first.json
    assert retry.json["content"] == "launch on friday"
    assert event_count(services) == 2


def test_a_retried_delete_by_name_returns_200_again_although_the_memory_is_gone(alice: Caller, services: Services) -> None:
    alice.save("phoenix")
    first = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("delete-1"))
    assert alice.delete(f"{MEMORIES}/phoenix").status_code == 404  # what a fresh delete would now say

    retry = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("delete-1"))

    assert first.status_code == 200
    assert (retry.status_code, retry.json) == (200, first.json)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["X-Memory-Position"] == first.headers["X-Memory-Position"]
    assert event_count(services) == 2


def test_a_retried_admin_delete_by_id_returns_200_again_without_appending(
    alice: Caller, admin: Caller, services: Services
) -> None:
    memory_id = alice.save("phoenix").json["memory_id"]
    first = admin.delete(f"{ADMIN_MEMORIES}/{memory_id}", headers=keyed("admin-delete-1"))
    assert admin.delete(f"{ADMIN_MEMORIES}/{memory_id}").status_code == 404  # what a fresh delete would now say

    retry = admin.delete(f"{ADMIN_MEMORIES}/{memory_id}", headers=keyed("admin-delete-1"))

    assert first.status_code == 200
    assert (retry.status_code, retry.json) == (200, first.json)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["X-Memory-Position"] == first.headers["X-Memory-Position"]
    assert event_count(services) == 2


def test_key_order_and_whitespace_in_the_json_body_do_not_make_a_different_request(
    alice: Caller, services: Services
) -> None:
    first = alice.post(MEMORIES, headers=keyed("order-1"), content_type="application/json",
                       data='{"name": "phoenix", "content": "c", "description": "d"}')

    retry = alice.post(MEMORIES, headers=keyed("order-1"), content_type="application/json",
                       data='{"description":"d","content":"c","name":"phoenix"}')

    assert first.status_code == 201
    assert (retry.status_code, retry.json) == (201, first.json)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert event_count(services) == 1


# -- a key still in use ---------------------------------------------------------


def test_a_retry_of_a_request_still_running_is_a_409_to_retry_even_past_the_lease(
        alice: Caller, services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("api.idempotency.WAIT_FOR_HOLDER", 0.0)
    monkeypatch.setattr("events.idempotency.RENEW_EVERY", 0.05)
    running, finish = threading.Event(), threading.Event()
    handle = services.bus.handle

    def slow_handle(*args: Any, **kwargs: Any) -> Any:
        running.set()
        finish.wait(30)
        return handle(*args, **kwargs)

    monkeypatch.setattr(services.bus, "handle", slow_handle)
    first: list[Any] = []
    attempt = threading.Thread(target=lambda: first.append(save(alice, "slow")))
    attempt.start()
    try:
        assert running.wait(30)
        age_every_key(services)  # as if it had run past its lease; the running request renews it

        def renewed() -> bool:
            with services.database.read() as conn:
                return conn.execute(select(idempotency_keys.c.created)).scalar() != "2000-01-01T00:00:00"

        until(renewed, "the running request renewing its claim")
        retry = save(alice, "slow")
    finally:
        finish.set()
        attempt.join(30)

    assert retry.status_code == 409 and retry.json["code"] == "request_in_progress"
    assert 1 <= int(retry.headers["Retry-After"]) <= 5
    assert first[0].status_code == 201 and event_count(services) == 1
    again = save(alice, "slow")
    assert (again.status_code, again.json, again.headers["Idempotent-Replayed"]) == (201, first[0].json, "true")


# -- the same key for something else -------------------------------------------


def test_the_same_key_with_another_body_is_a_409_with_the_error_shape(alice: Caller, services: Services) -> None:
    save(alice, "reused")

    response = save(alice, "reused", {**BODY, "content": "something else"})

    assert response.status_code == 409
    assert set(response.json) == {"error"}
    assert "reused" in response.json["error"]
    assert event_count(services) == 1


def test_the_same_key_on_another_endpoint_is_a_409(alice: Caller, services: Services) -> None:
    save(alice, "reused")

    response = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("reused"))

    assert response.status_code == 409
    assert set(response.json) == {"error"}
    assert alice.get(MEMORIES).json["total"] == 1
    assert event_count(services) == 1


def test_the_same_key_used_by_another_user_is_independent(make_caller: MakeCaller, services: Services) -> None:
    alice, bob = make_caller(), make_caller()
    from_alice = save(alice, "shared-key", {**BODY, "scope": "user"})

    from_bob = save(bob, "shared-key", {**BODY, "scope": "user"})

    assert from_alice.status_code == from_bob.status_code == 201
    assert "Idempotent-Replayed" not in from_bob.headers
    assert from_bob.json["memory_id"] != from_alice.json["memory_id"]
    assert from_bob.json["scope_id"] == bob.user_id
    assert event_count(services) == 2


def test_another_user_reusing_a_key_with_a_different_body_is_not_a_conflict(
    make_caller: MakeCaller, services: Services
) -> None:
    alice, bob = make_caller(), make_caller()
    save(alice, "shared-key")

    response = save(bob, "shared-key", {**BODY, "name": "bobs_plan"})

    assert response.status_code == 201
    assert response.json["name"] == "bobs_plan"
    assert event_count(services) == 2


# -- invalid keys ----------------------------------------------------------------


@pytest.mark.parametrize("key", ["", "k" * 256, "clé", "tab\there"], ids=["empty", "256 chars", "non-ascii", "control char"])
def test_an_invalid_key_is_a_400_and_nothing_is_saved(alice: Caller, services: Services, key: str) -> None:
    response = save(alice, key)

    assert response.status_code == 400
    assert set(response.json) == {"error"}
    assert "Idempotency-Key" in response.json["error"]
    assert event_count(services) == 0


def test_an_invalid_key_on_a_delete_is_a_400_and_nothing_is_deleted(alice: Caller, admin: Caller) -> None:
    memory_id = alice.save("phoenix").json["memory_id"]

    by_name = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("k" * 256))
    by_id = admin.delete(f"{ADMIN_MEMORIES}/{memory_id}", headers=keyed(""))

    assert (by_name.status_code, by_id.status_code) == (400, 400)
    assert alice.get(MEMORIES).json["total"] == 1


def test_a_key_of_255_printable_ascii_characters_is_accepted_and_replayed(alice: Caller, services: Services) -> None:
    key = "~" + "k" * 253 + "!"

    first = save(alice, key)
    retry = save(alice, key)

    assert (first.status_code, retry.status_code) == (201, 201)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert event_count(services) == 1


# -- failures are not remembered -------------------------------------------------


def test_a_save_that_failed_validation_is_not_remembered_and_can_be_retried_with_the_same_key(
    alice: Caller, services: Services
) -> None:
    rejected = save(alice, "fix-and-retry", {**BODY, "name": ""})

    retried = save(alice, "fix-and-retry")

    assert rejected.status_code == 400
    assert retried.status_code == 201
    assert "Idempotent-Replayed" not in retried.headers
    assert event_count(services) == 1


def test_a_delete_that_found_nothing_is_not_remembered_and_can_be_retried_with_the_same_key(
    alice: Caller, services: Services
) -> None:
    missing = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("delete-later"))
    alice.save("phoenix")

    retried = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("delete-later"))

    assert missing.status_code == 404
    assert retried.status_code == 200
    assert "Idempotent-Replayed" not in retried.headers
    assert alice.get(MEMORIES).json["total"] == 0


def test_an_admin_delete_of_an_unknown_id_is_not_remembered(admin: Caller, alice: Caller) -> None:
    missing = admin.delete(f"{ADMIN_MEMORIES}/no-such-id", headers=keyed("admin-later"))
    memory_id = alice.save("phoenix").json["memory_id"]

    retried = admin.delete(f"{ADMIN_MEMORIES}/{memory_id}", headers=keyed("admin-later"))

    assert missing.status_code == 404
    assert retried.status_code == 200
    assert alice.get(MEMORIES).json["total"] == 0


# -- a dropped connection, and concurrent retries --------------------------------


@BOTH_BACKENDS
def test_a_connection_dropped_during_an_append_then_retried_never_duplicates_an_event(
    any_make_caller: MakeCaller, any_services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = any_make_caller()

    monkeypatch.setattr(any_services.idempotency, "remember", connection_lost)
    lost = save(alice, "flaky-network")
    monkeypatch.undo()

    retry = save(alice, "flaky-network")

    events = list(any_services.store.iter_all())
    assert lost.status_code == 500  # the client never saw the first answer
    assert len(events) == 1
    assert retry.status_code == 201
    assert retry.json["memory_id"] == events[0].payload["memory"]["memory_id"]
    assert retry.json["content"] == BODY["content"]
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["X-Memory-Position"] == str(events[0].position)
    assert save(alice, "flaky-network").json == retry.json
    assert len(list(any_services.store.iter_all())) == 1


def test_a_dropped_save_retried_after_someone_changed_the_memory_still_answers_what_it_wrote(
    alice: Caller, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services.idempotency, "remember", connection_lost)
    assert save(alice, "flaky-network").status_code == 500
    monkeypatch.undo()
    assert alice.save("phoenix", content="moved to monday").status_code == 200

    retry = save(alice, "flaky-network")

    assert retry.status_code == 201
    assert retry.json["content"] == BODY["content"]


def test_a_dropped_delete_retried_answers_200_and_deletes_once(
    alice: Caller, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice.save("phoenix")
    monkeypatch.setattr(services.idempotency, "remember", connection_lost)
    lost = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("flaky-delete"))
    monkeypatch.undo()

    retry = alice.delete(f"{MEMORIES}/phoenix", headers=keyed("flaky-delete"))

    assert lost.status_code == 500
    assert (retry.status_code, retry.json) == (200, {"status": "ok", "name": "phoenix"})
    assert event_count(services) == 2


@BOTH_BACKENDS
def test_eight_concurrent_requests_with_the_same_key_append_exactly_one_event_and_get_the_same_answer(
    any_make_caller: MakeCaller, any_services: Services
) -> None:
    alice = any_make_caller()
    app = alice.client.application
    start = threading.Barrier(8)
    answers: list[Any] = [None] * 8

    def send(index: int) -> None:
        client = app.test_client()
        start.wait()
        answers[index] = client.post(MEMORIES, json=BODY,
                                     headers={"Authorization": f"Bearer {alice.token}", **keyed("stampede")})

    threads = [threading.Thread(target=send, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert event_count(any_services) == 1
    assert {(answer.status_code, answer.headers["X-Memory-Position"]) for answer in answers} == {(201, "1")}
    assert all(answer.json == answers[0].json for answer in answers)
    assert sum("Idempotent-Replayed" not in answer.headers for answer in answers) == 1


# -- keys expire -----------------------------------------------------------------


def test_a_key_older_than_the_window_runs_the_request_again(alice: Caller, services: Services) -> None:
    first = save(alice, "old-key")
    age_every_key(services)

    again = save(alice, "old-key")

    assert first.status_code == 201
    assert again.status_code == 200  # a fresh save: the memory exists now
    assert "Idempotent-Replayed" not in again.headers
    assert int(again.headers["X-Memory-Position"]) > int(first.headers["X-Memory-Position"])
    assert event_count(services) == 2
    assert save(alice, "old-key").headers["Idempotent-Replayed"] == "true"  # the key is taken afresh


def test_an_expired_key_may_be_used_for_another_request_without_a_conflict(alice: Caller, services: Services) -> None:
    save(alice, "old-key")
    age_every_key(services)

    response = save(alice, "old-key", {**BODY, "name": "another"})

    assert response.status_code == 201
    assert response.json["name"] == "another"


def test_a_key_inside_the_window_is_still_replayed(alice: Caller, services: Services) -> None:
    save(alice, "recent-key")
    age_every_key(services, (dt.datetime.now(dt.UTC) - dt.timedelta(hours=23)).strftime("%Y-%m-%dT%H:%M:%S"))

    retry = save(alice, "recent-key")

    assert retry.headers["Idempotent-Replayed"] == "true"
    assert event_count(services) == 1


def test_purging_removes_expired_keys_and_keeps_the_rest(make_caller: MakeCaller, services: Services) -> None:
    alice, bob = make_caller(), make_caller()
    save(alice, "old-key")
    age_every_key(services)
    save(bob, "new-key")

    purged = services.idempotency.purge_expired()

    assert purged == 1
    assert stored_keys(services) == [(bob.user_id, "new-key")]
    assert save(bob, "new-key").headers["Idempotent-Replayed"] == "true"
