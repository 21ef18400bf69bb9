"""The log's hash chain: any change to a stored event, a removed one or a rewritten history is found by
``memoryd audit verify``, naming the first position that does not hold; on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from alembic import command
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, update

from commands.model import SaveMemory
from events.chain import GENESIS, chained, stored_row
from events.types import EventMetadata
from events.whole_log import verify_chain
from memoryd.app.services import Services
from memoryd.cli import main
from memoryd.kernel.domain import Namespace
from memoryd.storage import migrate
from memoryd.storage.schema import event_gaps, event_head, events

GLOBAL = Namespace("global", "")


def _save(services: Services, name: str, content: str = "content") -> int:
    return services.bus.handle(SaveMemory(name, content, "d", None, GLOBAL), EventMetadata()).position


def _audit(services: Services, *args: str) -> Any:
    url = services.database.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main, ["audit", *args], env={"MEMORYD_DATABASE_URL": url})


def _a_log(services: Services, count: int = 5) -> list[int]:
    return [_save(services, f"note_{number}", f"tamper-me {number}") for number in range(count)]


def _edit_payload(services: Services, position: int) -> None:
    """Change one byte of the stored payload, as someone with the database's password could."""
    with services.database.write() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("UPDATE events SET payload = replace(payload, 'tamper-me', 'tamper-mE') "
                                 "WHERE position = ?", (position,))
        else:
            conn.exec_driver_sql("UPDATE events SET payload = replace(payload::text, 'tamper-me', 'tamper-mE')::jsonb "
                                 "WHERE position = %s", (position,))


def test_an_untouched_log_verifies_and_its_checkpoint_is_its_head(any_services: Services) -> None:
    positions = _a_log(any_services)
    result = _audit(any_services, "verify")
    assert result.exit_code == 0, result.output
    head = _audit(any_services, "checkpoint").output.strip()
    assert head.startswith(f"{positions[-1]}:") and len(head.partition(":")[2]) == 64
    assert f"the log verifies: {len(positions)} events, head {head}" in result.output


def test_one_changed_byte_of_one_payload_is_named_by_its_position(any_services: Services) -> None:
    positions = _a_log(any_services)
    _edit_payload(any_services, positions[2])
    result = _audit(any_services, "verify")
    assert result.exit_code == 1
    assert f"does not verify at position {positions[2]}: the payload does not match its digest" in result.output


def test_a_payload_changed_with_its_digest_breaks_the_hash_there(any_services: Services) -> None:
    positions = _a_log(any_services)
    with any_services.database.write() as conn:
        event = any_services.store.event_at(positions[1])
        assert event is not None
        forged = event.payload | {"memory": event.payload["memory"] | {"content": "forged"}}
        conn.execute(update(events).where(events.c.position == positions[1]).values(
            payload=forged, payload_sha256=next(chained(GENESIS, 1, [stored_row(event) | {"payload": forged}]))[
                "payload_sha256"]))
    result = _audit(any_services, "verify")
    assert result.exit_code == 1
    assert f"at position {positions[1]}: the hash does not match" in result.output


@pytest.mark.parametrize("which", ["middle", "newest"])
def test_a_deleted_event_is_named_as_missing(any_services: Services, which: str) -> None:
    positions = _a_log(any_services)
    gone = positions[2] if which == "middle" else positions[-1]
    with any_services.database.write() as conn:
        conn.execute(delete(events).where(events.c.position == gone))
    result = _audit(any_services, "verify")
    assert result.exit_code == 1
    assert f"does not verify at position {gone}: missing" in result.output
    assert _save(any_services, "after") == positions[-1] + 1  # the position is not taken again


def test_a_rewritten_history_verifies_alone_but_not_against_a_published_checkpoint(any_services: Services) -> None:
    positions = _a_log(any_services, 3)
    published = _audit(any_services, "checkpoint").output.strip()
    _save(any_services, "later")
    assert _audit(any_services, "verify", "--since-checkpoint", published).exit_code == 0
    # whoever can write the database rewrites the whole chain consistently, from the first event on
    log = list(any_services.store.iter_all())
    rows = [stored_row(event) for event in log]
    rows[0]["payload"] = rows[0]["payload"] | {"memory": rows[0]["payload"]["memory"] | {"content": "rewritten"}}
    resealed = list(chained(GENESIS, 1, rows))
    with any_services.database.write() as conn:
        for row in resealed:
            conn.execute(update(events).where(events.c.position == row["position"]).values(
                payload=row["payload"], payload_sha256=row["payload_sha256"], hash=row["hash"]))
        conn.execute(update(event_head).values(hash=resealed[-1]["hash"]))
    assert _audit(any_services, "verify").exit_code == 0
    result = _audit(any_services, "verify", "--since-checkpoint", published)
    assert result.exit_code == 1
    assert f"at position {positions[-1]}: the hash here is not the checkpoint's" in result.output


def test_a_checkpoint_past_the_head_or_malformed_is_refused(any_services: Services) -> None:
    _a_log(any_services, 2)
    past = _audit(any_services, "verify", "--since-checkpoint", f"9:{'a' * 64}")
    assert past.exit_code == 1 and "before the checkpoint" in past.output
    malformed = _audit(any_services, "verify", "--since-checkpoint", "3:nothex")
    assert malformed.exit_code == 2 and "a checkpoint is POSITION:HASH" in malformed.output


def test_a_database_from_before_the_chain_is_sealed_once_gaps_recorded_and_positions_never_reused(any_services: Services) -> None:
    _a_log(any_services, 4)
    _from_before_the_chain(any_services, [2, 4])  # a burned position; a vanished newest
    with any_services.database.read() as conn:
        assert sorted(conn.execute(select(event_gaps)).all()) == [(2, 2), (4, 4)]
    assert _audit(any_services, "verify").exit_code == 0
    assert _save(any_services, "next") == 5
    assert _audit(any_services, "verify").exit_code == 0


def _from_before_the_chain(services: Services, burned: list[int]) -> None:
    """The database as it was before migration 0010, with these positions missing, then upgraded."""
    settings_ = migrate._alembic_config()
    with services.database.write() as conn:
        settings_.attributes["connection"] = conn
        command.downgrade(settings_, "0009")
        conn.execute(events.delete().where(events.c.position.in_(burned)))
    migrate.upgrade(services.database)


TEXT = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=8)  # what the store holds
JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.dictionaries(TEXT, JSON, max_size=4))
def test_whatever_a_payload_holds_its_digest_survives_the_database_round_trip(any_services: Services, payload: Any) -> None:
    """JSONB reorders keys and re-renders text; the canonical bytes must not depend on it."""
    any_services.store.append_rows([dict(stream_id=f"test:{uuid.uuid4()}", stream_version=1,
                                         event_type="test.event", schema_version=1, payload=payload,
                                         meta={"ü": "☃"}, recorded_at="2026-12-01T00:00:00Z")])
    assert verify_chain(any_services.store).ok


def test_events_past_a_head_moved_back_fail_the_walk(any_services: Services) -> None:
    positions = _a_log(any_services)
    with any_services.database.write() as conn:
        conn.execute(update(event_head).values(position=positions[2]))  # hide the newest two from the walk
    result = _audit(any_services, "verify")
    assert result.exit_code == 1 and f"at position {positions[2] + 1}" in result.output, result.output


def test_a_float_never_enters_the_log(any_services: Services) -> None:
    from memoryd.kernel.errors import ValidationError

    with pytest.raises(ValidationError, match="events hold no floats"):
        any_services.store.append_rows([dict(stream_id="test:float", stream_version=1, event_type="test.event",
                                             schema_version=1, payload={"n": 1e16}, meta={},
                                             recorded_at="2026-12-01T00:00:00Z")])
    assert any_services.store.head_position() == 0


def test_the_checkpoint_is_the_newest_event_even_when_the_head_sits_in_a_burned_gap(any_services: Services) -> None:
    _a_log(any_services, 3)
    _from_before_the_chain(any_services, [3])  # the newest position was burned
    published = _audit(any_services, "checkpoint").output.strip()
    assert published.startswith("2:")
    assert _audit(any_services, "verify", "--since-checkpoint", published).exit_code == 0
    _save(any_services, "later")
    assert _audit(any_services, "verify", "--since-checkpoint", published).exit_code == 0
