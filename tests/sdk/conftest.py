"""A live ``memoryd serve`` per test module (in a module, both SDKs talk to the same one), with users and tokens."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import make_services
from tests.helpers import free_port, wait_until_serving


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    admin_token: str
    database_url: str

    def caller(self, name: str) -> dict[str, str]:
        """A fresh user with a read/write token and a workstream: what one SDK run acts as."""
        services = make_services(self.database_url)
        try:
            user = services.directory.create_user(name)
            token = services.directory.create_token(user, ["read", "write"], [])[1]
            other = services.directory.create_user(f"{name}_colleague")
            return {"user_id": user, "token": token, "colleague_id": other}
        finally:
            services.database.dispose()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    url = f"sqlite:///{tmp_path_factory.mktemp('live') / 'memoryd.db'}"
    services = make_services(url)
    admin = services.directory.create_user("admin")
    admin_token = services.directory.create_token(admin, ["read", "write", "service"], ["admin.memories"])[1]
    services.database.dispose()
    port = free_port()
    env = {**os.environ, "MEMORYD_DATABASE_URL": url, "MEMORYD_PORT": str(port)}
    server = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until_serving(f"http://127.0.0.1:{port}/healthz"), "memoryd serve did not come up"
        yield LiveServer(f"http://127.0.0.1:{port}", admin_token, url)
    finally:
        server.terminate()
        server.wait(10)
