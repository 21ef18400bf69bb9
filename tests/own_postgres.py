"""A PostgreSQL cluster a test starts, stops and restarts itself: outages without touching the shared server.

It lives under a temporary directory, listens on a free loopback port (and a socket in that directory), trusts
local connections and skips fsync. ``initdb`` refuses to run as root, so as root the cluster belongs to the
``postgres`` user and its commands run through ``runuser``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from glob import glob
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.helpers import free_port

OWNER = "postgres"  # the system user owning the cluster when the tests run as root


def postgres_binaries() -> Path | None:
    """The newest installed PostgreSQL's bin directory (initdb, pg_ctl), or None."""
    found = [Path(bindir) for bindir in glob("/usr/lib/postgresql/*/bin") if Path(bindir, "initdb").exists()]
    if not found and (initdb := shutil.which("initdb")):
        found = [Path(initdb).parent]
    return max(found, key=lambda bindir: int(bindir.parent.name) if bindir.parent.name.isdigit() else 0, default=None)


def missing_toolchain() -> str | None:
    """Why no cluster can be started here, or None."""
    if postgres_binaries() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on PATH"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OWNER)
        except KeyError:
            return f"running as root, and there is no {OWNER!r} user for initdb to run as"
        if shutil.which("runuser") is None:
            return "running as root, and there is no runuser to run initdb as another user"
    return None


class OwnPostgres:
    def __init__(self) -> None:
        bindir = postgres_binaries()
        assert bindir is not None, missing_toolchain()
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="memoryd-pg-"))
        self.port = free_port()
        if os.geteuid() == 0:
            owner = pwd.getpwnam(OWNER)
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        self.start()

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def server_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def new_database(self) -> str:
        """A fresh database's URL."""
        name = f"memoryd_{uuid.uuid4().hex[:12]}"
        admin = create_engine(self.server_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            admin.dispose()
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options, "-w", "start")

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as a restart cuts them."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bindir / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", OWNER, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root)
