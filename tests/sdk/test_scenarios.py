"""Both SDKs run the same scenarios against one live server, and between them cover every route."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
from memoryd_sdk import MemorydConsole, MemorydServer

from api.openapi import build_openapi
from tests.helpers import LiveServer, build_typescript_sdk
from tests.sdk import scenarios


def operations() -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in build_openapi()["paths"].items() for method in item}


def covered(requests: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The documented operations these (method, path) requests reached."""
    templates = [(method, path, re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", path) + "$"))
                 for method, path in operations()]
    return {(method, path) for sent_method, sent_path in requests for method, path, pattern in templates
            if method == sent_method and pattern.match(sent_path)}


def python_run(live_server: LiveServer) -> tuple[list[str], list[tuple[str, str]]]:
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


def typescript_run(live_server: LiveServer, built: Path) -> tuple[list[str], list[tuple[str, str]]]:
    caller = live_server.caller("ts")
    context = {"base_url": live_server.base_url, "admin_token": live_server.admin_token, "run": "ts",
               "long_description": scenarios.LONG_DESCRIPTION, **caller}
    done = subprocess.run(["node", "scripts/scenarios.mjs", *map(str, scenarios.SCENARIOS)], cwd=built,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MEMORYD_SCENARIO_CONTEXT": json.dumps(context)})
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report = json.loads(done.stdout)
    return report["failures"], [tuple(request) for request in report["requests"]]


def test_both_sdks_pass_every_scenario_on_one_server_and_each_covers_every_route(live_server: LiveServer) -> None:
    failures, sent = python_run(live_server)
    assert failures == []
    assert operations() - covered(sent) == set(), "routes the Python SDK never called"
    failures, sent = typescript_run(live_server, build_typescript_sdk())
    assert failures == []
    assert operations() - covered(sent) == set(), "routes the TypeScript SDK never called"


def test_the_typescript_sdk_unit_tests_pass() -> None:
    done = subprocess.run(["npm", "test"], cwd=build_typescript_sdk(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"


def test_npm_pack_makes_a_package_that_installs_and_loads_both_ways(tmp_path: Path) -> None:
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
