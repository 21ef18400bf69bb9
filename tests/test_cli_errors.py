"""Errors an operator can act on: one line on stderr that says what is wrong and what to do, a non-zero exit,
never a traceback, never a password."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memoryd.cli import main
from tests.helpers import free_port

PASSWORD = "s3cret-pw-4711"


def memoryd(*args: str, database_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``memoryd ARGS`` as an operator runs it, in a process of its own."""
    return subprocess.run([sys.executable, "-m", "memoryd", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MEMORYD_DATABASE_URL": database_url, **env})


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command printed on stderr (and it failed, and printed nothing else)."""
    assert done.returncode != 0, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert done.stdout == "", done.stdout
    return lines[0]


@pytest.mark.parametrize("choose", ["--port", "MEMORYD_PORT"])
def test_serve_on_a_port_in_use_says_so_in_one_line_and_never_claims_to_listen(sqlite_url: str, choose: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args, env = (["--port", str(port)], {}) if choose == "--port" else ([], {"MEMORYD_PORT": str(port)})
        done = memoryd("serve", *args, database_url=sqlite_url, **env)
    line = one_line(done)
    assert line == (f"Error: port {port} on 127.0.0.1 is already in use: choose another with --port or "
                    "MEMORYD_PORT")
    assert "listening" not in done.stderr


def test_serve_on_port_0_announces_the_port_it_got_and_answers_there(sqlite_url: str) -> None:
    with subprocess.Popen([sys.executable, "-m", "memoryd", "serve", "--port", "0"], text=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          env={**os.environ, "MEMORYD_DATABASE_URL": sqlite_url}) as server:
        try:
            assert server.stderr is not None
            announced = next(line for line in server.stderr if "listening" in line)
            address = announced.split("http://", 1)[1].split()[0]
            host, port = address.rsplit(":", 1)
            assert host == "127.0.0.1" and int(port) > 0, announced
            with urllib.request.urlopen(f"http://{address}/healthz", timeout=10) as answer:
                assert answer.status == 200
        finally:
            server.terminate()


def closed_port_postgres_url() -> str:
    return f"postgresql+psycopg://memoryd:{PASSWORD}@127.0.0.1:{free_port()}/test"


def unreachable(url: str, line: str) -> None:
    assert line.startswith(f"Error: cannot use the database {url.replace(PASSWORD, '***')}: connection failed: "), line
    assert "Connection refused" in line


@pytest.mark.parametrize("args", [("serve", "--port", "0"), ("status",)])
def test_an_unreachable_postgresql_is_one_line_naming_its_url_without_the_password(args: Any) -> None:
    url = closed_port_postgres_url()
    done = memoryd(*args, database_url=url)
    unreachable(url, one_line(done))
    assert PASSWORD not in done.stdout + done.stderr


@pytest.mark.parametrize("args", [("db", "upgrade"), ("users", "create", "x"), ("tokens", "create", "--user", "u"),
                                  ("audit", "verify"), ("projections", "verify"), ("memories", "export"),
                                  ("events", "show", "1")])
def test_every_command_says_the_same_of_an_unreachable_database(args: Any) -> None:
    url = closed_port_postgres_url()
    done = CliRunner().invoke(main, list(args), env={"MEMORYD_DATABASE_URL": url})
    assert done.exit_code == 1
    [line] = done.output.strip().splitlines()
    unreachable(url, line)
    assert PASSWORD not in done.output


@pytest.mark.parametrize("url", ["postgresql+psycopg://memoryd:{password}@127.0.0.1:notaport/test",
                                 "nosuchdatabase://memoryd:{password}@127.0.0.1/test"])
def test_a_bad_database_url_is_one_line_without_the_password(url: str) -> None:
    done = CliRunner().invoke(main, ["status"], env={"MEMORYD_DATABASE_URL": url.format(password=PASSWORD)})
    assert done.exit_code == 1
    [line] = done.output.strip().splitlines()
    assert line.startswith(f"Error: cannot use the database {url.format(password='***')}: ")
    assert PASSWORD not in done.output


@pytest.mark.parametrize("args", [("serve", "--port", "0"), ("db", "upgrade")])
def test_an_sqlite_path_that_cannot_be_written_is_one_line_naming_it(tmp_path: Path, args: Any) -> None:
    (tmp_path / "a_file").write_text("not a directory")
    url = f"sqlite:///{tmp_path / 'a_file' / 'memoryd.db'}"
    line = one_line(memoryd(*args, database_url=url))
    assert line.startswith(f"Error: cannot use the database {url}: "), line
    assert str(tmp_path / "a_file") in line.split(": ", 2)[2]


@pytest.mark.parametrize("args", [("users", "create", "alice"), ("tokens", "create", "--user", "u"), ("status",),
                                  ("workstreams", "create", "--owner", "u"), ("audit", "verify"),
                                  ("projections", "rebuild"), ("memories", "export"), ("events", "show", "1")])
def test_commands_that_only_use_a_database_refuse_a_missing_sqlite_file_and_create_nothing(tmp_path: Path, args: Any) -> None:
    path = tmp_path / "elsewhere" / "memoryd.db"
    done = CliRunner().invoke(main, list(args), env={"MEMORYD_DATABASE_URL": f"sqlite:///{path}"})
    assert done.exit_code == 1
    assert done.output.strip().splitlines() == [
        f"Error: no database at {path}: only 'memoryd serve' and 'memoryd db upgrade' create one "
        "(MEMORYD_DATABASE_URL or [storage] database_url names the database to use)"]
    assert not path.parent.exists()


def test_db_upgrade_creates_the_database_the_other_commands_then_use(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'memoryd.db'}"
    assert CliRunner().invoke(main, ["db", "upgrade"], env={"MEMORYD_DATABASE_URL": url}).exit_code == 0
    created = CliRunner().invoke(main, ["users", "create", "alice"], env={"MEMORYD_DATABASE_URL": url})
    assert created.exit_code == 0, created.output
