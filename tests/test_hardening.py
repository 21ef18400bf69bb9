"""Regression tests for the hostile-client findings: every bad input a clear 4xx, through HTTP.

Each test names the defect of the hardening issue it proves fixed. The
poisoned-projection defence (defect 1, second half) is in
``test_projection_faults.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from api.app import create_app
from api.idempotency import _fingerprint
from events.idempotency import LEASE
from events.types import EventMetadata, MemorySaved, memory_stream_id
from memoryd.app.services import Services
from memoryd.kernel.domain import Memory, utc_timestamp
from memoryd.storage.schema import events, idempotency_keys, projects, sessions, workstreams
from tests.helpers import Caller, MakeCaller, caller_factory

MEMORIES = "/v1/api/memories"
SEARCH = "/v1/api/memories/search"
SURROGATE, NUL = "abc \ud800 def", "abc \x00 def"
SURROGATE_MESSAGE = "is not valid Unicode text: it contains a lone surrogate (U+D800)"
NUL_MESSAGE = "contains a NUL character (U+0000)"
# any code point, lone surrogates included (hypothesis leaves them out by default), and the awkward ones often
CHARACTERS = st.one_of(st.characters(exclude_categories=()), st.sampled_from("\x00\ud800\udfff\n\t\x1b\x85 -"))


def event_count(services: Services) -> int:
    with services.database.read() as conn:
        return int(conn.execute(select(func.count()).select_from(events)).scalar_one())


def raw_json(caller: Caller, method: str, path: str, body: str, **kwargs: Any) -> Any:
    """Send ``body`` as written: ``json=`` would refuse to encode a lone surrogate."""
    return caller.request(method, path, data=body.encode(), content_type="application/json", **kwargs)


def error_of(response: Any, status: int) -> str:
    assert response.status_code == status, response.get_data(as_text=True)
    assert list(response.json) == ["error"]
    return str(response.json["error"])


# -- 1, 2: text that cannot be stored -------------------------------------------------------


@pytest.mark.parametrize("field", ["name", "content", "description", "type", "scope", "scope_id"])
@pytest.mark.parametrize(("bad", "message"), [(SURROGATE, SURROGATE_MESSAGE), (NUL, NUL_MESSAGE)],
                         ids=["surrogate", "nul"])
def test_unstorable_text_in_any_save_field_is_a_400_naming_it_on_both_backends(
        any_make_caller: MakeCaller, any_services: Services, field: str, bad: str, message: str) -> None:
    alice = any_make_caller()
    body = {"name": "note", "content": "c", "description": "d", "type": "general", "scope": "global", "scope_id": ""}
    body[field] = bad

    response = raw_json(alice, "POST", MEMORIES, json.dumps(body))

    assert error_of(response, 400) == f"{field} {message}"
    assert event_count(any_services) == 0
    assert alice.save("after", "still works").status_code == 201
    assert any_services.projector.faults() == []


@pytest.mark.parametrize("field", ["name", "type", "scope_id"])
@pytest.mark.parametrize("control", ["\n", "\x1b", "\x85"], ids=["newline", "escape", "c1-next-line"])
def test_names_scope_ids_and_types_refuse_control_characters(alice: Caller, services: Services, field: str,
                                                              control: str) -> None:
    body = {"name": "note", "content": "c", "description": "d", "scope": "user", field: f"a{control}b"}

    response = alice.post(MEMORIES, json=body)

    assert error_of(response, 400) == f"{field} contains a control character (U+{ord(control):04X})"
    assert event_count(services) == 0


def test_content_and_description_keep_tabs_and_newlines(alice: Caller) -> None:
    response = alice.save("multiline", "line one\n\tline two", "first\nsecond")
    assert response.status_code == 201
    assert (response.json["content"], response.json["description"]) == ("line one\n\tline two", "first\nsecond")


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", SEARCH, {"query": SURROGATE}),
    ("POST", "/v1/api/admin/projects", {"name": SURROGATE, "owner": "x"}),
    ("POST", "/v1/api/admin/workstreams", {"name": NUL, "owner": "x"}),
    ("POST", "/v1/api/sessions", {"kind": "interactive", "workstream_id": NUL}),
    ("POST", "/v1/api/sessions", {"kind": "interactive", "workstream_id": "w", "user_id": SURROGATE}),
    ("POST", SEARCH, {"query": "x", SURROGATE: 1}),
], ids=["search query", "project name", "workstream name", "session workstream", "session user", "a key"])
def test_unstorable_text_anywhere_in_a_json_body_is_a_400(admin: Caller, method: str, path: str,
                                                          body: dict[str, Any]) -> None:
    message = error_of(raw_json(admin, method, path, json.dumps(body)), 400)
    assert SURROGATE_MESSAGE in message or NUL_MESSAGE in message


@pytest.mark.parametrize("url", [
    f"{MEMORIES}?scope_id=%00", f"{MEMORIES}/a%00b", "/v1/api/admin/memories/%00", "/v1/api/admin/audit?actor=%00",
    "/v1/api/admin/projects/%00",
])
def test_nul_in_a_path_or_query_is_a_400_on_both_backends(any_make_caller: MakeCaller, url: str) -> None:
    admin = any_make_caller("read,write", ("admin.memories",))
    method = "DELETE" if url.startswith(f"{MEMORIES}/") else "GET"
    assert NUL_MESSAGE in error_of(admin.request(method, url), 400)


def test_the_memory_tool_answers_ok_false_for_unstorable_text(admin: Caller, services: Services) -> None:
    user = services.directory.create_user("u")
    workstream = services.directory.create_workstream(user, "w")
    session, token = services.sessions.create("interactive", workstream, user)
    body = json.dumps({"action": "save", "name": "n", "content": SURROGATE, "description": "d"})

    response = admin.client.post(f"/v1/api/sessions/{session.session_id}/memory", data=body.encode(),
                                 content_type="application/json", headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 200
    answer: Any = response.json
    assert answer["ok"] is False
    assert answer["error"] == f"'content' {SURROGATE_MESSAGE}"
    assert event_count(services) == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(CHARACTERS, max_size=40), content=st.text(CHARACTERS, min_size=1, max_size=80),
       description=st.text(CHARACTERS, min_size=1, max_size=40))
def test_any_text_is_either_a_400_or_a_memory_that_projects(alice: Caller, services: Services, name: str,
                                                             content: str, description: str) -> None:
    before = event_count(services)
    body = json.dumps({"name": name, "content": content, "description": description})

    response = raw_json(alice, "POST", MEMORIES, body)

    if response.status_code == 400:
        assert list(response.json) == ["error"]
        assert event_count(services) == before
        return
    assert response.status_code in (200, 201), response.json
    assert "X-Projection-Pending" not in response.headers
    listed = alice.get(MEMORIES, query_string={"limit": 200}).json["memories"]
    stored = next(row for row in listed if row["memory_id"] == response.json["memory_id"])
    assert (stored["content"], stored["description"]) == (content.strip(), description.strip())
    assert services.projector.faults() == []


# -- 3: nesting ---------------------------------------------------------------------------


DEEP = "[" * 1000 + "]" * 1000


@pytest.mark.parametrize(("method", "path"), [
    ("POST", MEMORIES), ("POST", SEARCH), ("POST", "/v1/api/admin/projects"), ("POST", "/v1/api/admin/workstreams"),
    ("POST", "/v1/api/sessions"), ("PATCH", "/v1/api/admin/workstreams/w"),
    ("PUT", "/v1/api/admin/projects/p/members/u"),
])
def test_deeply_nested_json_is_a_400_on_every_json_route(admin: Caller, method: str, path: str) -> None:
    assert error_of(raw_json(admin, method, path, DEEP), 400) == "Invalid JSON body: nested more than 32 levels deep"


@pytest.mark.parametrize("path", [f"{MEMORIES}/note", "/v1/api/admin/memories/some-id"])
def test_deeply_nested_json_with_an_idempotency_key_is_a_400_on_delete(admin: Caller, path: str) -> None:
    response = raw_json(admin, "DELETE", path, DEEP, headers={"Idempotency-Key": "deep"})
    assert error_of(response, 400) == "Invalid JSON body: nested more than 32 levels deep"


def test_brackets_inside_strings_do_not_count_as_nesting(alice: Caller) -> None:
    assert alice.save("brackets", "[" * 500 + "{" * 500).status_code == 201


# -- 4, 6: whole numbers ---------------------------------------------------------------------


HUGE = "9" * 5000


@pytest.mark.parametrize(("method", "path", "where"), [
    ("GET", MEMORIES, "limit"), ("POST", SEARCH, "limit"), ("GET", "/v1/api/admin/memories", "limit"),
    ("GET", "/v1/api/admin/memories/search", "limit"), ("GET", "/v1/api/admin/audit", "limit"),
    ("GET", "/v1/api/admin/audit", "after"),
])
@pytest.mark.parametrize("value", [HUGE, "-" + HUGE, "²", "٣"], ids=["5000 digits", "-5000 digits", "superscript", "arabic"])
def test_numbers_that_are_not_64_bit_ascii_integers_are_a_400(admin: Caller, method: str, path: str, where: str,
                                                              value: str) -> None:
    if method == "POST":
        response = admin.post(path, json={"query": "x", where: value})
    else:
        response = admin.get(path, query_string={where: value, "q": "x"})
    assert error_of(response, 400) == f"{where} must be an integer"


def _tool(services: Services, admin: Caller) -> Any:
    user = services.directory.create_user("u")
    session, token = services.sessions.create("interactive", services.directory.create_workstream(user, "w"), user)

    def call(**arguments: Any) -> dict[str, Any]:
        response = admin.client.post(f"/v1/api/sessions/{session.session_id}/memory", json=arguments,
                                     headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200
        answer: dict[str, Any] = response.get_json()
        return answer

    return call


@pytest.mark.parametrize("action", ["list", "search"])
@pytest.mark.parametrize("limit", ["--5", "²", "⑤", HUGE, 1.5, True, [3]])
def test_a_tool_limit_that_is_not_a_whole_number_is_ok_false(admin: Caller, services: Services, action: str,
                                                             limit: Any) -> None:
    result = _tool(services, admin)(action=action, query="x", limit=limit)
    assert result == {"ok": False, "error": "'limit' must be a whole number such as 10 (default 20, at most 50)",
                      "text": "Error: 'limit' must be a whole number such as 10 (default 20, at most 50)"}


# -- 5: the admin type filter ----------------------------------------------------------------


def test_the_admin_type_filter_is_case_insensitive_and_an_unknown_type_is_empty(admin: Caller) -> None:
    admin.save("guide", "style guide", type="feedback")
    for path, extra in (("/v1/api/admin/memories", {}), ("/v1/api/admin/memories/search", {"q": "style"})):
        found = admin.get(path, query_string={"type": " FEEDBACK ", **extra})
        assert found.status_code == 200 and [m["name"] for m in found.json["memories"]] == ["guide"]
        unknown = admin.get(path, query_string={"type": "GENERALS", **extra})
        assert (unknown.status_code, unknown.json["memories"]) == (200, [])
    assert admin.get("/v1/api/admin/memories", query_string={"type": "GENERAL"}).json["total"] == 0
    assert admin.get("/v1/api/admin/memories", query_string={"type": "Feedback"}).json["total"] == 1


# -- 7, 9: idempotency keys --------------------------------------------------------------------


def test_eight_concurrent_deletes_with_one_key_all_get_the_same_200(any_make_caller: MakeCaller,
                                                                     any_services: Services) -> None:
    alice = any_make_caller()
    alice.save("doomed")
    start = threading.Barrier(8)
    answers: list[Any] = [None] * 8

    def send(index: int) -> None:
        client = alice.client.application.test_client()
        start.wait()
        answers[index] = client.delete(f"{MEMORIES}/doomed", headers={"Authorization": f"Bearer {alice.token}",
                                                                     "Idempotency-Key": "once"})

    threads = [threading.Thread(target=send, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [(answer.status_code, answer.json) for answer in answers] == [(200, {"status": "ok", "name": "doomed"})] * 8
    assert event_count(any_services) == 2


def _count(services: Services, table: Any) -> int:
    with services.database.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_a_retried_create_with_its_key_creates_one_project_workstream_and_session(admin: Caller,
                                                                                  services: Services) -> None:
    project = [admin.post("/v1/api/admin/projects", json={"name": "p", "owner": admin.user_id},
                          headers={"Idempotency-Key": "project"}) for _ in range(2)]
    workstream = [admin.post("/v1/api/admin/workstreams", json={"owner": admin.user_id},
                             headers={"Idempotency-Key": "workstream"}) for _ in range(2)]
    session = [admin.post("/v1/api/sessions", headers={"Idempotency-Key": "session"}, json={
        "kind": "interactive", "workstream_id": workstream[0].json["workstream_id"]}) for _ in range(2)]

    assert project[0].status_code == 201 and project[1].json == project[0].json
    assert workstream[0].status_code == 201 and workstream[1].json == workstream[0].json
    assert session[0].status_code == 201 and session[1].json == session[0].json
    assert all(answers[1].headers["Idempotent-Replayed"] == "true" for answers in (project, workstream, session))
    assert (_count(services, projects), _count(services, workstreams), _count(services, sessions)) == (1, 1, 1)


@pytest.mark.parametrize("route", ["workstream", "session"])
def test_a_create_whose_answer_was_lost_replays_it_and_creates_nothing_more(
        admin: Caller, services: Services, monkeypatch: pytest.MonkeyPatch, route: str) -> None:
    workstream_id = services.directory.create_workstream(admin.user_id, "w")
    path, body = {"workstream": ("/v1/api/admin/workstreams", {"owner": admin.user_id}),
                  "session": ("/v1/api/sessions", {"kind": "interactive", "workstream_id": workstream_id})}[route]

    def connection_lost(*args: Any) -> None:
        raise ConnectionError("the connection dropped after the commit")

    monkeypatch.setattr(services.idempotency, "remember", connection_lost)
    lost = admin.post(path, json=body, headers={"Idempotency-Key": "lost"})
    monkeypatch.undo()
    retry = admin.post(path, json=body, headers={"Idempotency-Key": "lost"})

    assert lost.status_code == 500
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert (_count(services, workstreams), _count(services, sessions)) == ((2, 0) if route == "workstream" else (1, 1))
    created = retry.json["workstream_id"] if route == "workstream" else retry.json["session_id"]
    found = services.directory.workstream(created) if route == "workstream" else services.sessions.get(created)
    assert found is not None
    if route == "session":
        assert services.sessions.by_token(retry.json["token"]) == found


def test_a_failed_request_gives_its_key_back(admin: Caller, services: Services) -> None:
    keyed = {"Idempotency-Key": "retry-me"}
    missing = admin.delete(f"{MEMORIES}/later", headers=keyed)
    assert missing.status_code == 404
    admin.save("later")
    assert admin.delete(f"{MEMORIES}/later", headers=keyed).status_code == 200
    with services.database.read() as conn:
        assert conn.execute(select(idempotency_keys.c.status)).scalars().all() == [200]


def test_a_claim_whose_lease_ran_out_is_taken_over(alice: Caller, services: Services) -> None:
    body = {"name": "n", "content": "c", "description": "d"}
    with alice.client.application.test_request_context(MEMORIES, method="POST", json=body):
        fingerprint = _fingerprint()
    claimed = utc_timestamp(dt.datetime.now(dt.UTC) - LEASE - dt.timedelta(seconds=1))
    with services.database.write() as conn:  # an attempt that claimed the key and died before appending
        conn.execute(idempotency_keys.insert().values(user_id=alice.user_id, key="orphan", fingerprint=fingerprint,
                                                      position=None, created=claimed, attempt="dead"))

    taken = alice.post(MEMORIES, json=body, headers={"Idempotency-Key": "orphan"})
    replayed = alice.post(MEMORIES, json=body, headers={"Idempotency-Key": "orphan"})

    assert taken.status_code == 201 and "Idempotent-Replayed" not in taken.headers
    assert (replayed.status_code, replayed.json) == (201, taken.json)
    assert event_count(services) == 1


# -- 8: waiting reads ---------------------------------------------------------------------------


def test_a_position_beyond_the_head_is_a_400_at_once(alice: Caller) -> None:
    head = int(alice.save("a").headers["X-Memory-Position"])
    response = alice.get(MEMORIES, headers={"X-Min-Position": str(head + 10**12)})
    assert f"beyond the head of the log ({head})" in error_of(response, 400)


def test_waiting_reads_never_take_more_than_half_the_threads(built: Any) -> None:
    services = built(threads=2, read_wait_ms=30_000)
    app = create_app(services)
    alice = caller_factory(app, services)()
    unprojected = Memory("m-1", "a", "d", "general", "global", "", "c", "2026-01-01T00:00:00", "2026-01-01T00:00:00")
    position = services.store.append(memory_stream_id("a", "global", ""), 0, [MemorySaved(unprojected)],
                                     EventMetadata())
    waiting = threading.Thread(target=alice.get, args=(MEMORIES,), kwargs={"headers": {"X-Min-Position": str(position)}})
    waiting.start()
    waiters = app.extensions["memoryd.waiters"]
    while waiters._value:  # observed: the first read holds the only waiting slot
        waiting.join(0.01)

    refused = alice.get(MEMORIES, headers={"X-Min-Position": str(position)})
    health = app.test_client().get("/healthz")
    services.projector.catch_up()  # lets the first read through
    waiting.join()

    assert "too many requests are waiting already" in error_of(refused, 503)
    assert health.status_code == 200


# -- 10, 11: names -----------------------------------------------------------------------------


def test_a_padded_name_saved_is_deleted_by_the_same_spelling(alice: Caller) -> None:
    assert alice.save(" Padded Name ").json["name"] == "padded_name"
    assert alice.delete(f"{MEMORIES}/%20Padded%20Name%20").status_code == 200


def test_a_name_with_a_newline_is_refused_at_save_and_at_delete_as_a_400(alice: Caller) -> None:
    assert error_of(alice.save("a\nb"), 400) == "name contains a control character (U+000A)"
    assert error_of(alice.delete(f"{MEMORIES}/a%0Ab"), 400) == "name contains a control character (U+000A)"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(CHARACTERS, min_size=1, max_size=30).filter(lambda name: "/" not in name))
def test_every_name_that_can_be_saved_can_be_deleted_by_name(alice: Caller, name: str) -> None:
    saved = raw_json(alice, "POST", MEMORIES, json.dumps({"name": name, "content": "c", "description": "d"}))
    if saved.status_code == 400:
        return
    deleted = alice.delete(f"{MEMORIES}/{quote(name, safe='')}")
    assert (deleted.status_code, deleted.json) == (200, {"status": "ok", "name": saved.json["name"]})


# -- 12: the tool's argument types ----------------------------------------------------------------


@pytest.mark.parametrize(("argument", "value"), [
    ("query", -1), ("query", True), ("query", ["deploy"]), ("query", {"a": 1}),
    ("type", 0), ("type", False), ("type", []), ("type", {}), ("scope", 1), ("name", 5), ("action", ["list"]),
])
def test_a_tool_argument_of_the_wrong_json_type_is_ok_false_naming_it(admin: Caller, services: Services,
                                                                      argument: str, value: Any) -> None:
    arguments = {"action": "search", "query": "deploy", argument: value}
    result = _tool(services, admin)(**arguments)
    assert result["ok"] is False
    assert result["error"] == f"'{argument}' must be a string (got {type(value).__name__})"


# -- 13: request ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(("supplied", "kept"), [
    ("req-42.a:b_c", True), ("has space", False), ("x" * 129, False), ("tab\there", False), ("<script>", False),
])
def test_a_client_request_id_is_kept_only_in_token_form(admin: Caller, supplied: str, kept: bool) -> None:
    response = admin.post(MEMORIES, json={"name": "traced", "content": "c", "description": "d"},
                          headers={"X-Request-Id": supplied})
    recorded = admin.get("/v1/api/admin/audit").json["records"][-1]["request_id"]
    assert response.headers["X-Request-Id"] == recorded
    assert (recorded == supplied) is kept
    if not kept:
        assert len(recorded) == 32 and recorded.isalnum()


# -- 14: the OpenAPI document --------------------------------------------------------------------


def test_every_operation_documents_the_errors_the_routes_give(alice: Caller) -> None:
    document: Any = alice.client.get("/v1/api/openapi.json").json
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert {"400", "401", "404", "405", "409", "413", "500", "503"} <= set(operation["responses"]), (method, path)
