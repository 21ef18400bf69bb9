"""Statements on the driver's cursor (``memoryd.storage.driver``) behave as the same Core statements do.

A save's hot statements run there; what a caller sees must not change: the same rows with JSON decoded,
the same exceptions (a unique key's ``IntegrityError``, parameters hidden), and a lost connection that
the pool never hands out again.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError, StatementError

from events.types import EventMetadata, memory_stream_id
from memoryd.app.services import Services
from memoryd.storage.driver import DriverStatement, Transaction
from memoryd.storage.schema import event_head, events
from tests.helpers import make_services, saved_event

_EVENTS_OF_STREAM = select(events).where(events.c.stream_id == bindparam("stream")).order_by(events.c.position)


def _services_with_events(url: str, count: int):  # type: ignore[no-untyped-def]
    services = make_services(url)
    for number in range(count):
        services.store.append(memory_stream_id("same", "global", ""), number, [saved_event(number)],
                              EventMetadata(request_id=f"request-{number}"))
    return services


def _the_event(services: Services):  # type: ignore[no-untyped-def]
    """The log's one event, as the row Core reads (its columns by key)."""
    with services.database.read() as conn:
        return dict(conn.execute(select(events)).mappings().one())


def test_rows_come_back_as_core_reads_them_json_decoded(database_url: str) -> None:
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


def test_a_statement_binds_its_own_values_and_the_callers(database_url: str) -> None:
    services = _services_with_events(database_url, 2)
    newest = DriverStatement(select(events.c.stream_version).where(events.c.stream_id == bindparam("stream"))
                             .order_by(events.c.stream_version.desc()).limit(1))
    try:
        with services.database.read() as conn:
            assert newest.rows(conn, {"stream": memory_stream_id("same", "global", "")}) == [(2,)]
            assert newest.rows(conn, {"stream": "no such stream"}) == []
    finally:
        services.database.dispose()


def test_run_counts_the_rows_a_change_matched_and_the_change_commits_with_its_transaction(database_url: str) -> None:
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


def test_a_unique_key_raises_integrity_error_with_its_values_hidden(database_url: str) -> None:
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


def test_a_value_that_cannot_be_bound_raises_statement_error_as_core_does(database_url: str) -> None:
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


def test_an_in_list_is_refused_it_would_be_rendered_on_every_run() -> None:
    statement = DriverStatement(select(events).where(events.c.position.in_(bindparam("positions", expanding=True))))
    services = make_services("sqlite://")
    try:
        with services.database.read() as conn, pytest.raises(ValueError, match="IN list"):
            statement.rows(conn, {"positions": [1, 2]})
    finally:
        services.database.dispose()


@pytest.mark.postgres
def test_a_lost_connection_is_invalidated_and_the_pool_hands_out_a_working_one(postgres_url: str) -> None:
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



# -- deferred writes: sent with the transaction's next statement or its commit --------------------------------

_RENAME = DriverStatement(update(events).where(events.c.position == bindparam("at")).values(event_type=bindparam("new")))
_TYPES = select(events.c.position, events.c.event_type).order_by(events.c.position)


class Named(Exception):
    """What the tests' deferrer calls its write's failure."""


def _named(error: Exception) -> Exception:
    return Named(f"named: {type(error).__name__}")


@contextmanager
def _events_in(url: str, count: int):  # type: ignore[no-untyped-def]
    """Services on ``url`` whose log holds ``count`` events, disposed of after."""
    services = _services_with_events(url, count)
    try:
        yield services
    finally:
        services.database.dispose()


def _types(services: Services) -> dict[int, str]:
    with services.database.read() as conn:
        return dict(conn.execute(_TYPES).all())


def _a_copy_of_the_event(services: Services):  # type: ignore[no-untyped-def]
    """An insert the events' unique keys refuse: the log's one event again, at another position."""
    row = _the_event(services)
    return row | {"position": 99, "meta": row.pop("metadata")}


def test_a_deferred_write_is_seen_by_the_next_statement_and_commits_with_the_transaction(database_url: str) -> None:
    with _events_in(database_url, 3) as services:
        with services.database.transaction(Transaction) as tx:
            _RENAME.defer(tx, {"at": 1, "new": "by-core"})
            assert dict(tx.conn.execute(_TYPES).all())[1] == "by-core"  # a Core statement sends it first
            _RENAME.defer(tx, {"at": 2, "new": "by-driver"})
            _RENAME.defer(tx, {"at": 3, "new": "by-driver-too"})
            assert [kind for _, kind in DriverStatement(_TYPES).rows(tx)] == ["by-core", "by-driver", "by-driver-too"]
            _RENAME.defer(tx, {"at": 1, "new": "with-the-commit"})
        assert _types(services) == {1: "with-the-commit", 2: "by-driver", 3: "by-driver-too"}


def test_a_deferred_write_goes_with_a_rollback(database_url: str) -> None:
    with _events_in(database_url, 2) as services:
        with pytest.raises(RuntimeError), services.database.transaction(Transaction) as tx:
            _RENAME.defer(tx, {"at": 1, "new": "rolled-back"})
            raise RuntimeError("roll back")
        assert _types(services) == {1: "memory.save", 2: "memory.save"}


@pytest.mark.parametrize("sent_by", ["driver statement", "core statement", "commit"])
def test_a_deferred_write_that_fails_raises_as_its_deferrer_named_it_wherever_it_is_sent(database_url: str, sent_by: str) -> None:
    with _events_in(database_url, 1) as services:
        copy = _a_copy_of_the_event(services)
        with pytest.raises(Named) as raised, services.database.transaction(Transaction) as tx:
            _RENAME.defer(tx, {"at": 1, "new": "never-committed"})
            with tx.failing_as(_named):
                DriverStatement(insert(events)).defer(tx, copy)
            _RENAME.defer(tx, {"at": 1, "new": "after-the-failure"})  # named as nobody asked: Core's error
            if sent_by == "driver statement":
                DriverStatement(_TYPES).rows(tx)
            elif sent_by == "core statement":
                tx.conn.execute(_TYPES)
        assert isinstance(raised.value.__cause__, IntegrityError)
        assert "hidden" in str(raised.value.__cause__)  # its values hidden, as Core hides them
        assert _types(services) == {1: "memory.save"}  # nothing of the transaction committed


def test_a_name_that_gives_the_error_back_leaves_it_to_the_failing_as_around_it(database_url: str) -> None:
    with _events_in(database_url, 1) as services:
        with pytest.raises(Named) as raised, services.database.transaction(Transaction) as tx, tx.failing_as(_named):
            with tx.failing_as(lambda error: error):  # not this one's to name
                DriverStatement(insert(events)).defer(tx, _a_copy_of_the_event(services))
        assert isinstance(raised.value.__cause__, IntegrityError)


def test_a_deferred_write_nobody_named_fails_with_the_error_core_raises(database_url: str) -> None:
    with _events_in(database_url, 1) as services:
        with pytest.raises(IntegrityError), services.database.transaction(Transaction) as tx:
            DriverStatement(insert(events)).defer(tx, _a_copy_of_the_event(services))
        assert _types(services) == {1: "memory.save"}


@pytest.mark.postgres
@pytest.mark.parametrize("sent_by", ["commit", "a statement inside the failing_as"])
def test_a_deferred_write_cut_off_by_a_lost_connection_keeps_the_connections_error(postgres_url: str, sent_by: str) -> None:
    """Whether a commit sent with it happened is unknown: its deferrer's name (a lost race, a projection to
    run again) would be a guess."""
    with _events_in(postgres_url, 1) as services:
        with services.database.engine.connect() as killer, services.database.engine.connect() as victim:
            pid = victim.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            victim.rollback()
            tx = Transaction(victim)
            with pytest.raises(OperationalError) as raised, victim.begin():
                with tx.failing_as(_named):
                    _RENAME.defer(tx, {"at": 1, "new": "lost"})
                    killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                    if sent_by != "commit":
                        DriverStatement(_TYPES).rows(tx)
                tx.send_with_commit()
            assert raised.value.connection_invalidated
        assert _types(services) == {1: "memory.save"}
