"""The fast tier: ``pytest tests/unit`` runs in seconds because nothing here needs a database, a server or a process.

The domain and text rules, the analyzer, the search index on small corpora, the block, the nudge rules, the
layering and the config. A test here that opens a connection (TCP or a SQLite file) or starts a process fails
at once, naming what it did: such a test belongs in ``tests/``, which the full suite runs as well.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
from collections.abc import Callable
from typing import Any, NoReturn

import pytest


def _refusing(what: str) -> Callable[..., NoReturn]:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise AssertionError(f"a unit test {what}: move it from tests/unit to tests/")

    return refuse


@pytest.fixture(autouse=True)
def _no_connections_or_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _refusing("opened a connection"))
    monkeypatch.setattr(socket.socket, "connect_ex", _refusing("opened a connection"))
    monkeypatch.setattr(sqlite3, "connect", _refusing("opened a SQLite database"))
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refusing("started a process"))
    monkeypatch.setattr(os, "fork", _refusing("forked a process"))
