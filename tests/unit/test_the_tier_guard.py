"""The fast tier's guard (tests/unit/conftest.py): a unit test that reaches for a connection or a process fails."""

from __future__ import annotations

import socket
import sqlite3
import subprocess

import pytest


def test_a_connection_a_sqlite_file_or_a_process_fails_the_test_naming_what_it_did() -> None:
    with socket.socket() as sock, pytest.raises(AssertionError, match="a unit test opened a connection"):
        sock.connect(("127.0.0.1", 9))
    with pytest.raises(AssertionError, match="a unit test opened a SQLite database"):
        sqlite3.connect(":memory:")
    with pytest.raises(AssertionError, match="a unit test started a process"):
        subprocess.run(["true"], check=False)
