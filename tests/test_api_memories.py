"""The public memory API over HTTP: what a client sees when it saves, lists, searches and deletes.

Rejections (the 400/403/404 tables) live in ``test_api_memories_validation.py``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest
from flask import Flask

from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from tests.helpers import Caller, MakeCaller, names

if TYPE_CHECKING:
    from tests.helpers import Caller, Cast

MEMORIES = "/v1/api/memories"
SEARCH = "/v1/api/memories/search"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
ROW_KEYS = {"memory_id", "name", "description", "type", "scope", "scope_id", "content",
            "created", "updated", "last_accessed", "access_count", "version"}



def search(caller: Caller, query: str, **fields: Any) -> Any:
    return caller.post(SEARCH, json={"query": query, **fields})


class SteppingClock:
    """Each write happens one second after the previous one."""

    def __init__(self) -> None:
        self.moment = dt.datetime(2026, 3, 10, 10, 0, 0)

    def __call__(self) -> str:
        self.moment += dt.timedelta(seconds=1)
        return self.moment.strftime("%Y-%m-%dT%H:%M:%S")


@pytest.fixture
def stepping_clock(services: Services) -> SteppingClock:
    clock = SteppingClock()
    services.bus.deps = replace(services.bus.deps, clock=clock)
    return clock


def freeze_time_and_ids(services: Services, ids: Iterable[str]) -> None:
    """Every write at the same second, with memory ids handed out in the given order."""
    services.bus.deps = replace(services.bus.deps, clock=lambda: "2026-03-10T10:00:00", new_id=iter(ids).__next__)


def uuid_ending(suffix: str) -> str:
    return "00000000-0000-4000-8000-" + suffix.rjust(12, "0")


# -- save: create and update --------------------------------------------------


def test_saving_a_new_memory_answers_201_with_the_full_row(alice: Caller) -> None:
    response = alice.save("deployment_process", content="Deploy via CI.", description="CI/CD workflow")

    assert response.status_code == 201
    row = response.json
    assert set(row) == ROW_KEYS
    assert (row["name"], row["content"], row["description"]) == ("deployment_process", "Deploy via CI.", "CI/CD workflow")
    assert (row["type"], row["scope"], row["scope_id"]) == ("general", "global", "")
    assert TIMESTAMP.match(row["created"])
    assert row["created"] == row["updated"] == row["last_accessed"]
    assert row["access_count"] == 0
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", row["memory_id"])


def test_saving_the_same_name_again_answers_200_and_keeps_the_id_and_creation_time(
    alice: Caller, stepping_clock: SteppingClock
) -> None:
    first = alice.save("notes", content="old", description="first take").json
    second = alice.save("notes", content="new", description="second take")

    assert second.status_code == 200
    assert second.json["memory_id"] == first["memory_id"]
    assert second.json["created"] == first["created"]
    assert second.json["updated"] > first["updated"]
    assert (second.json["content"], second.json["description"]) == ("new", "second take")
    listed = alice.get(MEMORIES).json
    assert listed["total"] == 1 and listed["memories"][0]["content"] == "new"


@pytest.mark.parametrize(("raw", "stored"), [
    ("My-Key Name", "my_key_name"),
    ("  padded name  ", "padded_name"),
    ("Weird!!Name/..", "weird!!name/.."),
])
def test_a_saved_name_is_stripped_lowercased_and_gets_underscores_for_hyphens_and_spaces(
    alice: Caller, raw: str, stored: str
) -> None:
    created = alice.save(raw)
    assert created.json["name"] == stored

    again = alice.save(stored)
    assert again.status_code == 200 and again.json["memory_id"] == created.json["memory_id"]


def test_content_and_description_are_stored_stripped_with_inner_whitespace_kept(alice: Caller) -> None:
    row = alice.save("padded", content="\n  line one\n\tline two  \n", description="  a   summary \t").json

    assert row["content"] == "line one\n\tline two"
    assert row["description"] == "a   summary"


def test_a_save_without_scope_goes_to_the_global_scope(alice: Caller) -> None:
    row = alice.save("anywhere").json
    assert (row["scope"], row["scope_id"]) == ("global", "")


def test_a_save_in_user_scope_without_scope_id_uses_the_callers_own_id(alice: Caller) -> None:
    row = alice.save("mine", scope="user").json
    assert (row["scope"], row["scope_id"]) == ("user", alice.user_id)


def test_the_same_name_in_two_scopes_is_two_memories(alice: Caller) -> None:
    shared = alice.save("same_name", content="for everyone")
    private = alice.save("same_name", content="for me", scope="user")

    assert shared.status_code == private.status_code == 201
    assert shared.json["memory_id"] != private.json["memory_id"]
    assert sorted(row["content"] for row in alice.get(MEMORIES).json["memories"]) == ["for everyone", "for me"]


@pytest.mark.parametrize("unset", [{}, {"type": None}], ids=["type absent", "type null"])
def test_an_unset_type_means_general_on_create_and_is_kept_on_update(alice: Caller, unset: dict[str, Any]) -> None:
    assert alice.save("created_untyped", **unset).json["type"] == "general"

    alice.save("lesson", type="feedback")
    updated = alice.save("lesson", content="revised", **unset)
    assert updated.status_code == 200
    assert updated.json["type"] == "feedback"


def test_an_explicit_type_overwrites_the_stored_one_and_is_read_case_insensitively(alice: Caller) -> None:
    alice.save("lesson", type="feedback")
    assert alice.save("lesson", type=" REFERENCE ").json["type"] == "reference"


# -- delete -------------------------------------------------------------------


def test_deleting_a_memory_answers_ok_with_its_name_and_removes_it(alice: Caller) -> None:
    alice.save("obsolete")
    alice.save("kept")

    response = alice.delete(f"{MEMORIES}/obsolete")

    assert (response.status_code, response.json) == (200, {"status": "ok", "name": "obsolete"})
    assert names(alice.get(MEMORIES)) == ["kept"]


def test_the_delete_path_name_is_normalized_like_a_saved_name(alice: Caller) -> None:
    alice.save("My-Key Name")

    response = alice.delete(f"{MEMORIES}/My-Key%20Name")

    assert (response.status_code, response.json) == (200, {"status": "ok", "name": "my_key_name"})
    assert alice.get(MEMORIES).json["total"] == 0


def test_a_name_containing_a_slash_can_be_deleted(alice: Caller) -> None:
    alice.save("docs/setup")
    assert alice.delete(f"{MEMORIES}/docs/setup").json == {"status": "ok", "name": "docs/setup"}


def test_deleting_a_missing_memory_answers_404_naming_the_normalized_name(alice: Caller) -> None:
    response = alice.delete(f"{MEMORIES}/Missing-Thing")
    assert (response.status_code, response.json) == (404, {"error": "Memory 'missing_thing' not found"})


def test_deleting_twice_answers_404_the_second_time(alice: Caller) -> None:
    alice.save("once")
    assert alice.delete(f"{MEMORIES}/once").status_code == 200
    assert alice.delete(f"{MEMORIES}/once").status_code == 404


def test_a_delete_without_scope_removes_only_the_global_memory(alice: Caller) -> None:
    alice.save("twin", content="global twin")
    alice.save("twin", content="user twin", scope="user")

    assert alice.delete(f"{MEMORIES}/twin").status_code == 200

    [left] = alice.get(MEMORIES).json["memories"]
    assert (left["scope"], left["content"]) == ("user", "user twin")


def test_a_delete_in_the_wrong_scope_is_404_and_in_the_right_scope_200(alice: Caller) -> None:
    alice.save("secret", scope="user")

    assert alice.delete(f"{MEMORIES}/secret").status_code == 404
    assert alice.delete(f"{MEMORIES}/secret", query_string={"scope": "user"}).status_code == 200
    assert alice.get(MEMORIES).json["total"] == 0


def test_a_delete_in_an_owned_workstream_removes_that_workstreams_memory(alice: Caller, services: Services) -> None:
    workstream = services.directory.create_workstream(alice.user_id, "mine")
    alice.save("plan", scope="workstream", scope_id=workstream)
    alice.save("plan")

    response = alice.delete(f"{MEMORIES}/plan", query_string={"scope": "workstream", "scope_id": workstream})

    assert response.status_code == 200
    assert [(row["name"], row["scope"]) for row in alice.get(MEMORIES).json["memories"]] == [("plan", "global")]


def test_saving_after_a_delete_creates_a_new_memory(alice: Caller) -> None:
    before = alice.save("phoenix").json
    alice.delete(f"{MEMORIES}/phoenix")

    after = alice.save("phoenix")

    assert after.status_code == 201
    assert after.json["memory_id"] != before["memory_id"]


def test_every_write_reports_a_larger_log_position_than_the_one_before(alice: Caller) -> None:
    responses = [alice.save("a"), alice.save("a", content="changed"), alice.save("b"), alice.delete(f"{MEMORIES}/a")]

    positions = [response.headers["X-Memory-Position"] for response in responses]

    assert all(position.isdigit() for position in positions), positions
    assert [int(p) for p in positions] == sorted({int(p) for p in positions})


# -- list ---------------------------------------------------------------------


def test_an_empty_list_has_no_memories_and_total_zero(alice: Caller) -> None:
    response = alice.get(MEMORIES)
    assert (response.status_code, response.json) == (200, {"memories": [], "total": 0, "next_after": None})


def test_listed_rows_have_exactly_the_documented_keys_and_timestamp_format(alice: Caller) -> None:
    alice.save("shape", type="reference")

    [row] = alice.get(MEMORIES).json["memories"]

    assert set(row) == ROW_KEYS
    assert all(TIMESTAMP.match(row[key]) for key in ("created", "updated", "last_accessed"))
    assert isinstance(row["access_count"], int)


def test_the_list_puts_the_most_recently_updated_first(alice: Caller, stepping_clock: SteppingClock) -> None:
    for name in ("first", "second", "third"):
        alice.save(name)
    alice.save("first", content="touched again")

    assert names(alice.get(MEMORIES)) == ["first", "third", "second"]


def test_memories_updated_in_the_same_second_are_listed_by_memory_id(alice: Caller, services: Services) -> None:
    freeze_time_and_ids(services, [uuid_ending("c"), uuid_ending("a"), uuid_ending("b")])
    for name in ("made_first", "made_second", "made_third"):
        alice.save(name)

    assert names(alice.get(MEMORIES)) == ["made_second", "made_third", "made_first"]


def test_the_list_filters_by_type(alice: Caller) -> None:
    alice.save("a_preference", type="user")
    alice.save("a_fact")

    assert names(alice.get(MEMORIES, query_string={"type": "user"})) == ["a_preference"]
    assert names(alice.get(MEMORIES, query_string={"type": "general"})) == ["a_fact"]


@pytest.mark.parametrize("spelling", ["FEEDBACK", " Feedback "])
def test_the_type_filter_is_case_and_whitespace_insensitive(alice: Caller, spelling: str) -> None:
    alice.save("lesson", content="lesson learned", type="feedback")
    alice.save("fact", content="lesson fact")

    assert names(alice.get(MEMORIES, query_string={"type": spelling})) == ["lesson"]
    assert names(search(alice, "lesson", type=spelling)) == ["lesson"]


def test_the_list_returns_at_most_100_memories_by_default(alice: Caller) -> None:
    for index in range(101):
        alice.save(f"bulk_{index}")

    listed = alice.get(MEMORIES).json

    assert len(listed["memories"]) == listed["total"] == 100


def test_total_counts_the_page_returned_not_every_match(alice: Caller) -> None:
    for name in ("a", "b", "c"):
        alice.save(name)

    listed = alice.get(MEMORIES, query_string={"limit": "2"}).json

    assert len(listed["memories"]) == listed["total"] == 2


# -- search -------------------------------------------------------------------


def test_search_ranks_a_memory_that_mentions_the_word_more_often_first(alice: Caller, stepping_clock: SteppingClock) -> None:
    alice.save("often", content="postgres postgres postgres tuning guide")
    alice.save("once", content="postgres appears once in this guide")

    assert names(search(alice, "postgres")) == ["often", "once"]


def test_search_ranks_a_memory_matching_a_rarer_word_first(alice: Caller, stepping_clock: SteppingClock) -> None:
    alice.save("cache", content="redis cache notes")
    for name in ("db_one", "db_two", "db_three"):
        alice.save(name, content="postgres notes")

    assert names(search(alice, "postgres redis"))[0] == "cache"


def test_search_breaks_relevance_ties_by_recency(alice: Caller, stepping_clock: SteppingClock) -> None:
    alice.save("tie_old", content="identical words here")
    alice.save("tie_new", content="identical words here")

    assert names(search(alice, "identical")) == ["tie_new", "tie_old"]


@pytest.mark.parametrize("field", ["name", "description", "content"])
def test_search_finds_a_word_in_any_of_name_description_and_content(alice: Caller, field: str) -> None:
    row = {"name": "plain", "description": "plain summary", "content": "plain text"}
    row[field] = {"name": "database_notes", "description": "about the database", "content": "the database layer"}[field]
    alice.save(row["name"], content=row["content"], description=row["description"])
    alice.save("unrelated", content="nothing to see", description="other summary")

    response = search(alice, "DATABASE")

    assert names(response) == [row["name"]]
    assert response.json["total"] == 1
    assert set(response.json["memories"][0]) == ROW_KEYS | {"score"}
    assert response.json["memories"][0]["score"] > 0


def test_a_query_sharing_no_word_with_any_memory_finds_nothing(alice: Caller) -> None:
    alice.save("present", content="alpha beta")
    assert search(alice, "gamma").json == {"memories": [], "total": 0}


def test_search_filters_by_type_and_scope(alice: Caller) -> None:
    alice.save("kind_general", content="kiwi")
    alice.save("kind_feedback", content="kiwi", type="feedback")
    alice.save("kind_private", content="kiwi", scope="user")

    assert names(search(alice, "kiwi", type="feedback")) == ["kind_feedback"]
    assert names(search(alice, "kiwi", scope="user")) == ["kind_private"]
    assert sorted(names(search(alice, "kiwi", scope="global"))) == ["kind_feedback", "kind_general"]


def test_search_returns_at_most_20_memories_by_default_and_total_is_that_page(alice: Caller) -> None:
    for index in range(21):
        alice.save(f"match_{index}", content="needle")

    default = search(alice, "needle").json
    assert len(default["memories"]) == default["total"] == 20
    assert search(alice, "needle", limit=5).json["total"] == 5


def test_listing_and_searching_through_the_api_leave_access_counters_alone(alice: Caller) -> None:
    saved = alice.save("untouched", content="counter").json
    alice.get(MEMORIES)
    search(alice, "counter")

    [row] = alice.get(MEMORIES).json["memories"]
    assert (row["access_count"], row["last_accessed"]) == (0, saved["last_accessed"])


# -- visibility ---------------------------------------------------------------


@pytest.fixture
def world(cast: Cast, services: Services) -> Cast:
    """The cast, with memories in every kind of namespace."""
    alice, bob, service = cast.alice, cast.bob, cast.service
    alice_ws, bob_ws = cast.alice_workstream, cast.bob_workstream
    for caller, name, scope in [(alice, "everyone", {}), (alice, "alice_own", {"scope": "user"}),
                                (bob, "bob_own", {"scope": "user"}), (service, "service_own", {"scope": "user"}),
                                (alice, "alice_ws", {"scope": "workstream", "scope_id": alice_ws}),
                                (bob, "bob_ws", {"scope": "workstream", "scope_id": bob_ws})]:
        assert caller.save(name, content="shared word", **scope).status_code == 201
    for name, namespace in [("alice_coordinator", Namespace("coordinator", alice.user_id)),
                            ("some_project", Namespace("project", "project-1"))]:
        command = SaveMemory(name=name, content="shared word", description="internal", type=None, namespace=namespace)
        services.bus.handle(command, EventMetadata(actor_user_id=alice.user_id, surface="tool"))
    return cast


Read = Callable[["Caller", dict[str, str]], Any]
READS: list[Any] = [
    pytest.param(lambda caller, scope: caller.get(MEMORIES, query_string=scope), id="list"),
    pytest.param(lambda caller, scope: search(caller, "shared", **scope), id="search"),
]


@pytest.mark.parametrize("read", READS)
def test_without_scope_a_caller_sees_global_and_their_own_user_memories_only(world: Cast, read: Read) -> None:
    assert sorted(names(read(world.alice, {}))) == ["alice_own", "everyone"]
    assert sorted(names(read(world.bob, {}))) == ["bob_own", "everyone"]


@pytest.mark.parametrize("read", READS)
def test_an_explicit_scope_shows_exactly_that_namespace(world: Cast, read: Read) -> None:
    alice, ws = world.alice, world.alice_workstream
    assert names(read(alice, {"scope": "global"})) == ["everyone"]
    assert names(read(alice, {"scope": "user"})) == ["alice_own"]
    assert names(read(alice, {"scope": "USER", "scope_id": alice.user_id})) == ["alice_own"]
    assert names(read(alice, {"scope": "workstream", "scope_id": ws})) == ["alice_ws"]


@pytest.mark.parametrize("read", READS)
def test_a_service_token_reads_any_workstream_but_only_its_own_user_scope(world: Cast, read: Read) -> None:
    assert names(read(world.service, {"scope": "workstream", "scope_id": world.bob_workstream})) == ["bob_ws"]
    assert names(read(world.service, {"scope": "user"})) == ["service_own"]


def test_a_service_token_writes_into_any_workstream(world: Cast) -> None:
    scope = {"scope": "workstream", "scope_id": world.bob_workstream}
    saved = world.service.save("from_service", **scope)
    assert (saved.status_code, saved.json["scope_id"]) == (201, world.bob_workstream)
    assert world.service.delete(f"{MEMORIES}/bob_ws", query_string=scope).status_code == 200
    assert names(world.bob.get(MEMORIES, query_string=scope)) == ["from_service"]


def test_a_memory_is_read_by_name_with_the_scope_rules_of_delete(make_caller: MakeCaller, services: Services) -> None:
    alice, bob = make_caller(), make_caller()
    assert alice.save("Deploy Steps", "we deploy with buildkite").status_code == 201
    assert alice.save("notes", "mine alone", scope="user").status_code == 201
    got = alice.get("/v1/api/memories/deploy-steps")
    assert got.status_code == 200 and got.json["name"] == "deploy_steps" and got.json["content"] == "we deploy with buildkite"
    assert alice.get("/v1/api/memories/notes?scope=user").json["content"] == "mine alone"
    assert alice.get("/v1/api/memories/notes").status_code == 404  # global by default, as delete
    assert bob.get("/v1/api/memories/notes?scope=user").status_code == 404  # bob's own user scope
    assert bob.get(f"/v1/api/memories/notes?scope=user&scope_id={alice.user_id}").status_code == 403
    assert alice.get("/v1/api/memories/x?scope=project").status_code == 400
    assert alice.get("/v1/api/memories/a%2Fb%20c").json == {"error": "Memory 'a/b_c' not found"}


def test_a_listed_memory_is_exactly_what_its_schema_dumps(alice: Caller, app: Flask) -> None:
    from api.answer_schemas import MemoryListSchema
    from api.responses import memory_list

    alice.save("deploy_steps", "run the migrations first")
    row = {**alice.get("/v1/api/memories/deploy_steps").json, "not_a_field": "left out"}
    with app.app_context():
        response, status = memory_list([row, row])
    assert status == 200 and response.json == MemoryListSchema().dump({"memories": [row, row], "total": 2})
