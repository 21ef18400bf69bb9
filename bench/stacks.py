"""What ``bench_production.py`` and ``bench_redis_outage.py`` share: memoryd stacks started as
subprocesses (the embedded ``memoryd serve``, or gunicorn plus ``memoryd worker``s on Redis), and a
closed-loop HTTP load of saves, searches and turns from client threads on keep-alive connections.

Every process is started in a session of its own and stopped by its process group id, also on error.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from common import ROOT, SEED, memory_content, percentile

from memoryd.bootstrap import build_services
from memoryd.kernel.config import Config, StorageSettings
from memoryd.storage import migrate

SAVE, SEARCH, TURN = "save", "search", "turn"
QUERIES = ("deploy rollback", "postgres lock timeout", "review feedback", "release pipeline branch",
           "queue worker retry", "schema migration index", "token user project", "latency cache metric")


@dataclass
class Stack:
    """One running memoryd: its port, a read/write token, a session (for turns) and its processes."""

    name: str
    port: int
    token: str
    session_id: str
    session_token: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Credentials:
    token: str
    session_id: str
    session_token: str


def prepare(url: str) -> Credentials:
    """Migrate the database at ``url``; a user with a read/write token and an open session of theirs."""
    services = build_services(Config(storage=StorageSettings(database_url=url)))
    try:
        migrate.upgrade(services.database)
        user = services.directory.create_user("bench")
        _, token = services.directory.create_token(user, ["read", "write"], [])
        session, session_token = services.sessions.create("interactive",
                                                          services.directory.create_workstream(user, "bench"), user)
        return Credentials(token, session.session_id, session_token)
    finally:
        services.database.dispose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env() -> dict[str, str]:
    """The bench's environment minus any MEMORYD_* setting, so only what a stack passes applies."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}


def spawn(command: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as handle:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(list(command), env=env, cwd=ROOT, stdout=handle, stderr=handle, start_new_session=True)


def stop(processes: Sequence[subprocess.Popen[bytes]], sig: int = signal.SIGTERM) -> None:
    """``sig`` to each process group we started (by its id), SIGKILL to whatever is left after 10 s."""
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for process in processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(5)


def wait_healthy(stack: Stack, logs: Path, timeout: float = 60) -> None:
    wait_serving(stack.name, stack.port, stack.processes, logs, timeout)


def wait_serving(name: str, port: int, processes: Sequence[subprocess.Popen[bytes]], logs: Path,
                 timeout: float = 60) -> None:
    """Until ``/healthz`` answers on ``port``; fails at once if one of ``processes`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"{name}: a process exited with {process.returncode}; logs in {logs}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name}: no answer on /healthz within {timeout:.0f} s; logs in {logs}")


@contextmanager
def log_folder(prefix: str, notes: list[str], keep: bool = False) -> Iterator[Path]:
    """A scratch folder for the servers' logs: kept, and named, when the bench fails or with ``keep``."""
    logs = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield logs
    except BaseException:
        print(f"# failed: logs kept in {logs}", file=sys.stderr)
        raise
    if keep:
        notes.append(f"logs kept in {logs}")
    else:
        shutil.rmtree(logs, ignore_errors=True)


def embedded(name: str, url: str, credentials: Credentials, logs: Path) -> Stack:
    """``memoryd serve`` (waitress, 8 threads, projections in process) on ``url``."""
    stack = Stack(name, free_port(), credentials.token, credentials.session_id, credentials.session_token)
    env = {**base_env(), "MEMORYD_DATABASE_URL": url}
    stack.processes.append(spawn([sys.executable, "-m", "memoryd", "serve", "--port", str(stack.port)], env,
                                 logs / f"{name}-serve.log"))
    return stack


def production(name: str, url: str, credentials: Credentials, logs: Path, redis_url: str, queue: str,
               gunicorn: Sequence[str], workers: int = 2) -> Stack:
    """gunicorn with ``gunicorn`` options on ``api.wsgi:application``, and ``workers`` ``memoryd worker``s."""
    stack = Stack(name, free_port(), credentials.token, credentials.session_id, credentials.session_token)
    env = {**base_env(), "MEMORYD_DATABASE_URL": url, "MEMORYD_REDIS_URL": redis_url, "MEMORYD_QUEUE": queue}
    stack.processes.append(spawn([sys.executable, "-m", "gunicorn", *gunicorn, "--log-level", "warning",
                                  "-b", f"127.0.0.1:{stack.port}", "api.wsgi:application"], env,
                                 logs / f"{name}-gunicorn.log"))
    for index in range(workers):
        stack.processes.append(spawn([sys.executable, "-m", "memoryd", "worker"], env, logs / f"{name}-worker-{index}.log"))
    return stack


@dataclass(frozen=True)
class Done:
    """One answered request: what, when it was sent (perf_counter), how long it took, and its status."""

    op: str
    sent: float
    seconds: float
    status: int
    pending: bool = False  # a write answered X-Projection-Pending


class Load:
    """``clients`` threads, each on a keep-alive connection, sending requests back to back (closed loop): each
    picks its next operation from ``mix`` (weights per ``SAVE``, ``SEARCH``, ``TURN``)."""

    def __init__(self, stack: Stack, clients: int, mix: dict[str, int], label: str = "") -> None:
        self.stack, self.clients, self.mix, self.label = stack, clients, mix, label
        self.done: list[Done] = []
        self.errors: list[str] = []
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> Load:
        for number in range(self.clients):
            thread = threading.Thread(target=self._client, args=(number,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> list[Done]:
        self._stopped.set()
        for thread in self._threads:
            thread.join(60)
        return self.done

    def run_for(self, seconds: float) -> list[Done]:
        self.start()
        time.sleep(seconds)
        return self.stop()

    def run_until(self, count: int) -> list[Done]:
        self.start()
        while len(self.done) < count and not self._stopped.wait(0.05):
            pass
        return self.stop()

    def _client(self, number: int) -> None:
        rng = random.Random(SEED + number)
        ops, weights = list(self.mix), list(self.mix.values())
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=30)
        count = 0
        while not self._stopped.is_set():
            op = rng.choices(ops, weights)[0]
            count += 1
            method, path, body, token = self._request(op, rng, f"{self.label}c{number}_{count}")
            sent = time.perf_counter()
            try:
                conn.request(method, path, json.dumps(body), {"Authorization": f"Bearer {token}",
                                                              "Content-Type": "application/json"})
                response = conn.getresponse()
                answer = response.read()
                status, pending = response.status, response.getheader("X-Projection-Pending") == "true"
            except OSError as error:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=30)
                status, answer, pending = 0, str(error).encode(), False
            seconds = time.perf_counter() - sent
            with self._lock:
                self.done.append(Done(op, sent, seconds, status, pending))
                if status not in (200, 201):
                    self.errors.append(f"{op} {status}: {answer[:200]!r}")
        conn.close()

    def _request(self, op: str, rng: random.Random, unique: str) -> tuple[str, str, dict[str, object], str]:
        if op == SAVE:
            body: dict[str, object] = {"name": f"m_{unique}", "content": memory_content(rng),
                                       "description": "A benchmark memory."}
            return "POST", "/v1/api/memories", body, self.stack.token
        if op == SEARCH:
            return "POST", "/v1/api/memories/search", {"query": rng.choice(QUERIES)}, self.stack.token
        messages = [{"role": "user", "content": rng.choice(QUERIES)}]
        return "POST", f"/v1/api/sessions/{self.stack.session_id}/turns", {"messages": messages}, self.stack.session_token


def per_second(done: Sequence[Done], op: str, seconds: float) -> float:
    return sum(1 for d in done if d.op == op and d.status in (200, 201)) / seconds


def p50_ms(done: Sequence[Done], op: str) -> float:
    values = [d.seconds * 1000 for d in done if d.op == op]
    return percentile(values, 50) if len(values) >= 2 else float("nan")
