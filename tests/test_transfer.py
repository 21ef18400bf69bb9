"""Bulk import and export, and search index snapshots, as an operator uses them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memoryd.bootstrap import build_services
from memoryd.cli import main
from memoryd.kernel.config import Config, SearchSettings, StorageSettings
from projections.filters import MemoryFilter, ScopePattern
from tests.helpers import make_services, rebuild_equals_live, table_rows


@pytest.fixture
def run(sqlite_url: str) -> Callable[..., Result]:
    """The CLI on a database ``memoryd db upgrade`` made (other commands never create one)."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(main, list(args), env={"MEMORYD_DATABASE_URL": sqlite_url})

    assert invoke("db", "upgrade").exit_code == 0
    return invoke


def _jsonl(tmp_path: Path, records: list[Any], name: str = "memories.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


RECORDS = [
    {"name": "Deploy Process", "content": "we deploy with buildkite", "description": "ci"},
    {"name": "mine", "content": "tabs not spaces", "description": "style", "type": "user", "scope": "user",
     "scope_id": "u1"},
    {"name": "plan", "content": "ship the importer", "description": "project plan", "scope": "project",
     "scope_id": "p1", "type": "reference"},
]


def test_import_appends_save_events_and_export_writes_them_back(run: Callable[..., Result], sqlite_url: str,
                                                                tmp_path: Path) -> None:
    result = run("memories", "import", _jsonl(tmp_path, RECORDS + [RECORDS[0] | {"content": "now github actions"}]),
                 "--batch", "2")
    assert result.exit_code == 0, result.output
    assert "imported 4 memories: 3 created, 1 updated" in result.output
    services = make_services(sqlite_url)
    assert [event.event_type for event in services.store.iter_all()] == [
        "memory.save", "memory.save", "memory.save", "memory.update"]
    assert all(event.metadata["surface"] == "cli" for event in services.store.iter_all())

    exported = run("memories", "export")
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert {(m["name"], m["scope"], m["scope_id"], m["type"], m["content"]) for m in lines} == {
        ("deploy_process", "global", "", "general", "now github actions"),
        ("mine", "user", "u1", "user", "tabs not spaces"),
        ("plan", "project", "p1", "reference", "ship the importer"),
    }
    assert rebuild_equals_live(services)


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "line 2: not JSON"),
    ('["a list"]', "line 2: each line must be a JSON object"),
    ('{"name": "x", "content": "c"}', "line 2: description is required"),
    ('{"name": "x", "content": "c", "description": "d", "scope": "galaxy"}', "line 2: invalid scope: galaxy"),
    ('{"name": "x", "content": "c", "description": "d", "scope": "user"}', "line 2: scope_id is required"),
    ('{"name": "x", "content": "c", "description": "d", "type": "fact"}', "line 2: invalid type: fact"),
])
def test_an_invalid_line_stops_the_import_before_anything_is_written(run: Callable[..., Result], sqlite_url: str,
                                                                     tmp_path: Path, line: str,
                                                                     message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n" + line + "\n")
    result = run("memories", "import", str(path))
    assert result.exit_code == 1
    assert message in result.output
    assert list(make_services(sqlite_url).store.iter_all()) == []


def test_a_rebuilt_search_snapshot_lets_a_new_process_answer_without_replaying_the_log(run: Callable[..., Result],
                                                                                       sqlite_url: str,
                                                                                       tmp_path: Path) -> None:
    assert run("memories", "import", _jsonl(tmp_path, RECORDS)).exit_code == 0
    result = run("projections", "rebuild", "search")
    assert result.exit_code == 0, result.output
    assert "up to position 3: 3 memories" in result.output

    fresh = build_services(Config(storage=StorageSettings(database_url=sqlite_url)))
    assert fresh.search.snapshot_position() == 3
    everything = MemoryFilter(scopes=None)
    loaded = fresh.search.catch_up()
    assert loaded.position == 3 and len(loaded) == 3
    replayed = make_services(sqlite_url)
    replayed.search.rebuild()
    for query in ("buildkite", "tabs spaces", "ship importer plan"):
        assert fresh.search.search(everything, query, 10) == replayed.search.search(everything, query, 10)


def test_a_process_started_from_a_snapshot_follows_the_log_from_there(sqlite_url: str) -> None:
    from commands.model import SaveMemory
    from events.types import EventMetadata
    from memoryd.kernel.domain import Namespace

    services = make_services(sqlite_url)
    def save(name: str, text: str) -> None:
        services.bus.handle(SaveMemory(name, text, "d", None, Namespace("global", "")), EventMetadata())

    save("first", "alpha")
    services.search.save_snapshot()
    save("second", "alpha beta")
    later = build_services(Config(storage=StorageSettings(database_url=sqlite_url), search=SearchSettings()))
    hits = later.search.search(MemoryFilter(scopes=(ScopePattern("global"),)), "alpha", 10)
    assert {hit.memory_id for hit in hits} == {row["memory_id"] for row in table_rows(services)}
