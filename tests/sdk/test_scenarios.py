"""Both SDKs run the same scenarios against one live server, and between them cover every route."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from memoryd_sdk import MemorydConsole, MemorydServer

from api.openapi import build_openapi
from tests.sdk import scenarios

TYPESCRIPT = Path(__file__).resolve().parents[2] / "sdk" / "typescript"
UNDER_CI = os.environ.get("CI", "").lower() == "true"


def operations() -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in build_openapi()["paths"].items() for method in item}


def covered(requests: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The documented operations these (method, path) requests reached."""
    templates = [(method, path, re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", path) + "$"))
                 for method, path in operations()]
    return {(method, path) for sent_method, sent_path in requests for method, path, pattern in templates
            if method == sent_method and pattern.match(sent_path)}


def python_run(live_server) -> tuple[list[str], list[tuple[str, str]]]:
    caller = live_server.caller("py")
    sent: list[tuple[str, str]] = []
    hooks = {"request": [lambda request: sent.append((request.method, request.url.path))]}
    context = {"run": "py", "long_description": scenarios.LONG_DESCRIPTION, **caller}
    with httpx.Client(event_hooks=hooks) as user_client, httpx.Client(event_hooks=hooks) as admin_client:
        clients = {"server": MemorydServer(live_server.base_url, token=caller["token"], httpx_client=user_client),
                   "console": MemorydConsole(live_server.base_url, token=live_server.admin_token,
                                             httpx_client=admin_client)}
        failures = [failure for path in scenarios.SCENARIOS for failure in scenarios.run(path, clients, context)]
    return failures, sent


def typescript_run(live_server, built: Path) -> tuple[list[str], list[tuple[str, str]]]:
    caller = live_server.caller("ts")
    context = {"base_url": live_server.base_url, "admin_token": live_server.admin_token, "run": "ts",
               "long_description": scenarios.LONG_DESCRIPTION, **caller}
    done = subprocess.run(["node", "scripts/scenarios.mjs", *map(str, scenarios.SCENARIOS)], cwd=built,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MEMORYD_SCENARIO_CONTEXT": json.dumps(context)})
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout)
    return report["failures"], [tuple(request) for request in report["requests"]]


def node_toolchain() -> str | None:
    """Why the TypeScript suite cannot run here, or None if node and npm are installed."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not installed" if missing else None


def build_typescript_sdk() -> Path:
    """``npm ci`` and the build, once per test run however many workers ask (they wait on a lock)."""
    problem = node_toolchain()
    if problem:
        if UNDER_CI:
            pytest.fail(f"the TypeScript SDK suite must run under CI=true: {problem}", pytrace=False)
        pytest.skip(problem)
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
    stamp = TYPESCRIPT / "dist" / ".built-by"
    with open(TYPESCRIPT / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == run_id:
            return TYPESCRIPT
        for command in (["npm", "ci", "--no-audit", "--no-fund"], ["npm", "run", "build"]):
            done = subprocess.run(command, cwd=TYPESCRIPT, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
        stamp.write_text(run_id)
    return TYPESCRIPT


def test_both_sdks_pass_every_scenario_on_one_server_and_each_covers_every_route(live_server):
    failures, sent = python_run(live_server)
    assert failures == []
    assert operations() - covered(sent) == set(), "routes the Python SDK never called"
    failures, sent = typescript_run(live_server, build_typescript_sdk())
    assert failures == []
    assert operations() - covered(sent) == set(), "routes the TypeScript SDK never called"


def test_the_typescript_sdk_unit_tests_pass():
    done = subprocess.run(["npm", "test"], cwd=build_typescript_sdk(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"


def test_npm_pack_makes_a_package_that_installs_and_loads_both_ways(tmp_path):
    built = build_typescript_sdk()
    packed = subprocess.run(["npm", "pack", "--pack-destination", str(tmp_path)], cwd=built, capture_output=True,
                            text=True, timeout=300)
    assert packed.returncode == 0, packed.stderr
    tarball = tmp_path / packed.stdout.strip().splitlines()[-1]
    project = tmp_path / "app"
    project.mkdir()
    (project / "package.json").write_text('{"name": "app", "version": "1.0.0", "private": true}\n')
    installed = subprocess.run(["npm", "install", "--no-audit", "--no-fund", str(tarball)], cwd=project,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    check = ("import('@memoryd/sdk').then((esm) => { const cjs = require('@memoryd/sdk'); "
             "const alias = require('@memoryd/sdk/turnstone'); "
             "if (typeof esm.MemorydServer !== 'function' || typeof cjs.MemorydConsole !== 'function' "
             "|| typeof alias.TurnstoneServer !== 'function') process.exit(1); })")
    loaded = subprocess.run(["node", "-e", check], cwd=project, capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    assert (project / "node_modules" / "@memoryd" / "sdk" / "dist" / "esm" / "index.d.ts").exists()
    assert not (project / "node_modules" / "ai").exists()  # an optional peer: installed only when asked for
    ai = json.loads((built / "package.json").read_text())["devDependencies"]["ai"]
    installed = subprocess.run(["npm", "install", "--no-audit", "--no-fund", f"ai@{ai}"], cwd=project,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    check = ("import('@memoryd/sdk/ai-sdk').then((esm) => { const cjs = require('@memoryd/sdk/ai-sdk'); "
             "if (typeof esm.memorydMiddleware !== 'function' || typeof cjs.memorydTools !== 'function') process.exit(1); })")
    loaded = subprocess.run(["node", "-e", check], cwd=project, capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
