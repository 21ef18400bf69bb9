"""An event no projection can apply stops them visibly, and an operator's supersede moves them on.

The events are planted straight into the log, past every check at the
boundary, as a bug or a hand-edited database would leave them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from api.app import create_app
from memoryd.app.services import Services
from memoryd.cli import main
from memoryd.storage.schema import events
from tests.helpers import (
    Caller,
    a_memory,
    caller_factory,
    make_services,
    names,
    plant,
    rebuild_equals_live,
    refuse_memory_rows,
    table_rows,
)

MEMORIES = "/v1/api/memories"


@pytest.fixture
def stack(database_url: str) -> Iterator[tuple[Services, Caller, Any]]:
    """Services on each backend, an admin caller, and a CLI runner on the same database."""
    services = make_services(database_url)
    admin = caller_factory(create_app(services), services)("read,write", ("admin.memories",))
    runner = CliRunner()

    def cli(*args: str, input: str | None = None) -> Any:
        return runner.invoke(main, list(args), env={"MEMORYD_DATABASE_URL": database_url}, input=input)

    yield services, admin, cli
    services.database.dispose()


def names_listed(caller: Caller) -> list[str]:
    return sorted(names(caller.get(MEMORIES, query_string={"limit": 200})))


def test_a_malformed_event_stops_its_projections_visibly_and_a_supersede_moves_them_on(stack: Any, tmp_path: Any
                                                                                        ) -> None:
    services, admin, cli = stack
    admin.save("earlier")
    planted = a_memory("planted")
    del planted["content"]
    position = plant(services, "planted", planted)

    after = admin.save("after")  # its catch-up meets the planted event first
    project = admin.post("/v1/api/admin/projects", json={"name": "p", "owner": admin.user_id})
    searched = admin.post(f"{MEMORIES}/search", json={"query": "earlier"})
    ready = admin.client.get("/readyz")
    status = cli("status", "--json")

    assert after.status_code == 201
    assert after.headers["X-Projection-Pending"] == "true"
    assert after.headers["X-Projection-Stopped"] == f"structured_memories at position {position}"
    assert names_listed(admin) == ["earlier"]
    assert project.status_code == 201  # the projects read model goes on: not its event's family
    assert admin.get(f"/v1/api/admin/projects/{project.json['project_id']}").status_code == 200
    assert searched.status_code == 200 and [m["name"] for m in searched.json["memories"]] == ["earlier"]
    assert ready.status_code == 503 and ready.json["status"] == "stopped"
    for stopped in ("structured_memories", "search"):
        assert ready.json["stopped"][stopped]["position"] == position
        assert "malformed: KeyError: 'content'" in ready.json["stopped"][stopped]["error"]
    assert json.loads(status.output)["projections"]["structured_memories"]["stopped"]["position"] == position
    assert "STOPPED: projection structured_memories stopped before position" in cli("status").output
    rebuild = cli("projections", "rebuild", "table")
    assert rebuild.exit_code == 1 and f"memoryd events supersede {position}" in rebuild.output
    assert names_listed(admin) == ["earlier"]  # the failed rebuild left the read model as it was

    replacement = tmp_path / "replacement.json"
    replacement.write_text(json.dumps({"event_type": "memory.save", "payload": {"memory": a_memory("planted")}}))
    superseded = cli("events", "supersede", str(position), "--reason", "restored from the backup",
                     "--replacement", str(replacement))

    assert superseded.exit_code == 0, superseded.output
    assert names_listed(admin) == ["after", "earlier", "planted"]
    assert admin.client.get("/readyz").status_code == 200
    assert services.projector.faults() == []
    found = admin.post(f"{MEMORIES}/search", json={"query": "planted"}).json["memories"]
    assert [m["name"] for m in found] == ["planted"]
    assert services.store.event_at(position).payload == {"memory": planted}  # the original is kept, untouched
    audit = admin.get("/v1/api/admin/audit", query_string={"action": "event.supersede"}).json["records"]
    assert [(record["surface"], record["action"]) for record in audit] == [("cli", "event.supersede")]
    assert rebuild_equals_live(services)
    assert cli("projections", "rebuild", "search").exit_code == 0


def test_a_row_the_database_refuses_stops_the_projection_at_its_own_event(stack: Any) -> None:
    """A catch-up's rows are sent together (on PostgreSQL with the batch's next round trip): the failure is
    still the refused event's, so what precedes it is applied and the fault names its position."""
    services, _admin, _cli = stack
    refuse_memory_rows(services, "refused")
    plant(services, "before", a_memory("before"))
    refused = plant(services, "refused", a_memory("refused", content="refused"))
    plant(services, "after", a_memory("after"))
    services.projector.catch_up()
    [fault] = services.projector.faults()
    assert (fault.projection, fault.position) == ("structured_memories", refused)
    assert [row["name"] for row in table_rows(services)] == ["before"]
    assert services.projector.checkpoint("structured_memories") == refused - 1


def test_an_event_carrying_another_memorys_id_stops_the_projection_and_changes_neither_row(stack: Any) -> None:
    """An event whose memory id belongs to another memory (a bug, a hand-edited log) stops the projection at
    that event: the unique identity refuses the row, and that other memory's text is not rewritten."""
    services, _admin, _cli = stack
    plant(services, "first", a_memory("first"))
    plant(services, "second", a_memory("second"))
    services.projector.catch_up()
    before = table_rows(services)
    stolen = services.store.append_rows([dict(
        stream_id='memory:["global","","second"]', stream_version=2, event_type="memory.update", schema_version=1,
        payload={"memory": a_memory("second", memory_id="id-first", content="overwritten")}, meta={},
        recorded_at="2026-12-01T00:00:00.000000Z")])[0]
    services.projector.catch_up()
    [fault] = services.projector.faults()
    assert (fault.projection, fault.position) == ("structured_memories", stolen)
    assert table_rows(services) == before
    assert services.projector.checkpoint("structured_memories") == stolen - 1


def test_only_an_event_a_projection_is_stopped_on_can_be_superseded(stack: Any) -> None:
    services, admin, cli = stack
    position = int(admin.save("fine").headers["X-Memory-Position"])

    refused = cli("events", "supersede", str(position), "--reason", "why not")

    assert refused.exit_code == 1
    assert f"no projection is stopped on the event at position {position}" in refused.output
    assert services.store.head_position() == position


def test_unstorable_text_planted_in_the_log_is_repaired_by_a_supersede(built: Any) -> None:
    services = built()  # SQLite: PostgreSQL's JSONB cannot even hold a lone surrogate
    admin = caller_factory(create_app(services), services)("read,write", ("admin.memories",))
    position = plant(services, "poisoned", a_memory("poisoned", content="abc \ud800 def"))
    services.projector.catch_up()
    [fault] = services.projector.faults()
    assert (fault.projection, fault.position) == ("structured_memories", position)
    assert "UnicodeEncodeError" in fault.error

    result = CliRunner().invoke(main, ["events", "supersede", str(position), "--reason", "lone surrogate"],
                                env={"MEMORYD_DATABASE_URL": str(services.database.url)})

    assert result.exit_code == 0, result.output
    [row] = table_rows(services)
    assert row["content"] == "abc \ufffd def"
    assert services.projector.faults() == []
    again = CliRunner().invoke(main, ["events", "supersede", str(position), "--reason", "twice"],
                               env={"MEMORYD_DATABASE_URL": str(services.database.url)})
    assert again.exit_code == 1 and "no projection is stopped" in again.output
    assert admin.client.get("/readyz").status_code == 200


def test_a_replacement_must_decode_and_belong_to_the_original_stream(stack: Any, tmp_path: Any) -> None:
    services, admin, cli = stack
    position = plant(services, "planted", {"memory": "garbage"})
    admin.save("trigger")
    wrong = [
        ({"event_type": "memory.save", "payload": {"memory": a_memory("elsewhere")}}, "belongs to stream"),
        ({"event_type": "memory.save", "payload": {}}, "the replacement does not decode"),
        ({"event_type": "event.supersede", "payload": {}}, "unknown replacement event type"),
        ({"payload": {}}, 'the replacement must be {"event_type"'),
    ]
    for number, (replacement, message) in enumerate(wrong):
        path = tmp_path / f"wrong{number}.json"
        path.write_text(json.dumps(replacement))
        result = cli("events", "supersede", str(position), "--reason", "r", "--replacement", str(path))
        assert result.exit_code == 1 and message in result.output, result.output
    with services.database.read() as conn:
        assert conn.execute(select(events.c.event_type).where(events.c.event_type == "event.supersede")).all() == []
