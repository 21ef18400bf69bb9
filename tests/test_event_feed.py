"""The log itself, for mirrors and auditors: the admin change feed, and ``memoryd events export`` / ``import``
into an empty database, after which the copy verifies (its chain and its read models); on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from commands.model import DeleteMemory, SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.cli import main
from memoryd.kernel.domain import Namespace
from tests.helpers import Caller, make_services, table_rows

GLOBAL = Namespace("global", "")


def _cli(services: Services, *args: str) -> Any:
    url = services.database.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main, list(args), env={"MEMORYD_DATABASE_URL": url})


def _history(services: Services) -> None:
    for number in range(7):
        services.bus.handle(SaveMemory(f"note_{number}", f"content {number} ☃", "d", None, GLOBAL),
                            EventMetadata(actor_user_id="alice", surface="rest"))
    services.bus.handle(DeleteMemory("note_2", GLOBAL), EventMetadata(actor_user_id="alice"))


def test_the_feed_pages_through_the_log_as_stored(admin: Caller, services: Services) -> None:
    _history(services)
    seen, after = [], 0
    while True:
        page = admin.get(f"/v1/api/admin/events?after={after}&limit=3")
        assert page.status_code == 200
        body = page.get_json()
        assert body["head"] == services.store.head_position()
        if not body["events"]:
            assert body["next_after"] == after
            break
        seen += body["events"]
        after = body["next_after"]
    stored = list(services.store.iter_all())
    assert [event["position"] for event in seen] == [event.position for event in stored]
    assert seen[0] == {"position": stored[0].position, "stream_id": stored[0].stream_id, "stream_version": 1,
                            "event_type": "memory.save", "schema_version": 1, "payload": stored[0].payload,
                            "metadata": stored[0].metadata, "recorded_at": stored[0].recorded_at,
                            "payload_sha256": stored[0].payload_sha256, "hash": stored[0].hash}
    assert seen[-1]["event_type"] == "memory.delete"


@pytest.mark.parametrize("query", ["limit=0", "limit=1001", "after=-1", "after=x"])
def test_a_bad_page_is_a_400(admin: Caller, query: str) -> None:
    answer = admin.get(f"/v1/api/admin/events?{query}")
    assert answer.status_code == 400 and "error" in answer.get_json()


def test_the_feed_is_for_admins_only(alice: Caller) -> None:
    assert alice.get("/v1/api/admin/events").status_code == 403


def test_an_export_imported_into_an_empty_database_is_the_same_log_and_verifies(any_services: Services, tmp_path: Path) -> None:
    _history(any_services)
    exported = tmp_path / "log.jsonl"
    assert _cli(any_services, "events", "export", str(exported)).exit_code == 0
    copy = make_services(f"sqlite:///{tmp_path / 'copy.db'}")
    result = _cli(copy, "events", "import", str(exported))
    assert result.exit_code == 0, result.output
    head = any_services.store.chain_head()
    assert f"imported 8 events, head {head}" in result.output
    assert list(copy.store.iter_all()) == list(any_services.store.iter_all())
    assert table_rows(copy) == table_rows(any_services)
    assert _cli(copy, "audit", "verify").exit_code == 0
    assert _cli(copy, "projections", "verify").exit_code == 0
    assert copy.bus.handle(SaveMemory("after_import", "c", "d", None, GLOBAL), EventMetadata()).position == \
        head.position + 1
    assert _cli(copy, "audit", "verify").exit_code == 0


def test_an_altered_export_is_refused_and_nothing_is_kept(any_services: Services, tmp_path: Path) -> None:
    _history(any_services)
    exported = tmp_path / "log.jsonl"
    _cli(any_services, "events", "export", str(exported))
    lines = exported.read_text().splitlines()
    event = json.loads(lines[4])
    event["payload"]["memory"]["content"] = "altered in transit"
    lines[4] = json.dumps(event)
    exported.write_text("\n".join(lines) + "\n")
    copy = make_services(f"sqlite:///{tmp_path / 'copy.db'}")
    result = _cli(copy, "events", "import", str(exported))
    assert result.exit_code == 1
    assert f"does not verify at position {event['position']}: the payload does not match its digest" in result.output
    assert copy.store.head_position() == 0 and copy.store.chain_head().position == 0


def test_an_import_into_a_log_that_holds_events_is_refused(any_services: Services, tmp_path: Path) -> None:
    _history(any_services)
    exported = tmp_path / "log.jsonl"
    _cli(any_services, "events", "export", str(exported))
    result = _cli(any_services, "events", "import", str(exported))
    assert result.exit_code == 1 and "the log is not empty" in result.output


HEADER = '{"memoryd_events": 1, "chain_format": 1, "head": {"position": 1, "hash": "x"}, "gaps": [], "erased": []}\n'


@pytest.mark.parametrize(("text", "message"), [
    ("", "the file is empty"),
    ('{"rows": []}\n', "line 1 is not a memoryd events export header"),
    ('{"memoryd_events": 1, "chain_format": 2, "head": {}, "gaps": []}\n', "chain format is 2"),
    (HEADER + "not json\n", "line 2 is not JSON"),
    (HEADER + '{"position": 1}\n', "line 2: an event has exactly the fields"),
])
def test_a_file_that_is_no_export_is_refused_with_its_line(sqlite_url: str, tmp_path: Path, text: Any, message: str) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(text)
    copy = make_services(sqlite_url)
    result = _cli(copy, "events", "import", str(source))
    assert result.exit_code == 1 and message in result.output, result.output


def test_an_export_whose_header_claims_an_erasure_its_log_lacks_is_refused(any_services: Services, tmp_path: Path) -> None:
    _history(any_services)
    exported = tmp_path / "log.jsonl"
    _cli(any_services, "events", "export", str(exported))
    lines = exported.read_text().splitlines()
    header, event = json.loads(lines[0]), json.loads(lines[1])
    header["erased"] = [[event["position"], 99]]
    event["payload"] = {"erased": {"by": 99, "memory_id": event["payload"]["memory"]["memory_id"]}}
    event["stream_id"] = f"erased:99:{__import__('hashlib').sha256(event['stream_id'].encode()).hexdigest()}"
    exported.write_text("\n".join([json.dumps(header), json.dumps(event), *lines[2:]]) + "\n")
    copy = make_services(f"sqlite:///{tmp_path / 'copy.db'}")
    result = _cli(copy, "events", "import", str(exported))
    assert result.exit_code == 1 and "erased positions its memory.erase events do not" in result.output, result.output
    assert copy.store.head_position() == 0
