"""What the console's browser tests share (tests/test_console*.py): the API calls that set a scene, signing in,
and finding a memory's row. Their browser and page fixtures are in conftest.py."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tests.helpers import LiveServer, http_call

if TYPE_CHECKING:
    from playwright.sync_api import Page

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


def sign_in(page: Page, server: LiveServer, token: str | None = None) -> None:
    page.goto(f"{server.base_url}/console")
    page.get_by_label("Token").fill(token or server.admin_token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Memories").wait_for()


def memory_row(page: Page, name: str | re.Pattern[str]) -> Any:
    return page.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True))
