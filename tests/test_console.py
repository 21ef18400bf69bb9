"""The web console, driven in a real browser (Chromium through Playwright) against a live ``memoryd serve``:
memories, their edits, history and point in time, hostile text, signing in and out, and how the page is used.

Each test signs in as an operator would and checks what they would see; the data comes through the API.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Any

from tests.console_pages import ADMIN, call, memory_row, save, sign_in
from tests.helpers import LiveServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page



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
