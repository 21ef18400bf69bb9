"""Capacity through outages: production memoryd under a mixed load while Redis, the database and processes fail.

The long form of tests/test_chaos.py. gunicorn with two API processes, two ``memoryd worker``s, a
PostgreSQL cluster and a ``redis-server`` of the bench's own (never the machine's shared ones), and
``--clients`` SDK clients (8) each saving a memory, reading it back and searching, in a loop, through
phases of ``--phase-seconds`` (15):

    normal            nothing broken
    redis down        redis-server stopped for the whole phase, started at its end
    database restart  PostgreSQL stopped for ``--database-down`` seconds (6) at the phase's start, then started
    process killed    an API process and a worker SIGKILLed at the phase's start (gunicorn and the bench restart them)
    recovered         nothing broken

It prints, per phase, operations per second (calls the SDK returned), their p50 latency, the calls the
SDK raised to its caller, and the raw 5xx answers (retried or not), then whether every acknowledged save
is in the log exactly once and whether ``memoryd audit verify`` and ``memoryd projections verify`` pass.

The memoryd measured is the one first on ``PYTHONPATH`` (its processes run from a temporary directory),
and so is the SDK the clients use. From the repository root:

    PYTHONPATH=.:sdk/python nice -n 10 .venv/bin/python bench/chaos/bench_outages.py
    PYTHONPATH=../before:../before/sdk/python nice -n 10 .venv/bin/python bench/chaos/bench_outages.py

The API starts as ``gunicorn -w 2``; when the documented form changes, give its options in
``MEMORYD_CHAOS_GUNICORN`` (e.g. ``MEMORYD_CHAOS_GUNICORN="-w 2 -k gthread --threads 8"``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # this tree's harness; memoryd itself runs from PYTHONPATH

from common import environment, print_header, print_results  # noqa: E402

from tests.chaos_deployment import GUNICORN_OPTIONS, Deployment  # noqa: E402
from tests.chaos_load import TABLE_HEADER, Load  # noqa: E402
from tests.own_postgres import OwnPostgres  # noqa: E402


def measured_memoryd(deployment: Deployment) -> str:
    """Where the memoryd the deployment runs comes from, and its git revision."""
    found = subprocess.run([sys.executable, "-c", "import memoryd; print(memoryd.__file__)"], env=deployment.env,
                           cwd=deployment.root, capture_output=True, text=True, check=True).stdout.strip()
    checkout = Path(found).parent.parent
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    return f"memoryd measured: {checkout} (git {head or '?'}), API: gunicorn {GUNICORN_OPTIONS}, 2 workers"


def verdict(deployment: Deployment, *command: str) -> str:
    done = subprocess.run([sys.executable, "-m", "memoryd", *command], env=deployment.env, cwd=deployment.root,
                          capture_output=True, text=True, timeout=600)
    return f"memoryd {' '.join(command)}: " + ("passed" if done.returncode == 0 else
                                                f"FAILED ({done.returncode}): {(done.stdout + done.stderr)[-300:]}")


def run(arguments: argparse.Namespace) -> None:
    postgres = OwnPostgres()
    deployment = Deployment(postgres)
    try:
        deployment.start()
        print_header(__file__, None, [*environment(), measured_memoryd(deployment),
                                      f"{arguments.clients} clients, phases of {arguments.phase_seconds:.0f} s, "
                                      f"database down {arguments.database_down:.0f} s"])
        load = Load(deployment.base_url, deployment.token, arguments.clients)
        load.start()
        phases = []

        def phase(name: str, breaking: str = "", mending: str = "") -> None:
            start = time.monotonic()
            if breaking == "redis":
                deployment.stop_redis()
            elif breaking == "database":
                deployment.restart_database(arguments.database_down)
            elif breaking == "processes":
                deployment.kill_api_process()
                deployment.kill_worker()
            time.sleep(max(0.0, start + arguments.phase_seconds - time.monotonic()))
            if mending == "redis":
                deployment.start_redis()
            phases.append(load.figures(name, start, time.monotonic()))

        try:
            time.sleep(arguments.phase_seconds / 3)  # warm up: connections, the index, the first projections
            phase("normal")
            phase("redis down", breaking="redis", mending="redis")
            phase("database restart", breaking="database")
            phase("process killed", breaking="processes")
            phase("recovered")
        finally:
            load.stop()
        saved = deployment.saves_by_name()
        wrong = sorted(name for name in load.acknowledged if saved[name] != 1)
        twice = sorted(name for name in load.attempted if saved[name] > 1)
        print_results([TABLE_HEADER, *(figures.row() for figures in phases)], [
            f"saves acknowledged {len(load.acknowledged)}, of them not exactly once in the log: {len(wrong)} {wrong[:5]}",
            f"saves applied more than once (acknowledged or not): {len(twice)} {twice[:5]}",
            *(f"client error: {error}" for _, error in load.errors[:5]),
            verdict(deployment, "audit", "verify"),
            verdict(deployment, "projections", "verify"),
        ])
    finally:
        deployment.close()
        postgres.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--phase-seconds", type=float, default=15.0)
    parser.add_argument("--database-down", type=float, default=6.0)
    if os.environ.get("PYTHONPATH") is None:
        parser.error("set PYTHONPATH to the memoryd and SDK to measure (see the docstring)")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
