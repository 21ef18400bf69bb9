"""Read your own writes: positions out of every write, bounded waits on reads.

Writes project their own events before they answer, with or without Redis.
What a write cannot project itself goes to the workers: the write still
answers with its status once durable, marked pending, and a read naming its
position waits for a worker, or answers 503 once the bound passes. With
Redis unreachable the writer catches up in its own process instead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from api.app import create_app
from events.types import EventMetadata, MemorySaved, memory_stream_id
from memoryd.app.services import Services
from memoryd.kernel.domain import Memory
from tests.helpers import caller_factory, names
from workers import jobs

if TYPE_CHECKING:
    from tests.helpers import Caller, MakeCaller

MEMORIES = "/v1/api/memories"
SEARCH = "/v1/api/memories/search"
ADMIN_MEMORIES = "/v1/api/admin/memories"
DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def positions_in_log(services: Services) -> list[int]:
    return [event.position for event in services.store.iter_all()]



def admin_of(services: Services) -> Caller:
    return caller_factory(create_app(services), services)("read,write", ("admin.memories",))




@pytest.fixture
def bound_jobs(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Bind worker jobs to the test's services, and unbind them afterwards."""

    def bind(services: Services) -> None:
        monkeypatch.setattr(jobs, "_services", None)
        jobs.bind(services)

    return bind


# -- every write reports its position ------------------------------------------


def test_every_save_and_delete_answers_the_position_of_its_own_event(
    any_make_caller: MakeCaller, any_services: Services
) -> None:
    alice, admin = any_make_caller(), any_make_caller("read,write", ("admin.memories",))
    responses = [alice.save("a"), alice.save("b"), alice.save("a", content="changed")]
    responses.append(alice.delete(f"{MEMORIES}/a"))
    responses.append(admin.delete(f"{ADMIN_MEMORIES}/{responses[1].json['memory_id']}"))

    assert [response.status_code for response in responses] == [201, 201, 200, 200, 200]
    assert [int(response.headers["X-Memory-Position"]) for response in responses] == positions_in_log(any_services)
    assert all("X-Projection-Pending" not in response.headers for response in responses)


def test_a_position_names_the_event_that_write_appended(alice: Caller, services: Services) -> None:
    alice.save("a")
    response = alice.save("b")

    event = services.store.event_at(int(response.headers["X-Memory-Position"]))

    assert event is not None
    assert event.payload["memory"]["memory_id"] == response.json["memory_id"]


def test_failed_writes_report_no_position(alice: Caller) -> None:
    assert "X-Memory-Position" not in alice.delete(f"{MEMORIES}/missing").headers
    assert "X-Memory-Position" not in alice.save("").headers


# -- embedded: projected before the answer ---------------------------------------


def test_embedded_writes_are_not_pending_and_the_next_read_sees_them(alice: Caller, admin: Caller) -> None:
    saved = alice.save("phoenix")
    assert "X-Projection-Pending" not in saved.headers
    assert names(alice.get(MEMORIES)) == ["phoenix"]

    updated = alice.save("phoenix", content="moved to monday")
    assert "X-Projection-Pending" not in updated.headers
    assert alice.get(MEMORIES).json["memories"][0]["content"] == "moved to monday"

    deleted = alice.delete(f"{MEMORIES}/phoenix")
    assert "X-Projection-Pending" not in deleted.headers
    assert names(alice.get(MEMORIES)) == []

    memory_id = alice.save("atlas").json["memory_id"]
    by_id = admin.delete(f"{ADMIN_MEMORIES}/{memory_id}")
    assert "X-Projection-Pending" not in by_id.headers
    assert admin.get(f"{ADMIN_MEMORIES}/{memory_id}").status_code == 404


# -- reads with a minimum position -------------------------------------------------


@pytest.mark.parametrize("how", ["header", "parameter"])
def test_a_read_at_or_below_the_checkpoint_answers_at_once(alice: Caller, admin: Caller, how: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    first = int(alice.save("a").headers["X-Memory-Position"])
    head = int(alice.save("b").headers["X-Memory-Position"])
    memory_id = alice.get(MEMORIES).json["memories"][0]["memory_id"]

    def at(position: int) -> dict[str, Any]:
        if how == "header":
            return {"headers": {"X-Min-Position": str(position)}}
        return {"query_string": {"min_position": str(position)}}

    def no_waiting(seconds: float) -> None:
        raise AssertionError(f"a read at or below the checkpoint waited ({seconds} s)")

    monkeypatch.setattr("projections.projector.time.sleep", no_waiting)
    answers = [
        alice.get(MEMORIES, **at(head)),
        alice.get(MEMORIES, **at(first)),
        alice.get(MEMORIES, **at(0)),
        alice.post(SEARCH, json={"query": "content"}, **at(head)),
        admin.get(ADMIN_MEMORIES, **at(head)),
        admin.get(f"{ADMIN_MEMORIES}/search", query_string={"q": "content", **at(head).get("query_string", {})},
                  headers=at(head).get("headers", {})),
        admin.get(f"{ADMIN_MEMORIES}/{memory_id}", **at(head)),
    ]

    assert [answer.status_code for answer in answers] == [200] * 7
    assert sorted(names(answers[0])) == ["a", "b"]


@pytest.mark.parametrize("how", ["header", "parameter"])
def test_a_read_beyond_the_head_of_the_log_is_a_400_at_once_naming_the_head(built: Any, how: str) -> None:
    services = built(read_wait_ms=50)
    admin = admin_of(services)
    head = int(admin.save("a").headers["X-Memory-Position"])
    wanted = head + 1
    at: dict[str, Any] = ({"headers": {"X-Min-Position": str(wanted)}} if how == "header"
                          else {"query_string": {"min_position": str(wanted)}})

    answers = [
        admin.get(MEMORIES, **at),
        admin.post(SEARCH, json={"query": "a"}, **at),
        admin.get(ADMIN_MEMORIES, **at),
        admin.get(f"{ADMIN_MEMORIES}/search", query_string={"q": "a", **at.get("query_string", {})},
                  headers=at.get("headers", {})),
        admin.get(f"{ADMIN_MEMORIES}/some-id", **at),
    ]

    for answer in answers:
        assert answer.status_code == 400
        assert answer.json == {"error": f"min_position {wanted} is beyond the head of the log ({head}); "
                                        "use a position a write answered in X-Memory-Position"}


def test_a_read_past_the_bound_waits_out_the_configured_bound_then_answers_503(built: Any,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    services = built(read_wait_ms=300)
    alice = admin_of(services)
    unprojected = Memory("m-1", "a", "d", "general", "global", "", "c", "2026-01-01T00:00:00", "2026-01-01T00:00:00")
    position = services.store.append(memory_stream_id("a", "global", ""), 0, [MemorySaved(unprojected)], EventMetadata())
    waits: list[tuple[int, float]] = []
    wait_for = services.projector.wait_for

    def recording_wait_for(wanted: int, timeout: float) -> Any:
        waits.append((wanted, timeout))
        return wait_for(wanted, timeout)

    monkeypatch.setattr(services.projector, "wait_for", recording_wait_for)

    response = alice.get(MEMORIES, headers={"X-Min-Position": str(position)})

    assert response.status_code == 503
    assert response.json == {"error": f"the read model has reached position 0, not {position} yet; retry shortly"}
    assert waits == [(position, 0), (position, 0.3)]  # a look, then one wait bounded by read_wait_ms


def test_the_header_wins_over_the_parameter(built: Any) -> None:
    services = built(read_wait_ms=50)
    alice = admin_of(services)
    alice.save("a")

    response = alice.get(MEMORIES, headers={"X-Min-Position": "1"}, query_string={"min_position": "99"})

    assert response.status_code == 200


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "1e3", "9" * 19, "0x10"])
@pytest.mark.parametrize("how", ["header", "parameter"])
def test_an_invalid_minimum_position_is_a_400(alice: Caller, admin: Caller, value: str, how: str) -> None:
    at: dict[str, Any] = ({"headers": {"X-Min-Position": value}} if how == "header"
                          else {"query_string": {"min_position": value}})

    answers = [alice.get(MEMORIES, **at), alice.post(SEARCH, json={"query": "x"}, **at), admin.get(ADMIN_MEMORIES, **at)]

    for answer in answers:
        assert answer.status_code == 400
        assert set(answer.json) == {"error"}
        assert "min_position" in answer.json["error"]


# -- with workers (Redis configured) -------------------------------------------------
# A write projects its own events in its step, as embedded; what the step cannot take (here a backlog: an
# event appended behind the projections' back) goes to the workers, and the write waits for one, bounded.


def leave_a_backlog(services: Services) -> int:
    """An event the projections have not applied, as after a crash: the next writes' steps cannot run."""
    services.projector.catch_up()
    stray = Memory("m-stray", "stray", "d", "general", "global", "", "c", "2026-01-01T00:00:00", "2026-01-01T00:00:00")
    return services.store.append(memory_stream_id("stray", "global", ""), 0, [MemorySaved(stray)], EventMetadata())


def test_with_workers_configured_a_write_projects_its_own_event_and_never_touches_the_queue(
    built: Any, redis_url: str
) -> None:
    services = built(redis_url=redis_url, write_wait_ms=60_000)
    services.projector.catch_up()  # what any worker or API process does first
    alice = admin_of(services)

    saved = alice.save("phoenix")
    deleted = alice.delete(f"{MEMORIES}/phoenix")

    assert (saved.status_code, deleted.status_code) == (201, 200)
    assert "X-Projection-Pending" not in saved.headers and "X-Projection-Pending" not in deleted.headers
    assert services.queue.count == 0  # no job: nothing was left for a worker
    assert names(alice.get(MEMORIES)) == []


def test_with_no_worker_running_a_save_answers_201_pending_and_reads_wait_for_a_worker(
    built: Any, redis_url: str, bound_jobs: Any
) -> None:
    services = built(redis_url=redis_url, write_wait_ms=50, read_wait_ms=50)
    alice = admin_of(services)
    leave_a_backlog(services)

    saved = alice.save("phoenix", content="launch on friday")
    position = int(saved.headers["X-Memory-Position"])

    assert saved.status_code == 201
    assert saved.headers["X-Projection-Pending"] == "true"
    assert saved.json["name"] == "phoenix" and saved.json["content"] == "launch on friday"
    assert positions_in_log(services)[-1] == position  # durable, though not yet projected
    assert services.queue.count == 1  # a catch-up job waits for a worker

    waiting = alice.get(MEMORIES, headers={"X-Min-Position": str(position)})
    assert waiting.status_code == 503
    assert f"position {position - 2}" in waiting.json["error"]

    bound_jobs(services)
    assert jobs.catch_up(position) == position

    caught_up = alice.get(MEMORIES, headers={"X-Min-Position": str(position)})
    assert caught_up.status_code == 200
    assert [(row["name"], row["content"]) for row in caught_up.json["memories"]] == [("phoenix", "launch on friday"),
                                                                                     ("stray", "c")]


def test_with_no_worker_running_deletes_answer_200_pending_and_reads_see_them_once_caught_up(
    built: Any, redis_url: str
) -> None:
    services = built(redis_url=redis_url, write_wait_ms=50, read_wait_ms=50)
    alice = admin_of(services)
    kept = alice.save("kept").json["memory_id"]
    alice.save("gone")
    leave_a_backlog(services)

    by_name = alice.delete(f"{MEMORIES}/gone")
    by_id = alice.delete(f"{ADMIN_MEMORIES}/{kept}")

    assert (by_name.status_code, by_id.status_code) == (200, 200)
    assert by_name.headers["X-Projection-Pending"] == by_id.headers["X-Projection-Pending"] == "true"
    assert by_name.json == {"status": "ok", "name": "gone"}
    last = by_id.headers["X-Memory-Position"]
    assert alice.get(MEMORIES, query_string={"min_position": last}).status_code == 503

    services.projector.catch_up()

    assert names(alice.get(MEMORIES, query_string={"min_position": last})) == ["stray"]


def test_a_write_waits_for_a_worker_that_catches_up_within_the_bound(built: Any, redis_url: str) -> None:
    services = built(redis_url=redis_url, write_wait_ms=5_000)
    alice = admin_of(services)
    leave_a_backlog(services)
    stop = threading.Event()

    def worker() -> None:  # a stand-in worker: catch up whenever the log moves
        while not stop.wait(0.05):
            services.projector.catch_up()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        saved = alice.save("phoenix")
    finally:
        stop.set()
        thread.join()

    assert saved.status_code == 201
    assert "X-Projection-Pending" not in saved.headers  # projected by the worker within the bound
    assert names(alice.get(MEMORIES)) == ["phoenix", "stray"]  # a plain read, no token of position needed


def test_with_redis_unreachable_writes_are_projected_in_process_and_answer_without_waiting(built: Any) -> None:
    services = built(redis_url=DEAD_REDIS, write_wait_ms=60_000, read_wait_ms=50)  # a wait would show as pending
    alice = admin_of(services)
    atlas = alice.save("atlas").json["memory_id"]
    leave_a_backlog(services)  # the step cannot take the next write: it would have been the workers'

    saved = alice.save("phoenix")
    by_name = alice.delete(f"{MEMORIES}/phoenix")
    by_id = alice.delete(f"{ADMIN_MEMORIES}/{atlas}")
    kept = alice.save("kept")

    answers = [saved, by_name, by_id, kept]
    assert [answer.status_code for answer in answers] == [201, 200, 200, 201]
    assert all("X-Projection-Pending" not in answer.headers for answer in answers)
    assert [int(answer.headers["X-Memory-Position"]) for answer in answers] == positions_in_log(services)[2:]
    assert names(alice.get(MEMORIES, headers={"X-Min-Position": kept.headers["X-Memory-Position"]})) == [
        "kept", "stray"]


def test_an_admin_can_delete_by_id_a_memory_whose_save_is_still_pending(built: Any, redis_url: str) -> None:
    services = built(redis_url=redis_url, write_wait_ms=50, read_wait_ms=50)
    alice = admin_of(services)
    leave_a_backlog(services)
    saved = alice.save("phoenix")
    assert saved.headers["X-Projection-Pending"] == "true"

    deleted = alice.delete(f"{ADMIN_MEMORIES}/{saved.json['memory_id']}")

    assert deleted.status_code == 200
    services.projector.catch_up()
    assert names(alice.get(MEMORIES)) == ["stray"]
