"""Production throughput: gunicorn and two workers on PostgreSQL and Redis beside the embedded mode.

Stacks, each on a fresh database of its own, all started at once and measured in turns:

* ``production``: the README's production section, ``gunicorn <--gunicorn> api.wsgi:application``
  with ``MEMORYD_REDIS_URL`` (a queue of the bench's own) and ``--workers`` ``memoryd worker``s.
* ``embedded-postgres`` / ``embedded-sqlite``: ``memoryd serve`` (waitress, 8 threads, projections in
  process) on a PostgreSQL schema, or on an SQLite file (the embedded default).

``--clients`` threads send requests back to back (closed loop), each on a keep-alive connection:
saves (a new ~80-word memory each), then searches, then recorded turns, ``--seconds`` each per stack,
the stacks' order rotating per round; ``--rounds`` rounds, medians reported. Every stack first takes
300 saves (its memories for searches and turns, and the warm-up).

Run from the repo root::

    .venv/bin/python bench/bench_production.py                         # 5 rounds of 5 s, 8 clients
    .venv/bin/python bench/bench_production.py --gunicorn "-w 2" --rounds 1

PostgreSQL: ``MEMORYD_BENCH_POSTGRES_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``),
fresh schemas dropped afterwards; Redis: ``MEMORYD_BENCH_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``),
the queue's keys removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import statistics
import sys
import uuid
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import environment, postgres_schema, print_header, print_results
from redis import Redis
from rq import Queue
from stacks import (
    SAVE,
    SEARCH,
    TURN,
    Load,
    Stack,
    embedded,
    log_folder,
    p50_ms,
    per_second,
    prepare,
    production,
    stop,
    wait_healthy,
)

from workers.redis_dispatch import pending_key

REDIS_URL = os.environ.get("MEMORYD_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PRODUCTION, EMBEDDED_PG, EMBEDDED_SQLITE = "production", "embedded-postgres", "embedded-sqlite"
OPS = (SAVE, SEARCH, TURN)
SEED_SAVES = 300


def run(args: argparse.Namespace, notes: list[str], logs: Path) -> list[str]:
    queue = f"memoryd-bench-{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    with ExitStack() as cleanup:
        cleanup.callback(redis.close)
        cleanup.callback(_clean_redis, redis, queue)
        stacks: list[Stack] = []
        cleanup.callback(lambda: stop([p for stack in stacks for p in stack.processes]))  # before schemas go
        for name in [PRODUCTION, *args.embedded]:
            if name == EMBEDDED_SQLITE:
                url = f"sqlite:///{logs / 'embedded.db'}"
            else:
                _, url = cleanup.enter_context(postgres_schema(name[:4], tag_sessions=False))
            credentials = prepare(url)
            stack = production(name, url, credentials, logs, REDIS_URL, queue, shlex.split(args.gunicorn), args.workers) \
                if name == PRODUCTION else embedded(name, url, credentials, logs)
            stacks.append(stack)
        for stack in stacks:
            wait_healthy(stack, logs)
        for stack in stacks:
            Load(stack, args.clients, {SAVE: 1}, "seed").run_until(SEED_SAVES)  # warm-up, and memories to find
        results: dict[tuple[str, str], list[tuple[float, float, int, int]]] = {}
        for round_number in range(args.rounds):
            order = stacks[round_number % len(stacks):] + stacks[:round_number % len(stacks)]
            for op in OPS:
                for stack in order:
                    load = Load(stack, args.clients, {op: 1}, f"r{round_number}{op}")
                    done = load.run_for(args.seconds)
                    if load.errors:
                        notes.append(f"{stack.name} {op}: {len(load.errors)} errors, first: {load.errors[0]}")
                    results.setdefault((stack.name, op), []).append(
                        (per_second(done, op, args.seconds), p50_ms(done, op), sum(d.pending for d in done), len(done)))
        return _table(stacks, results)


def _table(stacks: list[Stack], results: dict[tuple[str, str], list[tuple[float, float, int, int]]]) -> list[str]:
    lines = ["| stack | op | per s (median) | range | p50 ms (median) | answered pending | production / this |",
             "|---|---|---:|---|---:|---:|---:|"]
    for op in OPS:
        ours = statistics.median(rate for rate, *_ in results[(PRODUCTION, op)])
        for stack in stacks:
            rows = results[(stack.name, op)]
            rates = [rate for rate, *_ in rows]
            median = statistics.median(rates)
            pending = f"{sum(r[2] for r in rows)}/{sum(r[3] for r in rows)}" if op == SAVE else ""
            ratio = f"{ours / median:.2f}" if stack.name != PRODUCTION else ""
            lines.append(f"| {stack.name} | {op} | {median:.1f} | {min(rates):.1f}-{max(rates):.1f} "
                         f"| {statistics.median(r[1] for r in rows):.1f} | {pending} | {ratio} |")
    return lines


def _clean_redis(redis: Redis, queue: str) -> None:
    try:
        Queue(queue, connection=redis).delete(delete_jobs=True)
        redis.delete(pending_key(queue))
    except Exception as error:  # noqa: BLE001 - cleanup must not hide the run's own error
        print(f"# could not clean the bench queue {queue}: {error}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0, help="per operation, stack and round (default 5)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent closed-loop clients (default 8)")
    parser.add_argument("--gunicorn", default="-w 2 -k gthread --threads 8",
                        help="the production stack's gunicorn options (default: the README's)")
    parser.add_argument("--workers", type=int, default=2, help="memoryd worker processes (default 2)")
    parser.add_argument("--embedded", default=f"{EMBEDDED_SQLITE},{EMBEDDED_PG}",
                        help=f"embedded stacks beside it, comma-separated: {EMBEDDED_SQLITE}, {EMBEDDED_PG}")
    parser.add_argument("--keep-logs", action="store_true", help="keep the servers' logs (path printed)")
    args = parser.parse_args(argv)
    args.embedded = [name for name in args.embedded.split(",") if name]

    def terminated(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # unwinds through the cleanup: subprocesses, schemas, queue

    signal.signal(signal.SIGTERM, terminated)
    import gunicorn

    print_header(__file__, argv, environment(f"gunicorn {gunicorn.__version__}"))
    print(f"# production: gunicorn {args.gunicorn} + {args.workers} memoryd worker(s), Redis {REDIS_URL}; "
          f"{args.clients} closed-loop clients, {args.seconds:g} s per operation and stack, {args.rounds} rounds")
    notes: list[str] = []
    with log_folder("memoryd-bench-production-", notes, args.keep_logs) as logs:
        lines = run(args, notes, logs)
    print_results(lines, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
