"""memoryd deployed as production runs it, every part of it owned by the caller so it can be broken on purpose.

A PostgreSQL cluster of its own (``OwnPostgres``), a throwaway ``redis-server``, gunicorn with two API
processes and two ``memoryd worker`` processes, all started as subprocesses from the ``memoryd`` on
``PYTHONPATH``: the chaos test runs the tree under test, the outage benchmark any checkout. Nothing here
touches the machine's shared PostgreSQL or Redis.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.helpers import free_port, until, wait_until_serving
from tests.own_postgres import OwnPostgres

# As docs/operations.md's Procfile starts the API, with one process per core of this 2-core machine.
# MEMORYD_CHAOS_GUNICORN replaces the options when the documented form changes.
GUNICORN_OPTIONS = os.environ.get("MEMORYD_CHAOS_GUNICORN", "-w 2 -k gthread --threads 8")  # as docs/operations.md
QUEUE = "memoryd-chaos"
TREE = Path(__file__).resolve().parent.parent


def python_path() -> str:
    """The caller's PYTHONPATH made absolute (the processes run in a temporary directory), then this tree:
    a memoryd named on PYTHONPATH is the one that runs, else this tree's."""
    given = [str(Path(entry).resolve()) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return os.pathsep.join([*given, str(TREE)])


def missing_redis_server() -> str | None:
    """Why no throwaway Redis can be started here, or None."""
    return None if shutil.which("redis-server") else "no redis-server on PATH"


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (gunicorn's API processes under its arbiter)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
        if fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(entry.name))
    return found


class Deployment:
    """The database, Redis, the API and the workers of one memoryd, with a way to break each."""

    def __init__(self, postgres: OwnPostgres) -> None:
        self.postgres = postgres
        self.root = Path(tempfile.mkdtemp(prefix="memoryd-chaos-"))
        self.database_url = postgres.new_database()
        self.database_name = self.database_url.rsplit("/", 1)[-1]
        self.redis_port, self.api_port = free_port(), free_port()
        self.env = {**os.environ, "MEMORYD_DATABASE_URL": self.database_url, "MEMORYD_QUEUE": QUEUE,
                    "MEMORYD_REDIS_URL": f"redis://127.0.0.1:{self.redis_port}/0",
                    "MEMORYD_SNAPSHOT_DIR": str(self.root / "snapshots"), "PYTHONPATH": python_path()}
        self.redis: subprocess.Popen[bytes] | None = None
        self.api: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.memoryd("db", "upgrade")
        user = self.memoryd("users", "create", "chaos").strip()
        self.token = self.memoryd("tokens", "create", "--user", user).strip().split()[-1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def memoryd(self, *args: str, check: bool = True) -> str:
        """A ``memoryd`` command's standard output (with ``check``, it must exit 0)."""
        done = subprocess.run([sys.executable, "-m", "memoryd", *args], env=self.env, cwd=self.root,
                              capture_output=True, text=True, timeout=300)
        if check and done.returncode != 0:
            raise AssertionError(f"memoryd {' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}")
        return done.stdout

    def _spawn(self, name: str, *command: str) -> subprocess.Popen[bytes]:
        with open(self.root / f"{name}.log", "ab") as log:  # the child keeps its copy
            return subprocess.Popen(list(command), env=self.env, cwd=self.root, stdout=log, stderr=log)

    # -- starting and stopping ---------------------------------------------------------------------------

    def start(self) -> None:
        self.start_redis()
        self.api = self._spawn("api", sys.executable, "-m", "gunicorn", *shlex.split(GUNICORN_OPTIONS),
                               "-b", f"127.0.0.1:{self.api_port}", "api.wsgi:application")
        self.workers = [self._spawn_worker(), self._spawn_worker()]
        assert wait_until_serving(f"{self.base_url}/healthz", timeout=120), f"gunicorn did not come up: {self.log('api')}"

    def _spawn_worker(self) -> subprocess.Popen[bytes]:
        return self._spawn("worker", sys.executable, "-m", "memoryd", "worker")

    def start_redis(self) -> None:
        self.redis = self._spawn("redis", "redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--dir", str(self.root))
        until(self._redis_answers, "redis-server to listen")

    def _redis_answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.redis_port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop_redis(self) -> None:
        assert self.redis is not None
        self.redis.terminate()
        self.redis.wait(30)

    def close(self) -> None:
        """Stop every process this deployment started, then remove its directory (the cluster is the caller's)."""
        for process in [self.api, *self.workers, self.redis]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [self.api, *self.workers, self.redis]:
            if process is not None:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- breaking ----------------------------------------------------------------------------------------

    def kill_api_process(self) -> None:
        """SIGKILL one of gunicorn's API processes; the arbiter starts another, as in production."""
        assert self.api is not None
        before = children_of(self.api.pid)
        assert before, "gunicorn has no API process to kill"
        os.kill(before[0], signal.SIGKILL)
        until(lambda: len([pid for pid in children_of(self.api.pid) if pid not in before]) >= 1,  # type: ignore[union-attr]
              "gunicorn to replace the killed process", timeout=60)

    def kill_worker(self) -> None:
        """SIGKILL a projection worker, and start another in its place (a supervisor's restart)."""
        victim = self.workers.pop(0)
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        self.workers.append(self._spawn_worker())

    def cut_database_connections(self) -> int:
        """Terminate every other session on the deployment's database (a failover or a network cut); how many."""
        admin = create_engine(self.postgres.server_url, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                return len(conn.execute(text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": self.database_name}).all())
        finally:
            admin.dispose()

    def restart_database(self, down_seconds: float) -> None:
        """Stop the PostgreSQL cluster (fast: connections cut), keep it down for ``down_seconds``, start it."""
        self.postgres.stop()
        time.sleep(down_seconds)  # the outage itself: how long clients must ride it out
        self.postgres.start()

    # -- checking ----------------------------------------------------------------------------------------

    def saves_by_name(self) -> Counter[str]:
        """How many ``memory.save`` events the log holds for each memory name."""
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT payload->'memory'->>'name' FROM events "
                                         "WHERE event_type = 'memory.save'")).scalars()
                return Counter(rows)
        finally:
            engine.dispose()

    def log(self, name: str) -> str:
        """The tail of a process log (what a failed assertion shows)."""
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""
