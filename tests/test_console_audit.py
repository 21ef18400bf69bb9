"""The web console, driven in a real browser (Chromium through Playwright) against a live ``memoryd serve``:
what the agent saw, the audit trail and the chain, erasure, health, identity, and PostgreSQL.

Each test signs in as an operator would and checks what they would see; the data comes through the API.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.console_pages import ADMIN, call, memory_row, save, sign_in
from tests.helpers import LiveServer, a_memory, http_call, make_services, plant, serving

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page



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
