"""Projection lag under a steady save load: one API process and two workers vs in-process.

Two stacks run side by side on PostgreSQL, each in a fresh schema of its own:

* ``workers``: one API process, ``gunicorn -w 1 --threads 4 api.wsgi:application``,
  with ``MEMORYD_REDIS_URL`` (the ``RedisDispatcher``: each append enqueues a
  catch-up job unless one is already waiting) and two ``memoryd worker``
  processes on a queue of the bench's own. ``MEMORYD_WRITE_WAIT_MS=0``, so a
  save answers right after its append and never waits for its projection.
* ``in-process``: the same gunicorn command without Redis
  (``InProcessDispatcher``): the API projects before it answers, so the lag
  after the response is 0 by construction.

A client sends saves over HTTP (a new memory each, ~80 words) at a steady
rate, e.g. 50/s and 150/s, open loop: a save is sent when it is due by one
of 4 client threads (at most 4 in flight; a due save waits only when all 4
are busy). ``--api-threads 1`` runs the plain sync worker (``gunicorn -w 1``),
which serves one request at a time. For each rate the two stacks take turns
in segments (default 5 s; the order rotates per rate) until each has run
``--duration`` seconds.

Lag (workers stack): a separate thread polls ``projection_checkpoints`` for
``structured_memories`` on its own connection every ~2 ms and records when
each checkpoint value was first seen (time taken after the row came back).
A save's lag is the time from its response (which carries
``X-Memory-Position``) to the first poll that saw the checkpoint at or past
that position; 0 when it was already covered. Resolution: the poll interval
plus one query round trip.

Write latency (both stacks): time from sending the request to reading the
whole response, so the cost of projecting in-process is visible beside the
workers stack's lag.

Run from the repo root::

    .venv/bin/python bench/bench_projection_lag.py                      # 50/s and 150/s, 20 s each
    .venv/bin/python bench/bench_projection_lag.py --rates 50 --duration 10

PostgreSQL: ``MEMORYD_BENCH_POSTGRES_URL`` (default
``postgresql+psycopg://postgres@127.0.0.1:5432/test``); Redis:
``MEMORYD_BENCH_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). Fresh
schemas and a queue of the bench's own; schemas and queue keys are removed
afterwards and every subprocess is terminated, also on error or Ctrl-C.
"""

from __future__ import annotations

import argparse
import bisect
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg
from common import (
    APPLICATION_NAME,
    POSTGRES_URL,
    SEED,
    environment,
    memory_content,
    percentile,
    postgres_schema,
    print_header,
    print_results,
    server_version,
)
from redis import Redis
from rq import Queue, Worker
from stacks import base_env, free_port, log_folder, spawn, stop, wait_serving

from memoryd.bootstrap import build_services
from memoryd.kernel.config import Config, StorageSettings
from memoryd.storage import migrate

REDIS_URL = os.environ.get("MEMORYD_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PROJECTION = "structured_memories"
WORKERS, IN_PROCESS = "workers", "in-process"
MODES = (WORKERS, IN_PROCESS)
POLL_INTERVAL = 0.002
WARMUP_SECONDS = 2.0
DRAIN_TIMEOUT = 30.0


@dataclass
class Save:
    mode: str
    rate: int
    sent: float
    answered: float
    position: int
    pending: bool


@dataclass
class Stack:
    mode: str
    schema: str
    url: str  # SQLAlchemy URL with the schema's search_path
    port: int
    token: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


class CheckpointPoller(threading.Thread):
    """Records (time first seen, checkpoint) each time the checkpoint moves."""

    def __init__(self, schema: str) -> None:
        super().__init__(name="checkpoint-poller", daemon=True)
        conninfo = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://", 1)
        self.conn = psycopg.connect(conninfo, autocommit=True, application_name=APPLICATION_NAME,
                                    options=f"-csearch_path={schema}")
        self.times: list[float] = []
        self.positions: list[int] = []
        self.polls = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        query = "SELECT position FROM projection_checkpoints WHERE name = %s"
        last = -1
        next_poll = time.perf_counter()
        try:
            while not self.stopped.is_set():
                row = self.conn.execute(query, (PROJECTION,)).fetchone()
                seen = time.perf_counter()
                self.polls += 1
                position = int(row[0]) if row else 0
                if position > last:
                    self.times.append(seen)
                    self.positions.append(position)
                    last = position
                next_poll += POLL_INTERVAL
                delay = next_poll - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                else:
                    next_poll = time.perf_counter()
        finally:
            self.conn.close()

    def covered_at(self, position: int) -> float | None:
        index = bisect.bisect_left(self.positions, position)
        return self.times[index] if index < len(self.times) else None

    def reached(self) -> int:
        return self.positions[-1] if self.positions else 0


class Client:
    """Sends saves at scheduled times from a few threads (a new connection per request)."""

    def __init__(self, threads: int) -> None:
        self.rng = random.Random(SEED)
        self.counter = 0
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="client")

    def save(self, stack: Stack, rate: int, body: bytes) -> Save:
        headers = {"Authorization": f"Bearer {stack.token}", "Content-Type": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=30)
        sent = time.perf_counter()
        try:
            conn.request("POST", "/v1/api/memories", body, headers)
            response = conn.getresponse()
            payload = response.read()
            answered = time.perf_counter()
        finally:
            conn.close()
        if response.status != 201:
            raise RuntimeError(f"{stack.mode}: save answered {response.status}: {payload[:300]!r}")
        return Save(stack.mode, rate, sent, answered, int(response.getheader("X-Memory-Position")),
                    response.getheader("X-Projection-Pending") == "true")

    def steady(self, stack: Stack, rate: int, seconds: float) -> tuple[list[Save], float]:
        """A save due every 1/rate s for ``seconds`` (open loop: a due save waits only for a free client
        thread). Returns the saves and the wall time until the last one was answered."""
        futures = []
        start = time.perf_counter()
        for index in range(round(rate * seconds)):
            self.counter += 1
            body = json.dumps({"name": f"lag_{self.counter:07d}", "content": memory_content(self.rng),
                               "description": "A benchmark memory for projection lag."}).encode()
            delay = start + index / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(self.pool.submit(self.save, stack, rate, body))
        saves = [future.result() for future in futures]
        return saves, max(time.perf_counter() - start, seconds)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _prepare(url: str) -> tuple[str, str]:
    """Migrate the schema and create a user with a read/write token; returns (token, server version)."""
    services = build_services(Config(storage=StorageSettings(database_url=url)))
    try:
        migrate.upgrade(services.database)
        user = services.directory.create_user("bench")
        _, token = services.directory.create_token(user, ["read", "write"], [])
        return token, server_version(services.database)
    finally:
        services.database.dispose()


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        value = values[0] if values else float("nan")
        return value, value, value
    return percentile(values, 50), percentile(values, 95), max(values)


def environment_lines() -> list[str]:
    import gunicorn
    import redis
    import rq

    return environment(f"gunicorn {gunicorn.__version__}", f"redis-py {redis.__version__}", f"rq {rq.__version__}")


_RQ_DONE = re.compile(r"Successfully completed .* job in (\d+):(\d+):([\d.]+)s")


def _job_durations(logs: Path) -> dict[str, list[float]]:
    """Per worker log, the duration in ms of every job RQ reports as completed (its own timing)."""
    found = {}
    for path in sorted(logs.glob("worker-*.log")):
        found[path.name] = [(int(h) * 3600 + int(m) * 60 + float(s)) * 1000
                            for h, m, s in _RQ_DONE.findall(path.read_text(errors="replace"))]
    return found


def run(args: argparse.Namespace, notes: list[str]) -> list[str]:
    rates = [int(rate) for rate in args.rates.split(",")]
    segments = max(1, round(args.duration / args.segment))
    queue_name = f"memoryd-bench-{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    redis.ping()
    with log_folder("memoryd-bench-lag-", notes, args.keep_logs) as logs:
        return _run_stacks(args, notes, rates, segments, queue_name, redis, logs)


def _run_stacks(args: argparse.Namespace, notes: list[str], rates: list[int], segments: int, queue_name: str,
                redis: Redis, logs: Path) -> list[str]:
    gunicorn = [sys.executable, "-m", "gunicorn", "-w", "1", "--log-level", "warning"]
    if args.api_threads > 1:
        gunicorn += ["--threads", str(args.api_threads)]  # gthread: still one API process
    processes: list[subprocess.Popen[bytes]] = []
    with ExitStack() as cleanup:  # unwinds last-in first-out: client, poller, processes, schemas, Redis
        cleanup.callback(redis.close)
        cleanup.callback(_clean_redis, redis, queue_name)
        stacks: dict[str, Stack] = {}
        for mode in MODES:
            # The stacks' own sessions (gunicorn, workers) are memoryd's: their URL carries no bench application_name.
            schema, url = cleanup.enter_context(postgres_schema("w" if mode == WORKERS else "p", tag_sessions=False))
            token, server = _prepare(url)
            stacks[mode] = Stack(mode, schema, url, free_port(), token)
        notes.append(f"{server}; redis-server {redis.info('server')['redis_version']} at {REDIS_URL}, queue {queue_name}")
        cleanup.callback(stop, processes)  # before the schemas are dropped

        workers_env = {**base_env(), "MEMORYD_DATABASE_URL": stacks[WORKERS].url, "MEMORYD_REDIS_URL": REDIS_URL,
                       "MEMORYD_QUEUE": queue_name, "MEMORYD_WRITE_WAIT_MS": str(args.write_wait_ms)}
        if args.catch_up_interval_ms:
            workers_env["MEMORYD_CATCH_UP_INTERVAL_MS"] = str(args.catch_up_interval_ms)
        in_process_env = {**base_env(), "MEMORYD_DATABASE_URL": stacks[IN_PROCESS].url,
                          "MEMORYD_WRITE_WAIT_MS": str(args.write_wait_ms)}
        for mode, env in ((WORKERS, workers_env), (IN_PROCESS, in_process_env)):
            stack = stacks[mode]
            process = spawn([*gunicorn, "-b", f"127.0.0.1:{stack.port}", "api.wsgi:application"], env,
                             logs / f"gunicorn-{mode}.log")
            processes.append(process)
            stack.processes.append(process)
        for index in range(args.workers):
            process = spawn([sys.executable, "-m", "memoryd", "worker"], workers_env, logs / f"worker-{index}.log")
            processes.append(process)
            stacks[WORKERS].processes.append(process)
        for stack in stacks.values():
            wait_serving(stack.mode, stack.port, stack.processes, logs, 30)
        _wait_for_workers(redis, queue_name, args.workers, stacks[WORKERS], logs)

        poller = CheckpointPoller(stacks[WORKERS].schema)
        poller.start()

        def stop_poller() -> None:
            poller.stopped.set()
            poller.join(5)

        cleanup.callback(stop_poller)
        client = Client(args.client_threads)
        cleanup.callback(client.close)
        for mode in MODES:  # warm-up (never counted): imports, connections, caches
            client.steady(stacks[mode], rates[0], WARMUP_SECONDS)
        jobs_before = {name: len(done) for name, done in _job_durations(logs).items()}

        saves: list[Save] = []
        wall: dict[tuple[str, int], float] = {}
        started = time.perf_counter()
        for number, rate in enumerate(rates):
            order = MODES if number % 2 == 0 else MODES[::-1]
            for _ in range(segments):
                for mode in order:
                    done, seconds = client.steady(stacks[mode], rate, args.segment)
                    saves.extend(done)
                    wall[(mode, rate)] = wall.get((mode, rate), 0.0) + seconds
        notes.append(f"side-by-side run took {time.perf_counter() - started:.1f} s")

        last = max(save.position for save in saves if save.mode == WORKERS)
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while poller.reached() < last and time.monotonic() < deadline:
            time.sleep(0.05)
        stop_poller()
        time.sleep(0.5)  # let the workers' last log lines land
        jobs = [ms for name, done in _job_durations(logs).items() for ms in done[jobs_before.get(name, 0):]]
        j50, j95, jmax = _percentiles(jobs)
        notes.append(f"checkpoint polls: {poller.polls:,} (every {POLL_INTERVAL * 1000:.0f} ms); catch-up jobs the "
                     f"workers ran in the measured part: {len(jobs):,} for "
                     f"{sum(1 for s in saves if s.mode == WORKERS):,} workers-stack saves; RQ's own job time "
                     f"p50 {j50:.1f} ms, p95 {j95:.1f} ms, max {jmax:.1f} ms")
        lines, table_notes = _table(saves, wall, poller, rates)
        notes.extend(table_notes)
        return lines


def _wait_for_workers(redis: Redis, queue_name: str, count: int, stack: Stack, logs: Path, timeout: float = 30) -> None:
    queue = Queue(queue_name, connection=redis)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(process.poll() is not None for process in stack.processes):
            raise RuntimeError(f"a workers-stack process exited early; logs in {logs}")
        if Worker.count(queue=queue) >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{count} workers did not register on {queue_name} within {timeout:.0f} s; logs in {logs}")


def _clean_redis(redis: Redis, queue_name: str) -> None:
    from workers.redis_dispatch import pending_key

    try:
        Queue(queue_name, connection=redis).delete(delete_jobs=True)
        redis.delete(pending_key(queue_name))
    except Exception as error:  # noqa: BLE001 - cleanup must not hide the run's own error
        print(f"# could not clean the bench queue {queue_name} in Redis: {error}", file=sys.stderr)


def _table(saves: list[Save], wall: dict[tuple[str, int], float], poller: CheckpointPoller,
           rates: list[int]) -> tuple[list[str], list[str]]:
    """The results table, plus notes on saves whose projection was seen before their response."""
    notes = []
    lines = [
        ("| stack | offered saves/s | saves | achieved saves/s | write p50 ms | write p95 ms | lag p50 ms | lag p95 ms "
         "| lag max ms | covered before response | answered pending |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rate in rates:
        for mode in MODES:
            mine = [save for save in saves if save.mode == mode and save.rate == rate]
            latency = [(save.answered - save.sent) * 1000 for save in mine]
            w50, w95, _ = _percentiles(latency)
            pending = sum(save.pending for save in mine)
            if mode == WORKERS:
                lags, early, missing, after = [], 0, 0, []
                for save in mine:
                    covered = poller.covered_at(save.position)
                    if covered is None:
                        missing += 1
                        continue
                    lags.append(max(0.0, covered - save.answered) * 1000)
                    early += covered <= save.answered
                    if covered <= save.answered:
                        after.append((save.answered - covered) * 1000)
                if after:
                    a50, a95, _ = _percentiles(after)
                    notes.append(f"workers stack at {rate}/s: {len(after)} saves were seen projected before their "
                                 f"response arrived; from that poll to the response p50 {a50:.1f} ms, p95 {a95:.1f} ms")
                l50, l95, lmax = _percentiles(lags)
                lag_cells = f"{l50:.1f} | {l95:.1f} | {lmax:.1f} | {early}/{len(mine)}"
                if missing:
                    lag_cells += f" ({missing} never covered within {DRAIN_TIMEOUT:.0f} s)"
            else:
                lag_cells = "0 (by construction) | 0 | 0 | all"
            lines.append(f"| {mode} | {rate} | {len(mine)} | {len(mine) / wall[(mode, rate)]:.1f} | {w50:.2f} | {w95:.2f} | "
                         f"{lag_cells} | {pending}/{len(mine)} |")
    return lines, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,150", help="offered saves/s, comma-separated (default 50,150)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per rate and stack (default 20)")
    parser.add_argument("--segment", type=float, default=5.0, help="seconds per turn before the other stack runs")
    parser.add_argument("--api-threads", type=int, default=4,
                        help="gunicorn --threads of the one API process (default 4; 1 = the plain sync worker)")
    parser.add_argument("--client-threads", type=int, default=4, help="requests in flight at most (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="memoryd worker processes (default 2)")
    parser.add_argument("--catch-up-interval-ms", type=int, default=0,
                        help="the workers' periodic catch-up (default: memoryd's own, 1000 ms)")
    parser.add_argument("--write-wait-ms", type=int, default=0,
                        help="MEMORYD_WRITE_WAIT_MS of both API processes (default 0: writes never wait for projection)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the gunicorn and worker logs (path printed)")
    args = parser.parse_args(argv)

    def terminated(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # unwinds through the cleanup: subprocesses, schemas, queue

    signal.signal(signal.SIGTERM, terminated)
    print_header(__file__, argv, environment_lines())
    server = f"gunicorn -w 1 --threads {args.api_threads} (gthread)" if args.api_threads > 1 else "gunicorn -w 1 (sync)"
    print(f"# one API process per stack: {server}; workers stack: {args.workers} memoryd worker processes, "
          f"MEMORYD_WRITE_WAIT_MS={args.write_wait_ms}, catch-up interval {args.catch_up_interval_ms or 'default'} ms; "
          f"segments of {args.segment:g} s alternating stacks, {args.duration:g} s per rate and stack, warm-up "
          f"{WARMUP_SECONDS:g} s per stack; open-loop client, at most {args.client_threads} requests in flight")
    notes: list[str] = []
    print_results(run(args, notes), notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
