"""The web console, driven in a real browser (Chromium through Playwright) against a live ``memoryd serve``.

Each test signs in as an operator would and checks what they would see; the data comes through the API.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers import LiveServer, a_memory, chromium, http_call, make_services, plant, serving

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ADMIN = "/v1/api/admin"


def call(server: LiveServer, method: str, path: str, body: Any = None, token: str | None = None,
         **headers: str) -> Any:
    status, answer, _ = http_call(int(server.base_url.rsplit(":", 1)[1]), token or server.admin_token, method, path,
                                  body, headers)
    assert status < 300, (status, answer)
    return answer


def save(server: LiveServer, name: str, content: str, description: str = "a note", **fields: str) -> Any:
    return call(server, "POST", "/v1/api/memories", {"name": name, "content": content, "description": description,
                                                     **fields})


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (its own storage) at 1280×800, failing the test on any script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.set_default_timeout(10_000)
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"


def sign_in(page: Page, server: LiveServer, token: str | None = None) -> None:
    page.goto(f"{server.base_url}/console")
    page.get_by_label("Token").fill(token or server.admin_token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Memories").wait_for()


def memory_row(page: Page, name: str | re.Pattern[str]) -> Any:
    return page.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True))


def test_search_open_and_edit_with_a_conflict(page: Page, live_server: LiveServer) -> None:
    saved = save(live_server, f"deploy_steps_{uuid.uuid4().hex[:6]}", "Run make deploy, then watch the canary.",
                 "how we deploy")
    save(live_server, f"lunch_{uuid.uuid4().hex[:6]}", "Pizza on Fridays.", "lunch habits")
    sign_in(page, live_server)
    page.get_by_label("Search (BM25)").fill("canary")
    page.get_by_role("button", name="Apply").click()
    row = memory_row(page, saved["name"])
    assert row.locator("mark").first.inner_text().lower() == "canary"  # the matched word, highlighted
    assert page.get_by_role("link", name=re.compile("^lunch_")).count() == 0
    row.get_by_role("link", name=saved["name"]).click()
    page.get_by_role("heading", name=saved["name"]).wait_for()
    assert "Run make deploy, then watch the canary." in page.locator("pre.content").first.inner_text()
    assert page.locator("dd").filter(has_text=" through ").inner_text().endswith(" through rest")

    call(live_server, "PATCH", f"{ADMIN}/memories/{saved['memory_id']}", {"content": "Deploy with the new pipeline."})
    page.get_by_label("Content").fill("Run make deploy, then watch the canary for ten minutes.")
    page.get_by_role("button", name="Save", exact=True).click()
    conflict = page.get_by_role("alert")
    conflict.get_by_text("Someone saved version 2").wait_for()
    assert "Deploy with the new pipeline." in conflict.inner_text()  # theirs beside mine: nothing overwritten
    assert call(live_server, "GET", f"{ADMIN}/memories/{saved['memory_id']}")["content"] == \
        "Deploy with the new pipeline."
    conflict.get_by_role("button", name="Save mine over version 2").click()
    page.get_by_role("heading", name="Edit (at version 3)").wait_for()
    assert page.locator("dd").filter(has_text=" through ").inner_text().endswith(" through console")
    assert call(live_server, "GET", f"{ADMIN}/memories/{saved['memory_id']}")["content"] == \
        "Run make deploy, then watch the canary for ten minutes."


def test_the_memories_table_pages_through_a_filtered_total(page: Page, live_server: LiveServer) -> None:
    writer = live_server.caller("pager")
    call(live_server, "POST", "/v1/api/memories/batch", {"writes": [
        {"action": "save", "name": f"page_note_{n}", "content": "x", "description": "d", "scope": "user"}
        for n in range(55)]}, token=writer["token"])
    sign_in(page, live_server)
    page.get_by_label("Scope", exact=True).select_option("user")
    page.get_by_label("Scope id").fill(writer["user_id"])
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("1–50 of 55 memories").wait_for()
    page.get_by_role("button", name="Next page").click()
    page.get_by_text("51–55 of 55 memories").wait_for()
    assert page.get_by_role("table", name="Memories").get_by_role("row").count() == 6
    assert page.get_by_role("button", name="Next page").count() == 0
    page.get_by_role("button", name="Previous page").click()
    page.get_by_text("1–50 of 55 memories").wait_for()


def test_history_diff_and_restore(page: Page, live_server: LiveServer) -> None:
    name = f"oncall_{uuid.uuid4().hex[:6]}"
    first = save(live_server, name, "Alice is on call this week.")
    save(live_server, name, "Bob is on call this week.")
    sign_in(page, live_server)
    page.goto(f"{live_server.base_url}/console/#/memory/{first['memory_id']}")
    history = page.get_by_role("region", name="History (from the log)")
    history.wait_for()
    assert history.get_by_role("row").count() == 3  # a heading and two versions
    assert history.locator("del").inner_text() == "Alice"
    assert history.locator("ins").inner_text() == "Bob"
    history.get_by_role("button", name="Restore v1").click()
    history.get_by_text("Version 1 restored as version 3").wait_for()
    restored = call(live_server, "GET", f"{ADMIN}/memories/{first['memory_id']}")
    assert (restored["version"], restored["content"]) == (3, "Alice is on call this week.")
    audit = call(live_server, "GET", f"{ADMIN}/audit?memory_id={first['memory_id']}")["records"]
    assert [record["surface"] for record in audit] == ["rest", "rest", "console"]


def test_a_delete_at_a_stale_version_deletes_nothing_and_says_why(page: Page, live_server: LiveServer) -> None:
    saved = save(live_server, f"stale_{uuid.uuid4().hex[:6]}", "Version one.")
    sign_in(page, live_server)
    page.goto(f"{live_server.base_url}/console/#/memory/{saved['memory_id']}")
    page.get_by_role("heading", name="Edit (at version 1)").wait_for()
    call(live_server, "PATCH", f"{ADMIN}/memories/{saved['memory_id']}", {"content": "Version two."})
    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Yes, delete it").click()
    page.get_by_role("alert").filter(has_text="Someone saved version 2 meanwhile: nothing was deleted.").wait_for()
    assert call(live_server, "GET", f"{ADMIN}/memories/{saved['memory_id']}")["content"] == "Version two."
    page.reload()
    page.get_by_role("heading", name="Edit (at version 2)").wait_for()
    page.get_by_role("button", name="Delete…").click()
    page.get_by_role("button", name="Yes, delete it").click()
    page.get_by_text(f"{saved['name']} was deleted.").wait_for()
    assert [version["event_type"] for version in call(
        live_server, "GET", f"{ADMIN}/memories/{saved['memory_id']}/history")["versions"]][-1] == "memory.delete"


def test_a_memory_as_of_an_earlier_position(page: Page, live_server: LiveServer) -> None:
    name = f"rota_{uuid.uuid4().hex[:6]}"
    first = save(live_server, name, "Carol is on call.")
    then = call(live_server, "GET", f"{ADMIN}/memories/{first['memory_id']}/history")["versions"][0]["position"]
    save(live_server, name, "Dave is on call.")
    sign_in(page, live_server)
    page.get_by_label("As of (position or time)").fill(str(then))
    page.get_by_role("button", name="Apply").click()
    page.get_by_text(f"as of log position {then}").wait_for()
    memory_row(page, name).get_by_role("link", name=name).click()
    page.get_by_text(f"As it was at log position {then}").wait_for()
    assert page.locator("pre.content").first.inner_text() == "Carol is on call."
    assert page.get_by_role("button", name="Save").count() == 0  # the past is not edited


def test_a_turns_receipt_leads_to_the_memory_it_showed(page: Page, live_server: LiveServer) -> None:
    name = f"deploy_howto_{uuid.uuid4().hex[:6]}"
    save(live_server, name, "We deploy with make ship.", "how we deploy")
    agent = live_server.agent("console")
    call(live_server, "POST", f"/v1/api/sessions/{agent['session_id']}/turns",
         {"turn_id": "t-1", "messages": [{"role": "user", "content": "how do we deploy with make ship?"}]},
         token=agent["session_token"])
    sign_in(page, live_server)
    page.goto(f"{live_server.base_url}/console/#/turns/{agent['session_id']}")
    receipt = page.locator("details.receipt")
    receipt.locator("summary").click()
    assert "yes" in receipt.locator("dd").nth(4).inner_text()  # the rebuilt block matches what was sent
    assert f'name="{name}"' in receipt.locator("pre.content").inner_text()
    receipt.get_by_role("link", name=name).click()
    page.get_by_text("As it was at log position").wait_for()
    assert page.locator("pre.content").first.inner_text() == "We deploy with make ship."
    shown = page.get_by_role("region", name="Turns that showed it")
    shown.get_by_role("link", name=agent["session_id"]).click()  # and from the memory back to the turn
    page.locator("details.receipt summary").get_by_text("Turn 1 (t-1)").wait_for()


def test_audit_trail_filters_and_the_chain_verifies(page: Page, live_server: LiveServer) -> None:
    from playwright.sync_api import expect  # waits for what the page shows; the module loads without playwright

    kept = save(live_server, f"audited_{uuid.uuid4().hex[:6]}", "Something to audit.")
    call(live_server, "DELETE", f"{ADMIN}/memories/{kept['memory_id']}")
    sign_in(page, live_server)
    page.get_by_role("link", name="Audit").click()
    page.get_by_label("Action").select_option("memory.delete")
    page.get_by_label("Memory id").fill(kept["memory_id"])
    page.get_by_role("button", name="Apply").click()
    records = page.get_by_role("table", name=re.compile("Audit records"))
    expect(records.get_by_role("row")).to_have_count(2)  # a heading and the one delete
    assert records.get_by_role("cell", name="memory.delete").is_visible()
    page.get_by_role("button", name="Verify the chain").click()
    page.get_by_text(re.compile(r"^Verified up to position \d+ at ")).wait_for()
    head = call(live_server, "GET", f"{ADMIN}/events?after=0&limit=1")["head"]
    assert f"Verified up to position {head} " in page.locator(".chain [role=status]").inner_text()
    save(live_server, f"appended_{uuid.uuid4().hex[:6]}", "Written after the walk.")
    page.reload()  # the tab remembers how far it verified, and verifies only the rest
    page.get_by_text(f"Verified up to position {head} at ").wait_for()
    page.get_by_role("button", name="Verify the rest").click()
    page.get_by_text(f"Verified up to position {head + 1} at ").wait_for()


def test_erasure_with_a_preview_and_a_certificate(page: Page, live_server: LiveServer) -> None:
    doomed = save(live_server, f"home_town_{uuid.uuid4().hex[:6]}", "Dana lives in Ghent.")
    sign_in(page, live_server)
    page.get_by_role("link", name="Erasure").click()
    page.get_by_label("Erase", exact=True).select_option("memory_id")
    page.get_by_label("User id, memory id or scope").fill(doomed["memory_id"])
    page.get_by_role("button", name="Preview").click()
    page.get_by_role("table", name="Memories that would be erased").get_by_role("cell", name=doomed["name"]).wait_for()
    assert call(live_server, "GET", f"{ADMIN}/memories/{doomed['memory_id']}")["content"] == "Dana lives in Ghent."
    page.get_by_label("Reason (kept in the log)").fill("request 2026-118")
    page.get_by_role("button", name="Erase 1 memory and 1 event").click()
    page.get_by_text("Every store was read back and holds nothing of the erased memories.").wait_for()
    with page.expect_download() as downloading:
        page.get_by_role("link", name=re.compile(r"^Download erasure-\d+\.json$")).click()
    certificate = json.loads(Path(downloading.value.path()).read_text(encoding="utf-8"))
    assert certificate["memories"] == [doomed["memory_id"]] and certificate["free"] is True
    assert http_call(int(live_server.base_url.rsplit(":", 1)[1]), live_server.admin_token, "GET",
                     f"{ADMIN}/memories/{doomed['memory_id']}")[0] == 404


def test_health_shows_each_projection(page: Page, live_server: LiveServer) -> None:
    sign_in(page, live_server)
    page.get_by_role("link", name="Health").click()
    page.get_by_text("Status: ready").wait_for()
    projections = page.get_by_role("table", name="Projections")
    projections.get_by_role("cell", name="structured_memories").wait_for()
    assert "No queue: projections run in the API process." in page.inner_text("main")


def test_health_names_a_stopped_projections_event_and_the_way_out(browser: Browser, sqlite_url: str) -> None:
    with serving(sqlite_url) as server:
        services = make_services(sqlite_url)
        try:
            broken = a_memory("broken")
            del broken["content"]  # an event the projection cannot apply
            position = plant(services, "broken", broken)
        finally:
            services.database.dispose()
        save(server, "after_the_break", "Written after it.")
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            sign_in(page, server)
            page.get_by_role("link", name="Health").click()
            page.get_by_text("Status: stopped").wait_for()
            fault = page.get_by_role("alert").filter(has_text=f"structured_memories is stopped at position {position}")
            assert "memory.save" in fault.inner_text()
            assert f"memoryd events supersede {position}" in fault.inner_text()
        finally:
            context.close()


HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def test_hostile_memories_show_their_characters_and_run_nothing(page: Page, live_server: LiveServer) -> None:
    hostile = save(live_server, f"hostile_{uuid.uuid4().hex[:6]}", f"content {HOSTILE}", f"description {HOSTILE}")
    sign_in(page, live_server)
    page.get_by_label("Search (BM25)").fill("hostile content description script")
    page.get_by_role("button", name="Apply").click()
    memory_row(page, hostile["name"]).wait_for()
    assert HOSTILE in page.inner_text("main")
    memory_row(page, hostile["name"]).get_by_role("link").click()
    page.locator("pre.content").first.wait_for()
    assert page.locator("pre.content").first.inner_text() == f"content {HOSTILE}"
    assert page.locator("main img, main script").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_sign_out_forgets_the_token_which_never_reaches_a_url(page: Page, live_server: LiveServer) -> None:
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    sign_in(page, live_server)
    for section in ("Audit", "Health", "Identity", "Memories"):
        page.get_by_role("link", name=section).click()
        page.get_by_role("heading", name=section, exact=True).wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Sign in").wait_for()
    stored = page.evaluate("JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage),"
                           " document.cookie, location.href])")
    assert live_server.admin_token not in stored
    assert urls and not [url for url in urls if live_server.admin_token in url]
    page.reload()
    page.get_by_role("button", name="Sign in").wait_for()  # nothing left to sign in with


def test_a_read_only_token_is_offered_no_writes(page: Page, live_server: LiveServer) -> None:
    reader = call(live_server, "POST", f"{ADMIN}/tokens", {"user_id": live_server.caller("reader")["user_id"],
                                                           "scopes": ["read"], "permissions": ["admin.memories"]})
    saved = save(live_server, f"readonly_{uuid.uuid4().hex[:6]}", "Look, do not touch.")
    sign_in(page, live_server, reader["token"])
    assert not page.get_by_role("link", name="Erasure").is_visible()
    page.goto(f"{live_server.base_url}/console/#/memory/{saved['memory_id']}")
    page.get_by_role("heading", name="History (from the log)").wait_for()
    assert page.get_by_role("button", name=re.compile("^(Save|Delete|Restore)")).count() == 0


def test_a_user_token_is_refused_in_words(page: Page, live_server: LiveServer) -> None:
    page.goto(f"{live_server.base_url}/console")
    page.get_by_label("Token").fill(live_server.caller("plain")["token"])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("This token is not an administrator's").wait_for()
    page.get_by_label("Token").fill("mdt_not_a_token")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Unauthorized: missing or invalid token").wait_for()


def test_identity_revokes_a_token_and_closes_a_session_as_audited_console_actions(page: Page,
                                                                                  live_server: LiveServer) -> None:
    agent = live_server.agent("identity")
    doomed = call(live_server, "POST", f"{ADMIN}/tokens", {"user_id": agent["user_id"], "scopes": ["read"],
                                                           "name": "stolen laptop"})
    sign_in(page, live_server)
    page.get_by_role("link", name="Identity").click()
    page.get_by_role("button", name=f"Revoke {doomed['prefix']}").click()
    page.get_by_text(f"Token {doomed['prefix']} revoked.").first.wait_for()
    page.get_by_role("button", name=f"Close {agent['session_id']}").click()
    page.get_by_text(f"Session {agent['session_id']} closed.").first.wait_for()
    revoked = call(live_server, "GET", f"{ADMIN}/audit?action=token.revoke&actor=")["records"]
    closed = call(live_server, "GET", f"{ADMIN}/audit?action=session.close")["records"]
    assert [(record["token_id"], record["surface"]) for record in revoked if record["token_id"] == doomed["token_id"]] \
        == [(doomed["token_id"], "console")]
    assert [record["surface"] for record in closed if record["session_id"] == agent["session_id"]] == ["console"]


UNLABELLED = """[...document.querySelectorAll("main input, main select, main textarea, main button")]
  .filter((control) => !control.labels?.length && !control.getAttribute("aria-label") && !control.textContent.trim())
  .map((control) => control.outerHTML)"""


def test_a_keyboard_alone_signs_in_and_opens_a_memory_and_every_control_is_labelled(page: Page,
                                                                                    live_server: LiveServer) -> None:
    saved = save(live_server, f"keyboard_{uuid.uuid4().hex[:6]}", "Reached without a mouse.")
    page.goto(f"{live_server.base_url}/console")
    page.keyboard.type(live_server.admin_token)  # the token field has the focus
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Memories").wait_for()
    memory_row(page, saved["name"]).wait_for()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == saved["name"]:
            break
    page.keyboard.press("Enter")
    page.get_by_role("heading", name=saved["name"]).wait_for()
    for section in ("memories", f"memory/{saved['memory_id']}", "audit", "erasure", "turns", "health", "identity"):
        page.goto(f"{live_server.base_url}/console/#/{section}")
        page.locator("main section").first.wait_for()
        page.wait_for_load_state("networkidle")
        assert page.evaluate(UNLABELLED) == [], section


def test_a_slow_answer_shows_that_it_is_loading(page: Page, live_server: LiveServer) -> None:
    sign_in(page, live_server)
    held: list[Any] = []
    page.route("**/v1/api/admin/audit?*", lambda route: held.append(route))  # held until the test lets it go
    page.get_by_role("link", name="Audit").click()
    page.get_by_text("Loading…").wait_for()
    held[0].continue_()
    page.get_by_role("table", name=re.compile("Audit records")).wait_for()
    assert not page.get_by_text("Loading…").is_visible()


def test_a_phone_reads_the_memories_without_scrolling_sideways(browser: Browser, live_server: LiveServer) -> None:
    save(live_server, f"a_rather_long_memory_name_for_a_phone_{uuid.uuid4().hex[:6]}", "x " * 200)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        phone = context.new_page()
        sign_in(phone, live_server)
        memory_row(phone, re.compile("^a_rather_long")).wait_for()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()


@pytest.mark.postgres
def test_the_console_on_postgresql(browser: Browser, postgres_url: str) -> None:
    with serving(postgres_url) as server:
        saved = save(server, "pg_note", "PostgreSQL keeps this note.")
        save(server, "pg_note", "PostgreSQL keeps this note, edited.")
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            sign_in(page, server)
            page.get_by_label("Search (BM25)").fill("edited")
            page.get_by_role("button", name="Apply").click()
            memory_row(page, "pg_note").get_by_role("link").click()
            history = page.get_by_role("region", name="History (from the log)")
            assert (history.locator("del").inner_text(), history.locator("ins").inner_text()) == \
                ("note.", "note, edited.")
            page.get_by_role("link", name="Audit").click()
            page.get_by_role("button", name="Verify the chain").click()
            page.get_by_text(re.compile(r"^Verified up to position \d+ at ")).wait_for()
        finally:
            context.close()
        assert call(server, "GET", f"{ADMIN}/memories/{saved['memory_id']}")["version"] == 2
