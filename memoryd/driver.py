"""The statements every save runs, on the driver's cursor: compiled once, then run without SQLAlchemy's
per-run work.

A Core statement run through a ``Connection`` pays SQLAlchemy's machinery on every run (cache lookup,
parameter processing, execution context, result set-up): on this project's machine about 16 µs for a
one-row UPDATE on SQLite, against about 1.3 µs for the driver itself. A save runs six such statements, so
that machinery was a large share of what a save costs beyond a raw insert (docs/benchmarks.md, "Saves").

``DriverStatement`` keeps the Core statement as the one definition of its SQL: it compiles it for the
connection's dialect the first time, binds and decodes values with the statement's own type processors
(JSON on SQLite, ``jsonb`` on PostgreSQL), and turns a driver error into the SQLAlchemy exception the
``Connection`` would have raised (a lost connection is invalidated), so callers keep catching
``IntegrityError`` and the API keeps answering database trouble as it did. It runs in the connection's
open transaction; only the hot statements use it, everything else stays on Core. What it skips is
also what it does not feed: its statements reach neither SQLAlchemy's ``before_cursor_execute`` events nor
its ``echo`` log (``bench/bench_saves.py --breakdown`` counts them by wrapping ``DriverStatement``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import Compiled
from sqlalchemy.sql.elements import ColumnElement


@dataclass(frozen=True)
class _Prepared:
    """A statement compiled for one dialect: its SQL and how to bind and read it."""

    sql: str
    names: tuple[str, ...]  # every bound parameter, in the SQL's order on a positional driver
    positional: bool
    defaults: dict[str, Any]  # values the statement binds itself (``WHERE log = 'events'``, ``LIMIT 1``)
    processors: dict[str, Callable[[Any], Any]]  # parameter -> the type's bind processor, where it has one
    columns: tuple[Callable[[Any], Any] | None, ...]  # per selected column: the type's result processor


class DriverStatement:
    """A Core statement that runs on the driver's cursor (see the module docstring)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._prepared: dict[tuple[str, str], _Prepared] = {}  # by dialect and driver

    def rows(self, conn: Connection, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a query: its rows as tuples of the selected columns, decoded as Core would decode them."""
        prepared, found = self._run(conn, params or {}, lambda cursor: cursor.fetchall())
        if not any(prepared.columns):
            return [tuple(row) for row in found]
        return [tuple(value if decode is None or value is None else decode(value)
                      for decode, value in zip(prepared.columns, row)) for row in found]

    def run(self, conn: Connection, params: Mapping[str, Any] | None = None) -> int:
        """Run a change: the rows it matched (the driver's ``rowcount``)."""
        return int(self._run(conn, params or {}, lambda cursor: cursor.rowcount)[1])

    def _run(self, conn: Connection, params: Mapping[str, Any], result: Callable[[Any], Any]) -> tuple[_Prepared, Any]:
        """Bind, execute and read ``result`` off a cursor of its own, closed after (it would keep the values,
        a memory's text among them, until its next statement)."""
        dialect = conn.dialect
        prepared = self._prepared.get((dialect.name, dialect.driver)) or self._prepare(dialect)
        try:
            values = {**prepared.defaults, **params}
            for name, process in prepared.processors.items():
                values[name] = process(values[name])
            bound: Sequence[Any] | dict[str, Any] = tuple(values[name] for name in prepared.names) \
                if prepared.positional else values
        except Exception as error:
            raise _unbindable(prepared.sql, error) from error
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(prepared.sql, bound)
            return prepared, result(cursor)
        except dialect.loaded_dbapi.Error as error:
            raise _translated(conn, dialect, prepared.sql, bound, error, cursor) from error
        except Exception as error:  # the driver's own adaptation of a value (psycopg dumps jsonb itself)
            raise _unbindable(prepared.sql, error) from error
        finally:
            cursor.close()

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
