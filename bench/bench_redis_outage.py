"""Mixed-load capacity through a Redis outage: before, during a stop of ``--outage`` seconds, and after.

One production stack (``gunicorn <--gunicorn> api.wsgi:application`` and ``--workers`` ``memoryd
worker``s) on a fresh PostgreSQL schema, its queue on a ``redis-server`` the bench starts on a free port
(never a shared one). ``--clients`` closed-loop clients send a mix of saves, searches and turns (weights
``--mix``, default 2:2:1) for the whole run; the bench kills redis-server ``--outage`` seconds after a
warm-up and a window of the same length, and starts it again on the same port after the outage. Reported
per window: each operation's answers per second, p50 and errors (non-2xx), and the capacity (all
operations per second) against the window before the stop; ``--rounds`` runs, medians.

Run from the repo root::

    .venv/bin/python bench/bench_redis_outage.py                 # 3 rounds, 15 s windows, 8 clients

PostgreSQL: ``MEMORYD_BENCH_POSTGRES_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import environment, postgres_schema, print_header, print_results
from stacks import (
    SAVE,
    SEARCH,
    TURN,
    Done,
    Load,
    free_port,
    log_folder,
    p50_ms,
    per_second,
    prepare,
    production,
    stop,
    wait_healthy,
)

OPS = (SAVE, SEARCH, TURN)
WINDOWS = ("before", "Redis down", "after")
WARMUP_SECONDS = 5.0


def start_redis(port: int, logs: Path) -> subprocess.Popen[bytes]:
    with (logs / "redis.log").open("ab") as log:
        process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no"], stdout=log, stderr=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
            return process
        time.sleep(0.05)
    raise RuntimeError(f"redis-server did not answer on port {port}")


def stop_redis(started: list[subprocess.Popen[bytes]]) -> None:
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def one_round(args: argparse.Namespace, logs: Path, number: int) -> dict[str, list[Done]]:
    port = free_port()
    mix = dict(zip(OPS, (int(weight) for weight in args.mix.split(":"))))
    with ExitStack() as cleanup:
        redis = [start_redis(port, logs)]
        cleanup.callback(stop_redis, redis)
        _, url = cleanup.enter_context(postgres_schema(f"out{number}", tag_sessions=False))
        stack = production("production", url, prepare(url), logs, f"redis://127.0.0.1:{port}/0", f"outage-{number}",
                           shlex.split(args.gunicorn), args.workers)
        cleanup.callback(stop, stack.processes)
        wait_healthy(stack, logs)
        load = Load(stack, args.clients, mix, f"r{number}").start()
        cleanup.callback(load.stop)
        time.sleep(WARMUP_SECONDS)
        marks = [time.perf_counter()]
        time.sleep(args.outage)
        marks.append(time.perf_counter())
        stop_redis(redis)
        time.sleep(args.outage)
        marks.append(time.perf_counter())
        redis.append(start_redis(port, logs))
        time.sleep(args.outage)
        marks.append(time.perf_counter())
        done = load.stop()
    return {window: [d for d in done if marks[i] <= d.sent and d.sent + d.seconds < marks[i + 1]]
            for i, window in enumerate(WINDOWS)}


def run(args: argparse.Namespace, notes: list[str], logs: Path) -> list[str]:
    rounds = [one_round(args, logs, number) for number in range(args.rounds)]
    lines = ["| window | saves/s | searches/s | turns/s | all/s | of before | save p50 ms | search p50 ms | turn p50 ms "
             "| errors |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    before = statistics.median(sum(per_second(r["before"], op, args.outage) for op in OPS) for r in rounds)
    for window in WINDOWS:
        rates = {op: statistics.median(per_second(r[window], op, args.outage) for r in rounds) for op in OPS}
        total = [sum(per_second(r[window], op, args.outage) for op in OPS) for r in rounds]
        p50s = [statistics.median(p50_ms(r[window], op) for r in rounds) for op in OPS]
        errors = sum(1 for r in rounds for d in r[window] if d.status not in (200, 201))
        lines.append(f"| {window} | {rates[SAVE]:.1f} | {rates[SEARCH]:.1f} | {rates[TURN]:.1f} "
                     f"| {statistics.median(total):.1f} | {statistics.median(total) / before:.0%} "
                     f"| {p50s[0]:.1f} | {p50s[1]:.1f} | {p50s[2]:.1f} | {errors} |")
        if len(rounds) > 1:
            notes.append(f"{window}: all/s per round " + ", ".join(f"{value:.1f}" for value in total))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--outage", type=float, default=15.0, help="seconds of each window (default 15)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--mix", default="2:2:1", help="weights of saves:searches:turns (default 2:2:1)")
    parser.add_argument("--gunicorn", default="-w 2 -k gthread --threads 8", help="gunicorn options (the README's)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if shutil.which("redis-server") is None:
        parser.error("needs redis-server on PATH")

    def terminated(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    print_header(__file__, argv, environment())
    print(f"# gunicorn {args.gunicorn} + {args.workers} memoryd worker(s) on PostgreSQL, a redis-server of the bench's "
          f"own; {args.clients} clients, mix {args.mix} (saves:searches:turns), windows of {args.outage:g} s, "
          f"{args.rounds} rounds")
    notes: list[str] = []
    with log_folder("memoryd-bench-outage-", notes) as logs:
        lines = run(args, notes, logs)
    print_results(lines, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
