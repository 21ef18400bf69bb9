"""Database access: one engine per process, with read and write transactions.

SQLite (the embedded default) runs in WAL mode so readers never block the
writer, and write transactions start with ``BEGIN IMMEDIATE`` so two writers
queue on the busy timeout instead of failing when a read lock would have to
be upgraded. PostgreSQL is reached through psycopg 3.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url

SQLITE_BUSY_TIMEOUT_MS = 30_000


class Database:
    """The engine plus the two kinds of transaction the service needs."""

    def __init__(self, url: str) -> None:
        self.url = make_url(url)
        self.engine = _create_engine(url)
        self._writer = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        self._snapshot = threading.local()

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction of its own, or the thread's open ``snapshot``."""
        if (held := getattr(self._snapshot, "conn", None)) is not None:
            yield held
            return
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction that every ``read`` on this thread joins until it closes; no writes inside.

        The reads of one call (a turn reads its session's workstream, the log's tail and
        the versions it renders) pay for one connection and one transaction instead of one
        each, and on SQLite see one state of the database (PostgreSQL's READ COMMITTED gives
        each statement its own, as in any read).
        """
        if getattr(self._snapshot, "conn", None) is not None:
            yield
            return
        with self.engine.connect() as conn, conn.begin():
            self._snapshot.conn = conn
            try:
                yield
            finally:
                self._snapshot.conn = None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that commits on success and rolls back on any error."""
        if getattr(self._snapshot, "conn", None) is not None:
            raise RuntimeError("a write inside a snapshot: the snapshot's later reads would not see it")
        with self._writer.begin() as conn:
            yield conn

    def dispose(self) -> None:
        self.engine.dispose()


def _create_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
    event.listen(engine, "connect", _configure_sqlite_connection)
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's own is deferred-only).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _begin_sqlite_transaction(conn: Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")
