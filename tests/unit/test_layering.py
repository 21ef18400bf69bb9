"""The house rules, checked on the source: which layer may import which, and no import cycles.

From the top down:

1. entry points and the composition root (``memoryd.bootstrap``, the ``memoryd.cli`` package,
   ``api.wsgi``, ``workers.runner``): the only modules that import ``memoryd.bootstrap``;
2. ``api`` and ``workers`` (neither imports the other);
3. application services, ``memoryd.app``;
4. ``commands`` and ``projections`` (siblings: neither imports the other);
5. ``events``;
6. storage, ``memoryd.storage`` (the database, schema, migrations, directory, sessions), and beside it the
   embedders, ``memoryd.embeddings`` (neither imports the other);
7. the kernel, ``memoryd.kernel`` (domain rules, text, errors, config, logs, the queue's health), which
   imports no layer.

``memoryd`` itself holds only the floor plan (``__init__``), ``__main__``, the composition root,
``app``, ``cli`` and the floors below: a module anywhere else in it belongs to no floor and fails the test.

A module may import its own group and anything below it. Imports inside
functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("memoryd", "api", "workers", "commands", "projections", "events")
TOP = {"memoryd.bootstrap", "memoryd.cli", "memoryd.__main__", "api.wsgi", "workers.runner"}
RANKS = {"top": 7, "api": 6, "workers": 6, "memoryd.app": 5, "commands": 4, "projections": 4, "events": 3,
         "memoryd.storage": 2, "memoryd.embeddings": 2, "memoryd.kernel": 1, "floor plan": 0}
FLOORS = ("memoryd.app", "memoryd.storage", "memoryd.embeddings", "memoryd.kernel")


def group(module: str) -> str:
    if module in TOP or any(module.startswith(f"{top}.") for top in TOP):
        return "top"
    for floor in FLOORS:
        if module == floor or module.startswith(f"{floor}."):
            return floor
    package = module.split(".")[0]
    return "floor plan" if module == "memoryd" else "no floor" if package == "memoryd" else package


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(module: str, source: str, known: Iterable[str]) -> Iterator[str]:
    """The project modules ``source`` imports (at any depth, function-local ones included)."""
    known = set(known)
    is_package = False
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
            stem = ".".join(base + ([node.module] if node.module else []))
            names = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


def violations(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        source = group(module)
        if source == "no floor":
            found.append(f"{module}: on no floor (memoryd/ holds only the floor plan, __main__, bootstrap, app, cli, "
                         "kernel, storage and embeddings)")
            continue
        for target in sorted(targets):
            destination = group(target)
            if target == "memoryd.bootstrap" and source != "top":
                found.append(f"{module} -> {target}: only entry points import the composition root")
            elif source != destination and RANKS[destination] >= RANKS[source]:
                found.append(f"{module} -> {target}: {source} may not import {destination}")
    return found + [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def project_graph(root: Path = ROOT) -> dict[str, set[str]]:
    found = modules(root)
    return {module: set(imports(module, path.read_text(), found)) for module, path in found.items()}


def test_every_import_follows_the_layers_and_no_modules_form_a_cycle() -> None:
    assert violations(project_graph()) == []


@pytest.mark.parametrize(("module", "line", "expected"), [
    ("memoryd.kernel.domain", "from api.app import create_app",
     "memoryd.kernel.domain -> api.app: memoryd.kernel may not import api"),
    ("memoryd.kernel.text", "from memoryd.storage.db import Database",
     "memoryd.kernel.text -> memoryd.storage.db: memoryd.kernel may not import memoryd.storage"),
    ("memoryd.storage.schema", "from events.types import MemorySaved",
     "memoryd.storage.schema -> events.types: memoryd.storage may not import events"),
    ("events.store", "from commands.model import SaveMemory", "events.store -> commands.model: events may not import commands"),
    ("commands.handlers", "from projections.queries import get_memory",
     "commands.handlers -> projections.queries: commands may not import projections"),
    ("api.memories", "def f():\n    from memoryd.bootstrap import build_services",
     "api.memories -> memoryd.bootstrap: only entry points import the composition root"),
    ("workers.jobs", "import api.context", "workers.jobs -> api.context: workers may not import api"),
])
def test_the_check_fails_on_a_deliberate_upward_import(module: str, line: str, expected: str) -> None:
    graph = project_graph()
    known = set(graph)
    graph[module] = graph[module] | set(imports(module, line, known))
    assert expected in violations(graph)


def test_a_module_loose_in_memoryd_is_on_no_floor() -> None:
    assert violations({"memoryd.helpers": set()}) == [
        "memoryd.helpers: on no floor (memoryd/ holds only the floor plan, __main__, bootstrap, app, cli, kernel, "
        "storage and embeddings)"]


def test_the_check_finds_a_cycle() -> None:
    graph = {"events.a": {"events.b"}, "events.b": {"events.c"}, "events.c": {"events.a"}, "events.d": set()}
    assert violations(graph) == ["import cycle: events.a -> events.b -> events.c"]
