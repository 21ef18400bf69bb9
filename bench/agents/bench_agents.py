"""memoryd inside agent runtimes: ``memory_context`` over MCP's streamable HTTP, and the prompt hook's wall time.

* **memory_context**: the official MCP client calling ``memory_context`` on ``memoryd mcp --http`` (which
  calls memoryd over HTTP), beside the same turn asked of memoryd directly (``POST .../turns``, preview,
  placement tail) by one keep-alive client: p50/p95/p99 in ms and the MCP path's overhead as a ratio.
* **the hook**: ``python -m memoryd hook claude-code user-prompt-submit`` run as Claude Code runs it (a new
  process per prompt, the hook's JSON on standard input), beside the floor of any Python hook (an interpreter
  that imports ``json`` and ``urllib.request`` and exits) and beside ``python -m memoryd --help`` (what
  starting the whole CLI costs, which the hook's early dispatch avoids): wall time p50/p95; and against
  a memoryd that accepts the connection and never answers, where it gives up at its 1.5 s deadline.

Both against ``memoryd serve`` on a fresh SQLite file holding ``--memories`` memories in the session's envelope.

    .venv/bin/python bench/agents/bench_agents.py                 # 1,000 memories, 300 calls, 60 hook runs
    .venv/bin/python bench/agents/bench_agents.py --memories 10000
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "turns"))

import anyio  # noqa: E402
import httpx  # noqa: E402
import httpx2  # noqa: E402
from bench_turns import _free_port, _wait, percentiles, populate  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

QUERIES = ["how do we deploy", "what is the code style", "where are the runbooks", "who owns the billing service",
           "which database do we use", "how do we roll back a release"]


def row(label: str, samples: list[float], base: float | None = None) -> str:
    p50, p95, p99 = percentiles(samples)
    ratio = f"{p95 / base:.2f}x" if base else "1.00x"
    return f"| {label} | {len(samples)} | {p50:.2f} | {p95:.2f} | {p99:.2f} | {ratio} |"


class _Transport:
    def __init__(self, context):
        self.context = context

    async def __aenter__(self):
        return await self.context.__aenter__()

    async def __aexit__(self, *exc_info):
        return await self.context.__aexit__(*exc_info)


async def mcp_calls(url: str, token: str, calls: int) -> list[float]:
    samples = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(_Transport(streamable_http_client(url, http_client=http))) as client:
        for number in range(calls + 20):
            started = time.perf_counter()
            result = await client.call_tool("memory_context", {"query": QUERIES[number % len(QUERIES)]})
            elapsed = (time.perf_counter() - started) * 1000
            assert not result.is_error
            if number >= 20:  # warm-up
                samples.append(elapsed)
    return samples


def direct_calls(base: str, session_id: str, token: str, calls: int) -> list[float]:
    samples = []
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as client:
        for number in range(calls + 20):
            started = time.perf_counter()
            answer = client.post(f"{base}/v1/api/sessions/{session_id}/turns",
                                 json={"query": QUERIES[number % len(QUERIES)], "placement": "tail", "preview": True})
            elapsed = (time.perf_counter() - started) * 1000
            assert answer.status_code == 200
            if number >= 20:
                samples.append(elapsed)
    return samples


def wall(command: list[str], stdin: str, env: dict[str, str], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, cwd=ROOT)
        samples.append((time.perf_counter() - started) * 1000)
        assert done.returncode == 0, done.stderr
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1_000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--hook-runs", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        services, session, token, _ = populate(args.memories, Path(scratch))
        services.database.dispose()
        port, mcp_port = _free_port(), _free_port()
        env = {**os.environ, "MEMORYD_DATABASE_URL": f"sqlite:///{Path(scratch) / 'memoryd.db'}",
               "MEMORYD_PORT": str(port)}
        server = subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        mcp = subprocess.Popen([sys.executable, "-m", "memoryd", "mcp", "--http", "--port", str(mcp_port)],
                               env={**os.environ, "MEMORYD_URL": base}, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(port)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{mcp_port}/mcp").status_code == 401:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            direct = direct_calls(base, session.session_id, token, args.calls)
            over_mcp = anyio.run(mcp_calls, f"http://127.0.0.1:{mcp_port}/mcp", token, args.calls)
            hook_env = {**os.environ, "MEMORYD_URL": base, "MEMORYD_SESSION_TOKEN": token,
                        "MEMORYD_SESSION_ID": session.session_id}
            payload = json.dumps({"prompt": "how do we deploy", "session_id": "bench"})
            floor = wall([sys.executable, "-c", "import json, urllib.request"], "", hook_env, args.hook_runs)
            hooked = wall([sys.executable, "-m", "memoryd", "hook", "claude-code", "user-prompt-submit"], payload,
                          hook_env, args.hook_runs)
            hooked_lookup = wall([sys.executable, "-m", "memoryd", "hook", "claude-code", "user-prompt-submit"],
                                 payload, {k: v for k, v in hook_env.items() if k != "MEMORYD_SESSION_ID"},
                                 args.hook_runs)
            whole_cli = wall([sys.executable, "-m", "memoryd", "--help"], "", hook_env, args.hook_runs)
            with socket.socket() as silent:  # accepts connections and never answers: the fail-open deadline
                silent.bind(("127.0.0.1", 0))
                silent.listen(64)
                silent_env = hook_env | {"MEMORYD_URL": f"http://127.0.0.1:{silent.getsockname()[1]}"}
                abandoned = wall([sys.executable, "-m", "memoryd", "hook", "claude-code", "user-prompt-submit"],
                                 payload, silent_env, max(5, args.hook_runs // 6))
        finally:
            for process in (mcp, server):
                process.terminate()
                process.wait(10)
    print(f"python {sys.version.split()[0]}, nproc {os.cpu_count()}, {args.memories:,} memories in the envelope\n")
    print("| path | calls | p50 ms | p95 ms | p99 ms | p95 / direct |\n|---|---|---|---|---|---|")
    base_p95 = percentiles(direct)[1]
    print(row("POST /turns directly (preview, tail)", direct))
    print(row("MCP memory_context over streamable HTTP", over_mcp, base_p95))
    print("\n| process (wall time, a new interpreter each) | runs | p50 ms | p95 ms | p99 ms | p95 / floor |")
    print("|---|---|---|---|---|---|")
    floor_p95 = percentiles(floor)[1]
    print(row("floor: python -c 'import json, urllib.request'", floor))
    print(row("memoryd hook claude-code user-prompt-submit", hooked, floor_p95))
    print(row("the same, finding its session from the token", hooked_lookup, floor_p95))
    print(row("python -m memoryd --help (the whole CLI)", whole_cli, floor_p95))
    print(row("the hook against a memoryd that never answers (1.5 s deadline)", abandoned, floor_p95))


if __name__ == "__main__":
    main()
