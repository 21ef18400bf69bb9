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
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import Compiled
from sqlalchemy.sql.elements import ColumnElement

_CURSOR = "memoryd_driver_cursor"  # in a pooled connection's info: the cursor statements run on


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
        self._prepared: dict[str, _Prepared] = {}

    def rows(self, conn: Connection, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run a query: its rows as tuples of the selected columns, decoded as Core would decode them."""
        prepared, cursor = self._run(conn, params or {})
        found = cursor.fetchall()
        if not any(prepared.columns):
            return [tuple(row) for row in found]
        return [tuple(value if decode is None or value is None else decode(value)
                      for decode, value in zip(prepared.columns, row)) for row in found]

    def run(self, conn: Connection, params: Mapping[str, Any] | None = None) -> int:
        """Run a change: the rows it matched (the driver's ``rowcount``)."""
        return int(self._run(conn, params or {})[1].rowcount)

    def _run(self, conn: Connection, params: Mapping[str, Any]) -> tuple[_Prepared, Any]:
        dialect = conn.dialect
        prepared = self._prepared.get(dialect.name) or self._prepare(dialect)
        values = prepared.defaults | dict(params)
        for name, process in prepared.processors.items():
            values[name] = process(values[name])
        bound: Sequence[Any] | dict[str, Any] = tuple(values[name] for name in prepared.names) \
            if prepared.positional else values
        cursor = _cursor(conn)
        try:
            cursor.execute(prepared.sql, bound)
        except dialect.loaded_dbapi.Error as error:
            raise _translated(conn, dialect, prepared.sql, bound, error, cursor) from error
        return prepared, cursor

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
        self._prepared[dialect.name] = prepared
        return prepared


def _cursor(conn: Connection) -> Any:
    """The cursor kept with the connection's driver connection (one per connection: statements run one at a
    time on it); a new one after a reconnect."""
    pooled = conn.connection
    driver = pooled.driver_connection
    kept = pooled.info.get(_CURSOR)
    if kept is None or kept[0] is not driver:
        kept = pooled.info[_CURSOR] = (driver, driver.cursor())  # type: ignore[union-attr]
    return kept[1]


def _translated(conn: Connection, dialect: Dialect, sql: str, bound: Any, error: DBAPIModule.Error, cursor: Any
                ) -> DBAPIError:
    """The exception ``Connection.execute`` raises for ``error``: same class (``IntegrityError`` for a unique
    key), parameters hidden; a lost connection is invalidated so the pool never hands it out again."""
    disconnected = dialect.is_disconnect(error, conn.connection.dbapi_connection, cursor)
    if disconnected:
        conn.connection.info.pop(_CURSOR, None)
        conn.invalidate(error)
    return DBAPIError.instance(sql, bound, error, dialect.loaded_dbapi.Error, hide_parameters=True,
                               connection_invalidated=disconnected, dialect=dialect)  # type: ignore[return-value]
