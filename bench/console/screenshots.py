"""Screenshots of the console's main screens, for docs/console.md (written to docs/console/*.png).

Starts a ``memoryd serve`` on a scratch SQLite database, fills it through the API as a team would (memories
with a history, an agent's session and its turns, an erasure), and drives Chromium through Playwright
(Debian's ``chromium``; Playwright never downloads a browser here). Run from the repo root:

    .venv/bin/python bench/console/screenshots.py [--out docs/console]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "sdk" / "python")]

from memoryd_sdk import MemorydConsole  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

from memoryd.bootstrap import build_services  # noqa: E402
from memoryd.kernel.config import Config, StorageSettings  # noqa: E402
from memoryd.storage import migrate  # noqa: E402

CHROMIUM = os.environ.get("MEMORYD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MEMORIES = [
    ("deploy_steps", "Run `make deploy` from main, then watch the canary dashboard for ten minutes before "
                     "promoting.", "how we deploy the API", "reference"),
    ("oncall_rota", "Alice is on call this week; Bob is her backup.", "who is on call", "general"),
    ("coding_style", "Prefer small modules, names that explain themselves, and tests that assert behaviour.",
     "the team's coding style", "feedback"),
    ("staging_database", "Staging uses PostgreSQL 16 on db-staging-2; migrations run with `memoryd migrate`.",
     "where staging's database lives", "reference"),
    ("release_calendar", "Releases go out on Tuesdays and Thursdays; no release on Fridays.", "when we release",
     "general"),
    ("incident_2026_11", "The search index stalled on a malformed event; superseding it restored service.",
     "November's incident and its fix", "reference"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def call(base: str, token: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(f"{base}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def seed(base: str, admin_token: str, dana: str, dana_token: str) -> dict[str, Any]:
    """A team's memories with a history, a user's memory to erase, and an agent's session with two turns."""
    saved = {name: call(base, admin_token, "POST", "/v1/api/memories", {"name": name, "content": content,
                                                                         "description": description, "type": kind})
             for name, content, description, kind in MEMORIES}
    call(base, admin_token, "POST", "/v1/api/memories", {"name": "oncall_rota", "description": "who is on call",
                                                          "content": "Bob is on call this week; Carol is his backup."})
    home = call(base, dana_token, "POST", "/v1/api/memories", {"name": "home_town", "content": "Dana lives in Ghent.",
                                                               "description": "where Dana lives", "scope": "user"})
    with MemorydConsole(base, token=admin_token) as console:
        workstream = console.create_workstream("api team", owner=dana)
        session = console.open_session("interactive", workstream.workstream_id, user_id=dana)
    for number, question in enumerate(["How do we deploy the API?", "And who is on call if it breaks?"], 1):
        call(base, session.info.token if session.info else "", "POST", f"/v1/api/sessions/{session.session_id}/turns",
             {"turn_id": f"t-{number}", "messages": [{"role": "user", "content": question}]})
    return {"saved": saved, "home": home, "session_id": session.session_id}


def shoot(page: Page, out: Path, name: str) -> None:
    page.wait_for_timeout(300)  # let the loading state go
    page.screenshot(path=str(out / f"{name}.png"), full_page=True)
    print(f"wrote {out / name}.png")


def screens(page: Page, base: str, admin_token: str, seeded: dict[str, Any], out: Path) -> None:
    page.goto(f"{base}/console")
    shoot(page, out, "sign-in")
    page.get_by_label("Token").fill(admin_token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Memories").wait_for()
    page.get_by_label("Search (BM25)").fill("deploy canary")
    page.get_by_role("button", name="Apply").click()
    page.get_by_text("best match").wait_for()
    shoot(page, out, "memories-search")
    rota = seeded["saved"]["oncall_rota"]["memory_id"]
    page.goto(f"{base}/console/#/memory/{rota}")
    page.get_by_role("heading", name="History (from the log)").wait_for()
    shoot(page, out, "memory-history-diff")
    call(base, admin_token, "PATCH", f"/v1/api/admin/memories/{rota}", {"content": "Carol is on call this week."})
    page.get_by_label("Content").fill("Bob is on call this week; Dave is his backup.")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("Someone saved version 3").wait_for()
    shoot(page, out, "memory-edit-conflict")
    page.goto(f"{base}/console/#/turns/{seeded['session_id']}")
    page.locator("details.receipt").first.locator("summary").click()
    shoot(page, out, "turn-receipt")
    page.goto(f"{base}/console/#/audit")
    page.get_by_role("button", name="Verify the chain").click()
    page.get_by_text("Verified up to position").wait_for()
    shoot(page, out, "audit-chain-verified")
    page.goto(f"{base}/console/#/erasure")
    page.get_by_label("Erase", exact=True).select_option("memory_id")
    page.get_by_label("User id, memory id or scope").fill(seeded["home"]["memory_id"])
    page.get_by_role("button", name="Preview").click()
    page.get_by_label("Reason (kept in the log)").fill("erasure request 2026-118")
    shoot(page, out, "erasure-preview")
    page.get_by_role("button", name="Erase 1 memory and 1 event").click()
    page.get_by_text("Every store was read back").wait_for()
    shoot(page, out, "erasure-certificate")
    page.goto(f"{base}/console/#/health")
    page.get_by_text("Status:").wait_for()
    shoot(page, out, "health")
    page.goto(f"{base}/console/#/identity")
    page.get_by_role("table", name="Tokens").wait_for()
    shoot(page, out, "identity")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/memoryd.db"
        services = build_services(Config(storage=StorageSettings(database_url=url)))
        migrate.upgrade(services.database)
        admin = services.directory.create_user("ops-admin")
        admin_token = services.directory.create_token(admin, ["read", "write", "service"], ["admin.memories"],
                                                      name="console")[1]
        dana = services.directory.create_user("dana")
        dana_token = services.directory.create_token(dana, ["read", "write"], [], name="dana's laptop")[1]
        services.database.dispose()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {**os.environ, "MEMORYD_DATABASE_URL": url, "MEMORYD_PORT": str(port),
               "XDG_CACHE_HOME": scratch, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sdk" / "python")])}
        server = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env, cwd=scratch,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(f"{base}/healthz")
            seeded = seed(base, admin_token, dana, dana_token)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                desktop = browser.new_page(viewport={"width": 1280, "height": 800})
                screens(desktop, base, admin_token, seeded, out)
                phone = browser.new_page(viewport={"width": 390, "height": 844}, device_scale_factor=2)
                phone.goto(f"{base}/console")
                phone.get_by_label("Token").fill(admin_token)
                phone.get_by_role("button", name="Sign in").click()
                phone.get_by_role("heading", name="Memories").wait_for()
                shoot(phone, out, "phone-memories")
                browser.close()
        finally:
            server.terminate()
            server.wait(10)


def wait_for(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except (OSError, urllib.error.URLError):
            time.sleep(0.1)
    raise SystemExit(f"memoryd did not come up at {url}")


if __name__ == "__main__":
    main()
