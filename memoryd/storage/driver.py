"""The statements every save runs, on the driver's cursor: compiled once, then run without SQLAlchemy's
per-run work.

A Core statement run through a ``Connection`` pays SQLAlchemy's machinery on every run (cache lookup,
parameter processing, execution context, result set-up): on this project's machine about 16 µs for a
one-row UPDATE on SQLite, against about 1.3 µs for the driver itself. A save ran six such statements, so
that machinery was a large share of what a save costs beyond a raw insert (docs/benchmarks.md, "Saves").

``DriverStatement`` keeps the Core statement as the one definition of its SQL: it compiles it for the
connection's dialect the first time, binds and decodes values with the statement's own type processors
(JSON on SQLite, ``jsonb`` on PostgreSQL), and turns a driver error into the SQLAlchemy exception the
``Connection`` would have raised (a lost connection is invalidated), so callers keep catching
``IntegrityError`` and the API keeps answering database trouble as it did. It runs in the connection's
open transaction; only the hot statements use it, everything else stays on Core. What it skips is
also what it does not feed: its statements reach neither SQLAlchemy's ``before_cursor_execute`` events nor
its ``echo`` log (``bench/bench_saves.py --breakdown`` counts them by wrapping ``_send``, which runs them all).

A change whose result its caller does not need can be *deferred* (``DriverStatement.defer``) in a
``Transaction``: on PostgreSQL (psycopg's pipeline mode) it is bound at once and sent with the transaction's
next statement, or with its ``COMMIT``, in the same round trip. Each round trip costs about 90 µs on loopback,
and a save's event row, checkpoint step, read-model row and commit took four of them. The server sees the same
statements in the same order; only the moment its answer arrives moves, so a failure is raised where the write
is sent, named as whoever deferred it asked (``Transaction.failing_as``). A rollback drops what was never sent.
Elsewhere (SQLite has no round trips) a deferred change runs at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import Compiled
from sqlalchemy.sql.elements import ColumnElement

FailureName = Callable[[Exception], Exception]  # a deferred write's error -> the exception its deferrer raises
# In a connection's info while a ``Transaction`` is open on it: that transaction, for the engine's statement
# hook (``send_deferred_writes``), which is given the connection alone.
_OPEN_TRANSACTION = "memoryd_open_transaction"


@dataclass(frozen=True)
class _Prepared:
    """A statement compiled for one dialect: its SQL and how to bind and read it."""

    sql: str
    names: tuple[str, ...]  # every bound parameter, in the SQL's order on a positional driver
    positional: bool
    defaults: dict[str, Any]  # values the statement binds itself (``WHERE log = 'events'``, ``LIMIT 1``)
    processors: dict[str, Callable[[Any], Any]]  # parameter -> the type's bind processor, where it has one
    columns: tuple[Callable[[Any], Any] | None, ...]  # per selected column: the type's result processor


@dataclass(frozen=True)
class _Deferred:
    """A bound change waiting for its transaction's next round trip, and how its failure is to be named."""

    sql: str
    bound: Sequence[Any] | dict[str, Any]
    failure: FailureName | None


class Transaction:
    """A write transaction: its connection, the writes it deferred and has not sent yet, and the name a failure
    of one takes. ``memoryd.storage.db.Database.transaction`` begins one, and commits it with its deferred writes (one
    round trip); whoever writes in it is handed it."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.deferred: list[_Deferred] = []  # not yet sent, in order
        self.failure: FailureName | None = None  # how a write deferred now is named if it fails

    @contextmanager
    def failing_as(self, name: FailureName) -> Iterator[None]:
        """Within: a write deferred here that fails, wherever it is sent, raises ``name(error)`` in place of
        ``error`` (the exception Core would raise), so its failure means what its deferrer says (a lost race, a
        projection that stopped) and not what the statement that happened to send it was doing. A name that
        gives the error back unchanged leaves it to the ``failing_as`` around this one. A lost connection keeps
        its own error: whether a commit sent with it happened is unknown."""
        outer = self.failure
        self.failure = name if outer is None else _first_of(name, outer)
        try:
            yield
        finally:
            self.failure = outer

    def send_deferred(self) -> None:
        """Send the deferred writes now."""
        _send(self.conn, self._take_deferred(), None)

    def send_with_commit(self) -> None:
        """The deferred writes and the ``COMMIT`` in one round trip (the driver then finds nothing to commit);
        nothing when none is waiting."""
        writes = self._take_deferred()
        if writes:
            cursor = self.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                _send(self.conn, writes, ("COMMIT", None, cursor))
            finally:
                cursor.close()

    def _take_deferred(self) -> list[_Deferred]:
        writes, self.deferred = self.deferred, []
        return writes


Runs = Connection | Transaction  # where a statement runs: a transaction's deferred writes go first


class DriverStatement:
    """A Core statement that runs on the driver's cursor (see the module docstring)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._prepared: dict[tuple[str, str], _Prepared] = {}  # by dialect and driver

    def rows(self, on: Runs, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a query: its rows as tuples of the selected columns, decoded as Core would decode them."""
        prepared, found = self._run(on, params or {}, lambda cursor: cursor.fetchall())
        if not any(prepared.columns):
            return [tuple(row) for row in found]
        return [tuple(value if decode is None or value is None else decode(value)
                      for decode, value in zip(prepared.columns, row)) for row in found]

    def run(self, on: Runs, params: Mapping[str, Any] | None = None) -> int:
        """Run a change: the rows it matched (the driver's ``rowcount``)."""
        return int(self._run(on, params or {}, lambda cursor: cursor.rowcount)[1])

    def defer(self, tx: Transaction, params: Mapping[str, Any] | None = None) -> None:
        """A change whose result nobody reads: bound now (a value its types cannot bind raises here; psycopg
        dumps ``jsonb`` only when it is sent), sent with ``tx``'s next statement or its commit where a round
        trip can carry several (see the module docstring), run now elsewhere. Its failure is raised as
        ``tx``'s ``failing_as`` in force now names it."""
        prepared = self._prepared_for(tx.conn.dialect)
        write = _Deferred(prepared.sql, _bound(prepared, params or {}), tx.failure)
        if _pipelines(tx.conn.dialect.driver):
            tx.deferred.append(write)
        else:
            _send(tx.conn, [write], None)

    def _run(self, on: Runs, params: Mapping[str, Any], result: Callable[[Any], Any]) -> tuple[_Prepared, Any]:
        """Bind, execute (after the writes ``on`` deferred before it, in one round trip) and read ``result`` off
        a cursor of its own, closed after (it would keep the values, a memory's text among them, until its next
        statement)."""
        conn, deferred = (on.conn, on._take_deferred()) if isinstance(on, Transaction) else (on, [])
        prepared = self._prepared_for(conn.dialect)
        bound = _bound(prepared, params)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            _send(conn, deferred, (prepared.sql, bound, cursor))
            try:
                return prepared, result(cursor)
            except Exception as error:
                raise _driver_error(conn, prepared.sql, bound, error, cursor) from error
        finally:
            cursor.close()

    def _prepared_for(self, dialect: Dialect) -> _Prepared:
        return self._prepared.get((dialect.name, dialect.driver)) or self._prepare(dialect)

    def _prepare(self, dialect: Dialect) -> _Prepared:
        compiled: Compiled = self.statement.compile(dialect=dialect)  # type: ignore[attr-defined]
        binds = compiled.binds  # type: ignore[attr-defined]
        if any(bind.expanding for bind in binds.values()):
            raise ValueError("a DriverStatement binds plain values: an IN list would be rendered on every run")
        positional = bool(compiled.positional)  # type: ignore[attr-defined]
        names = tuple(compiled.positiontup) if positional else tuple(binds)  # type: ignore[attr-defined]
        processors = {}
        for name in names:
            process = binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors[name] = process
        selected: Sequence[ColumnElement[Any]] = getattr(self.statement, "selected_columns", ())
        columns = tuple(column.type.dialect_impl(dialect).result_processor(dialect, None) for column in selected)
        defaults = {name: bind.value for name, bind in binds.items() if bind.value is not None}
        prepared = _Prepared(compiled.string, names, positional, defaults, processors, columns)
        self._prepared[(dialect.name, dialect.driver)] = prepared
        return prepared


def _first_of(inner: FailureName, outer: FailureName) -> FailureName:
    def named(error: Exception) -> Exception:
        renamed = inner(error)
        return renamed if renamed is not error else outer(error)

    return named


def send_deferred_writes(engine: Engine) -> None:
    """Make a ``Transaction`` on ``engine`` send its deferred writes before each Core statement it runs (whose
    hook is given the connection alone: ``opened`` links the two). Nothing to do on a driver that runs
    deferred writes at once."""
    if _pipelines(engine.dialect.driver):
        event.listen(engine, "before_cursor_execute", _send_before_statement)


@contextmanager
def opened(tx: Transaction) -> Iterator[None]:
    """While ``tx`` is open: its connection's Core statements send its deferred writes first."""
    if not _pipelines(tx.conn.dialect.driver):
        yield
        return
    info = tx.conn.info  # once: a connection lost inside refuses to give it again until rolled back
    info[_OPEN_TRANSACTION] = tx
    try:
        yield
    finally:
        info.pop(_OPEN_TRANSACTION, None)


def _bound(prepared: _Prepared, params: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
    try:
        values = {**prepared.defaults, **params}
        for name, process in prepared.processors.items():
            values[name] = process(values[name])
        return tuple(values[name] for name in prepared.names) if prepared.positional else values
    except Exception as error:
        raise _unbindable(prepared.sql, error) from error


@cache
def _pipelines(driver: str) -> bool:
    """Whether the driver sends several statements in one round trip (psycopg over a libpq that can)."""
    if driver != "psycopg":
        return False
    import psycopg  # the dialect's driver: imported already

    return bool(psycopg.Pipeline.is_supported())


def _send(conn: Connection, writes: list[_Deferred], last: tuple[str, Any, Any] | None) -> None:
    """Execute ``writes``, then ``last`` (sql, values, cursor) if given, in one round trip. A failed write raises
    as its deferrer named it, and nothing after it ran (the server skips the rest); ``last`` failing raises
    as Core would."""
    if not writes:
        if last is not None:
            _execute(conn, *last)
        return
    if len(writes) == 1 and last is None:
        _execute(conn, writes[0].sql, writes[0].bound, None, writes[0])
        return
    driver = conn.connection.driver_connection
    sent: list[tuple[_Deferred, Any]] = []
    try:
        with driver.pipeline():  # type: ignore[union-attr]
            for write in writes:
                sent.append((write, driver.cursor()))  # type: ignore[union-attr]
                sent[-1][1].execute(write.sql, write.bound)
            if last is not None:
                last[2].execute(last[0], last[1])
    except Exception as error:
        # the first write without a result is the one that failed (the server skipped the ones after it)
        failed = next(((write, cursor) for write, cursor in sent if cursor.pgresult is None), None)
        if failed is None and last is not None:
            raise _driver_error(conn, last[0], last[1], error, last[2]) from error
        write, cursor = failed or (writes[0], None)
        named = _named(write, _driver_error(conn, write.sql, write.bound, error, cursor), error)
        raise named from named.__cause__
    finally:
        for _write, cursor in sent:
            cursor.close()


def _execute(conn: Connection, sql: str, bound: Any, cursor: Any, write: _Deferred | None = None) -> None:
    """One statement on ``cursor`` (a cursor of its own, closed after, if None); a deferred ``write``'s
    failure is named as its deferrer asked."""
    own = cursor is None
    if own:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql, bound)
    except Exception as error:
        failure = _driver_error(conn, sql, bound, error, cursor)
        if write is None:
            raise failure from error
        named = _named(write, failure, error)
        raise named from named.__cause__
    finally:
        if own:
            cursor.close()


def _send_before_statement(conn: Connection, *_statement: Any) -> None:
    tx = conn.info.get(_OPEN_TRANSACTION)
    if tx is not None and tx.deferred:
        tx.send_deferred()


def _named(write: _Deferred, failure: Exception, error: Exception) -> Exception:
    """What to raise for a deferred write's ``failure`` (as Core raises it, caused by the driver's ``error``):
    the failure as its deferrer named it, caused by it."""
    failure.__cause__ = error
    lost = isinstance(failure, DBAPIError) and failure.connection_invalidated
    if write.failure is None or lost:
        return failure
    named = write.failure(failure)
    if named is not failure:
        named.__cause__ = failure
    return named


def _driver_error(conn: Connection, sql: str, bound: Any, error: Exception, cursor: Any) -> Exception:
    """A driver's error as Core raises it; anything else is the driver's own adaptation of a value (psycopg
    dumps ``jsonb`` itself)."""
    if isinstance(error, conn.dialect.loaded_dbapi.Error):
        return _translated(conn, conn.dialect, sql, bound, error, cursor)
    return _unbindable(sql, error)


def _unbindable(sql: str, error: Exception) -> StatementError:
    """What Core raises for a value it cannot bind (a missing one, or one JSON cannot hold): a
    ``StatementError``, parameters hidden."""
    return StatementError(f"({type(error).__name__}) {error}", sql, None, error, hide_parameters=True)


def _translated(conn: Connection, dialect: Dialect, sql: str, bound: Any, error: DBAPIModule.Error, cursor: Any
                ) -> DBAPIError:
    """The exception ``Connection.execute`` raises for ``error``: same class (``IntegrityError`` for a unique
    key), parameters hidden; a lost connection is invalidated so the pool never hands it out again."""
    disconnected = dialect.is_disconnect(error, conn.connection.dbapi_connection, cursor)
    if disconnected:
        conn.invalidate(error)
    return DBAPIError.instance(sql, bound, error, dialect.loaded_dbapi.Error, hide_parameters=True,
                               connection_invalidated=disconnected, dialect=dialect)  # type: ignore[return-value]
