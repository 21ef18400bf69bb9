"""What the console needed from the API, and how its page is served: an admin's edit by id, the hash chain
verified in pages, an erasure's preview, the audit trail from a time, the ``console`` surface, and the
static files under a strict policy."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import delete, update

from events.chain import GENESIS
from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.storage.schema import event_head, events
from tests.helpers import Caller, MakeCaller, World

ADMIN = "/v1/api/admin/memories"
CHAIN = "/v1/api/admin/audit/chain"


def _walk(caller: Caller, limit: int) -> tuple[list[Any], Any]:
    """The chain walked in pages as the console walks it: every page, and the last one's answer."""
    after, digest, pages = 0, "", []
    while True:
        response = caller.get(CHAIN, query_string={"after": after, "hash": digest, "limit": limit})
        assert response.status_code == 200, response.json
        pages.append(response.json)
        if response.json["complete"] or response.json["broken"]:
            return pages, response.json
        after, digest = response.json["reached"]["position"], response.json["reached"]["hash"]


# -- editing a memory by id --------------------------------------------------------------------------------


def test_an_admin_edits_a_users_memory_at_its_version_and_a_stale_edit_changes_nothing(make_caller: MakeCaller,
                                                                                        admin: Caller) -> None:
    owner = make_caller()
    saved = owner.save("home", "Ghent", "where I live", scope="user").json
    edited = admin.request("PATCH", f"{ADMIN}/{saved['memory_id']}", json={"content": "Antwerp"},
                           headers={"If-Match": '"1"'})
    assert edited.status_code == 200 and edited.headers["ETag"] == '"2"'
    assert (edited.json["content"], edited.json["description"], edited.json["scope_id"]) == \
        ("Antwerp", "where I live", owner.user_id)
    stale = admin.request("PATCH", f"{ADMIN}/{saved['memory_id']}", json={"content": "Lier"},
                          headers={"If-Match": '"1"'})
    assert stale.status_code == 412 and stale.json["current_version"] == 2
    assert owner.get("/v1/api/memories/home?scope=user").json["content"] == "Antwerp"


def test_an_edit_without_if_match_never_revives_a_deleted_memory(admin: Caller) -> None:
    saved = admin.save("short_lived", "here").json
    assert admin.delete(f"{ADMIN}/{saved['memory_id']}").status_code == 200
    assert admin.request("PATCH", f"{ADMIN}/{saved['memory_id']}", json={"content": "back"}).status_code == 404
    assert admin.get(f"{ADMIN}?limit=10").json["total"] == 0


@pytest.mark.parametrize(("body", "message"), [({"description": "  "}, "description"),
                                               ({"type": "nonsense"}, "type"), ({"content": 3}, "content")])
def test_a_bad_edit_is_a_400_naming_the_field_and_changes_nothing(admin: Caller, body: dict[str, Any],
                                                                  message: str) -> None:
    saved = admin.save("steady", "as it was").json
    response = admin.request("PATCH", f"{ADMIN}/{saved['memory_id']}", json=body)
    assert response.status_code == 400 and message in response.json["error"]
    assert admin.get(f"{ADMIN}/{saved['memory_id']}").json["version"] == 1


def test_an_edit_needs_an_admin_who_can_write(make_caller: MakeCaller, admin: Caller) -> None:
    saved = admin.save("guarded", "x").json
    reader = make_caller("read", ("admin.memories",))
    assert reader.request("PATCH", f"{ADMIN}/{saved['memory_id']}", json={"content": "y"}).status_code == 403
    assert make_caller().request("PATCH", f"{ADMIN}/{saved['memory_id']}", json={"content": "y"}).status_code == 403


def test_the_admin_list_pages_by_offset_through_every_memory_once(admin: Caller) -> None:
    for n in range(7):
        admin.save(f"note_{n}", f"content {n}")
    pages = [admin.get(ADMIN, query_string={"limit": 3, "offset": offset}).json for offset in (0, 3, 6, 9)]
    assert [page["total"] for page in pages] == [7, 7, 7, 7]
    whole = admin.get(ADMIN, query_string={"limit": 100}).json["memories"]
    assert [memory for page in pages for memory in page["memories"]] == whole  # in the list's order, each once
    assert sorted(memory["name"] for memory in whole) == [f"note_{n}" for n in range(7)]
    then = admin.get(ADMIN, query_string={"limit": 100, "as_of": 7}).json["memories"]
    assert admin.get(ADMIN, query_string={"limit": 2, "offset": 1, "as_of": 7}).json["memories"] == then[1:3]
    bad = admin.get(ADMIN, query_string={"offset": 10_001})
    assert bad.status_code == 400 and "offset must be between 0 and 10000" in bad.json["error"]


# -- the chain in pages --------------------------------------------------------------------------------------


def _tamper(services: Services, how: str, positions: list[int]) -> None:
    with services.database.write() as conn:
        if how == "changed payload":
            conn.execute(update(events).where(events.c.position == positions[3]).values(payload={"forged": True}))
        elif how == "deleted middle":
            conn.execute(delete(events).where(events.c.position == positions[2]))
        elif how == "deleted newest":
            conn.execute(delete(events).where(events.c.position == positions[-1]))
        elif how == "head moved back":
            conn.execute(update(event_head).values(position=positions[4]))


@pytest.mark.parametrize("how", ["untouched", "changed payload", "deleted middle", "deleted newest",
                                 "head moved back"])
@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_the_chain_walked_in_pages_finds_what_one_walk_finds(any_make_caller: MakeCaller, any_services: Services,
                                                             how: str, limit: int) -> None:
    admin = any_make_caller("read", ("admin.memories",))
    writer, positions = any_make_caller(), []
    for n in range(7):
        writer.save(f"note_{n}", f"content {n}")
        positions.append(any_services.store.head_position())
    _tamper(any_services, how, positions)
    whole = verify_chain(any_services.store)
    pages, last = _walk(admin, limit)
    assert sum(page["events"] for page in pages) == whole.events
    if whole.ok:
        assert last["complete"] and last["broken"] is None
        assert last["reached"] == {"position": whole.head.position, "hash": whole.head.hash} == last["head"]
    else:
        assert whole.broken is not None and not last["complete"]
        assert last["broken"]["position"] == whole.broken.position


def test_a_page_resumed_from_a_hash_the_log_no_longer_holds_is_a_break(admin: Caller, services: Services) -> None:
    for n in range(3):
        admin.save(f"note_{n}", "x")
    first = admin.get(CHAIN, query_string={"limit": 2}).json
    assert first["reached"]["position"] == 2 and not first["complete"]
    forged = admin.get(CHAIN, query_string={"after": 2, "hash": "f" * 64}).json
    assert forged["broken"] == {"position": 2, "reason": "the hash here is not the one the walk reached: "
                                                        "the log was rewritten meanwhile"}
    assert not forged["complete"] and forged["events"] == 0


@pytest.mark.parametrize(("query", "message"), [({"after": 2}, "hash is required after position 0"),
                                                ({"after": 2, "hash": "xyz"}, "hash is required after position 0"),
                                                ({"limit": 0}, "limit must be between 1 and 5000"),
                                                ({"after": -1}, "after must be a log position")])
def test_a_bad_chain_page_request_is_a_400(admin: Caller, query: dict[str, Any], message: str) -> None:
    response = admin.get(CHAIN, query_string=query)
    assert response.status_code == 400 and message in response.json["error"]


def test_an_empty_log_verifies_at_position_zero(admin: Caller) -> None:
    page = admin.get(CHAIN).json
    assert page["complete"] and page["reached"] == page["head"] == {"position": 0, "hash": GENESIS}


# -- erasure preview, the audit trail from a time ------------------------------------------------------------


def test_a_preview_names_what_an_erasure_would_take_and_changes_nothing(make_caller: MakeCaller, admin: Caller,
                                                                        services: Services) -> None:
    dana = make_caller()
    home = dana.save("home_town", "Ghent", "where Dana lives", scope="user").json
    shared = dana.save("team_lunch", "Fridays").json  # global, but Dana wrote it
    admin.save("unrelated", "stays")
    dana.delete("/v1/api/memories/team_lunch")
    head = services.store.head_position()
    preview = admin.get("/v1/api/admin/erasures/preview", query_string={"user_id": dana.user_id})
    assert preview.status_code == 200
    assert {(memory["memory_id"], memory["name"]) for memory in preview.json["memories"]} == \
        {(home["memory_id"], "home_town"), (shared["memory_id"], "team_lunch")}  # a deleted one too
    assert len(preview.json["positions"]) == 3
    assert services.store.head_position() == head
    erased = admin.post("/v1/api/admin/erasures", json={"user_id": dana.user_id, "reason": "r-1"}).json
    assert sorted(erased["positions"]) == preview.json["positions"]
    after = admin.get("/v1/api/admin/erasures/preview", query_string={"user_id": dana.user_id}).json
    assert after["memories"] == [] and after["positions"] == []


def test_a_preview_without_a_selector_is_a_400(admin: Caller) -> None:
    response = admin.get("/v1/api/admin/erasures/preview", query_string={"scope": "user"})
    assert response.status_code == 400 and "scope_id" in response.json["error"]


def test_the_audit_trail_from_a_time_starts_after_it(admin: Caller, services: Services) -> None:
    admin.save("before", "x")
    moment = services.store.event_at(services.store.head_position())
    assert moment is not None
    admin.save("after", "y")
    records = admin.get("/v1/api/admin/audit", query_string={"since": moment.recorded_at}).json["records"]
    assert [record["name"] for record in records] == ["after"]
    bad = admin.get("/v1/api/admin/audit", query_string={"since": "yesterday"})
    assert bad.status_code == 400 and "since must be an ISO 8601 time" in bad.json["error"]


def test_the_turns_that_showed_a_memory_are_found_from_it(world: World, admin: Caller) -> None:
    shown = admin.save("deploy_steps", "We deploy with make ship.", "how we deploy").json
    unseen = admin.save("lunch", "Pizza on Fridays.", "lunch").json
    agent = world.session(world.workstream(world.owner), world.owner)
    first = agent.turn("how do we deploy with make ship?", turn_id="t-1")
    agent.turn("and deploy again?", turn_id="t-2")
    assert [item["memory_id"] for item in first["items"]] == [shown["memory_id"]]
    found = admin.get(f"{ADMIN}/{shown['memory_id']}/turns").json["receipts"]
    assert [(receipt["session_id"], receipt["turn_id"]) for receipt in found] == \
        [(agent.session_id, "t-2"), (agent.session_id, "t-1")]  # newest first
    assert found[1]["block_matches"] is True
    assert admin.get(f"{ADMIN}/{unseen['memory_id']}/turns", query_string={"limit": 5}).json["receipts"] == []
    assert admin.get(f"{ADMIN}/{shown['memory_id']}/turns", query_string={"limit": 1}).json["receipts"][0][
        "turn_id"] == "t-2"


@pytest.mark.parametrize("memory_id", ["%", "_", "' OR 1=1 --"])
def test_a_memory_id_that_is_a_pattern_matches_no_turn(world: World, admin: Caller, memory_id: str) -> None:
    admin.save("deploy_steps", "We deploy with make ship.")
    world.session(world.workstream(world.owner), world.owner).turn("how do we deploy with make ship?")
    assert admin.get(f"{ADMIN}/{memory_id}/turns").json["receipts"] == []


# -- the console surface ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "surface"), [("console", "console"), (" Console ", "console"),
                                                  ("cli", "rest"), ("tool", "rest"), ("", "rest")])
def test_the_console_header_relabels_a_rest_write_and_nothing_else(admin: Caller, header: str, surface: str) -> None:
    saved = admin.post("/v1/api/memories", json={"name": "labelled", "content": "x", "description": "d"},
                       headers={"X-Memoryd-Surface": header}).json
    history = admin.get(f"{ADMIN}/{saved['memory_id']}/history").json["versions"]
    assert (history[-1]["surface"], history[-1]["actor"]) == (surface, admin.user_id)


def test_an_admin_write_from_the_console_is_recorded_as_the_console(admin: Caller) -> None:
    saved = admin.save("edited_here", "x").json
    admin.request("PATCH", f"{ADMIN}/{saved['memory_id']}", json={"content": "y"},
                  headers={"X-Memoryd-Surface": "console"})
    records = admin.get("/v1/api/admin/audit", query_string={"memory_id": saved["memory_id"]}).json["records"]
    assert [(record["action"], record["surface"]) for record in records] == \
        [("memory.save", "rest"), ("memory.update", "console")]


# -- the page itself --------------------------------------------------------------------------------------------


def test_the_console_is_served_with_a_strict_policy_and_revalidated(admin: Caller) -> None:
    client = admin.client
    assert client.get("/console").status_code == 308
    with client.get("/console/") as page:
        assert page.status_code == 200 and page.mimetype == "text/html"
        policy = page.headers["Content-Security-Policy"]
        scripts = re.findall(rb"<script[^>]*>(.*?)</script>", page.data, re.S)
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe" not in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff" and page.headers["Cache-Control"] == "no-cache"
    assert scripts and all(body.strip() == b"" for body in scripts)  # no inline script: files only
    with client.get("/console/app.js") as script:
        assert script.status_code == 200 and script.mimetype in ("text/javascript", "application/javascript")
    with client.get("/console/app.js", headers={"If-None-Match": script.headers["ETag"]}) as again:
        assert again.status_code == 304


@pytest.mark.parametrize("path", ["/console/../app.py", "/console/%2e%2e/app.py", "/console/missing.js",
                                  "/console/..%2fconsole.py"])
def test_nothing_outside_the_consoles_files_is_served(admin: Caller, path: str) -> None:
    with admin.client.get(path) as response:
        assert response.status_code == 404 and b"def " not in response.data
