"""Statements on the driver's cursor (``memoryd.driver``) behave as the same Core statements do.

A save's hot statements run there; what a caller sees must not change: the same rows with JSON decoded,
the same exceptions (a unique key's ``IntegrityError``, parameters hidden), and a lost connection that
the pool never hands out again.
"""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError, StatementError

from events.types import EventMetadata, memory_stream_id
from memoryd.driver import DriverStatement
from memoryd.schema import event_head, events
from tests.conftest import make_services
from tests.test_never_skip import _memory

_EVENTS_OF_STREAM = select(events).where(events.c.stream_id == bindparam("stream")).order_by(events.c.position)


def _services_with_events(url: str, count: int):  # type: ignore[no-untyped-def]
    services = make_services(url)
    for number in range(count):
        services.store.append(memory_stream_id("same", "global", ""), number, [_memory(number)],
                              EventMetadata(request_id=f"request-{number}"))
    return services


def _the_event(services):  # type: ignore[no-untyped-def]
    """The log's one event, as the row Core reads (its columns by key)."""
    with services.database.read() as conn:
        return dict(conn.execute(select(events)).mappings().one())


def test_rows_come_back_as_core_reads_them_json_decoded(database_url):
    services = _services_with_events(database_url, 3)
    stream = {"stream": memory_stream_id("same", "global", "")}
    try:
        with services.database.read() as conn:
            core = [tuple(row) for row in conn.execute(_EVENTS_OF_STREAM, stream)]
            driven = DriverStatement(_EVENTS_OF_STREAM).rows(conn, stream)
        assert driven == core
        assert len(driven) == 3
        assert driven[0][5]["memory"]["name"] == "m0"  # the payload column, a dict as Core gives it
        assert driven[2][6]["request_id"] == "request-2"  # the metadata column
    finally:
        services.database.dispose()


def test_a_statement_binds_its_own_values_and_the_callers(database_url):
    services = _services_with_events(database_url, 2)
    newest = DriverStatement(select(events.c.stream_version).where(events.c.stream_id == bindparam("stream"))
                             .order_by(events.c.stream_version.desc()).limit(1))
    try:
        with services.database.read() as conn:
            assert newest.rows(conn, {"stream": memory_stream_id("same", "global", "")}) == [(2,)]
            assert newest.rows(conn, {"stream": "no such stream"}) == []
    finally:
        services.database.dispose()


def test_run_counts_the_rows_a_change_matched_and_the_change_commits_with_its_transaction(database_url):
    services = _services_with_events(database_url, 1)
    rename = DriverStatement(update(events).where(events.c.event_type == bindparam("old"))
                             .values(event_type=bindparam("new")))
    try:
        with services.database.write() as conn:
            assert rename.run(conn, {"old": "no such type", "new": "x"}) == 0
        with pytest.raises(RuntimeError), services.database.write() as conn:
            assert rename.run(conn, {"old": "memory.save", "new": "renamed"}) == 1
            raise RuntimeError("roll back")
        with services.database.read() as conn:
            assert conn.execute(select(events.c.event_type)).scalars().all() == ["memory.save"]
    finally:
        services.database.dispose()


def test_a_unique_key_raises_integrity_error_with_its_values_hidden(database_url):
    services = _services_with_events(database_url, 1)
    try:
        again = _the_event(services) | {"position": 99, "meta": {"secret": "the-hidden-value"}}  # same stream, version
        with pytest.raises(IntegrityError) as raised, services.database.write() as conn:
            DriverStatement(insert(events)).run(conn, again)
        assert "the-hidden-value" not in str(raised.value)
        assert "hidden" in str(raised.value)  # SQLAlchemy's own words for hidden parameters
        with services.database.read() as conn:  # the transaction rolled back and the connection still works
            assert conn.execute(select(events.c.position)).scalars().all() == [1]
    finally:
        services.database.dispose()


def test_a_value_that_cannot_be_bound_raises_statement_error_as_core_does(database_url):
    services = _services_with_events(database_url, 1)
    try:
        row = _the_event(services)
        unbindable = row | {"position": 99, "stream_version": 2, "meta": {"when": object()}}  # JSON cannot hold it
        with pytest.raises(StatementError, match="TypeError") as raised, services.database.write() as conn:
            DriverStatement(insert(events)).run(conn, unbindable)
        assert not isinstance(raised.value, IntegrityError)
        missing = {key: value for key, value in row.items() if key != "hash"} | {"position": 99, "stream_version": 2}
        with pytest.raises(StatementError, match="hash"), services.database.write() as conn:
            DriverStatement(insert(events)).run(conn, missing)
        with services.database.read() as conn:
            assert conn.execute(select(events.c.position)).scalars().all() == [1]
    finally:
        services.database.dispose()


def test_an_in_list_is_refused_it_would_be_rendered_on_every_run():
    statement = DriverStatement(select(events).where(events.c.position.in_(bindparam("positions", expanding=True))))
    services = make_services("sqlite://")
    try:
        with services.database.read() as conn, pytest.raises(ValueError, match="IN list"):
            statement.rows(conn, {"positions": [1, 2]})
    finally:
        services.database.dispose()


@pytest.mark.postgres
def test_a_lost_connection_is_invalidated_and_the_pool_hands_out_a_working_one(postgres_url):
    services = _services_with_events(postgres_url, 1)
    head = DriverStatement(select(event_head.c.position))
    try:
        with services.database.engine.connect() as killer, services.database.engine.connect() as victim:
            assert head.rows(victim) == [(1,)]
            pid = victim.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            victim.rollback()
            killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            with pytest.raises(OperationalError) as raised:
                head.rows(victim)
            assert raised.value.connection_invalidated
            assert victim.invalidated
        with services.database.read() as conn:  # the pool replaced the dead connection
            assert head.rows(conn) == [(1,)]
    finally:
        services.database.dispose()
