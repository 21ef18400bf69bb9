"""Database access: one engine per process, with read and write transactions.

SQLite (the embedded default) runs in WAL mode so readers never block the
writer, and write transactions start with ``BEGIN IMMEDIATE`` so two writers
queue on the busy timeout instead of failing when a read lock would have to
be upgraded. PostgreSQL is reached through psycopg 3.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from memoryd.kernel.errors import DatabaseUnavailable
from memoryd.storage.driver import Transaction, opened, send_deferred_writes

SQLITE_BUSY_TIMEOUT_MS = 30_000
_PASSWORD_IN_URL = re.compile(r"(?<=://)([^:/@]*:)([^@]*)@")  # user:password@, where make_url cannot parse
# PostgreSQL's SQLSTATEs for a server that is going away, starting, or full: class 08 (connection exceptions) too
_SERVER_AWAY = frozenset({"57P01", "57P02", "57P03", "53300"})
_SQLITE_AWAY = frozenset({"SQLITE_BUSY", "SQLITE_CANTOPEN"})  # locked past the busy timeout; the file unreachable
T = TypeVar("T", bound=Transaction)


class Database:
    """The engine plus the two kinds of transaction the service needs."""

    def __init__(self, url: str) -> None:
        try:
            self.url = make_url(url)
            self.engine = _create_engine(url)
        except (ArgumentError, ValueError, ImportError, OSError) as error:  # a bad URL, no driver, no directory
            raise unavailable(url, error) from None
        self._writer = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        self._snapshot = threading.local()
        self._drains: list[Callable[[], None]] = []

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def read(self, within: Connection | None = None) -> Iterator[Connection]:
        """The caller's open transaction ``within`` (a command reading what it decides on), else the thread's
        open ``snapshot`` (begun by its first read), else a read transaction of its own."""
        if within is not None:
            yield within
            return
        snapshot = getattr(self._snapshot, "open", None)
        if snapshot is None:
            with self.engine.connect() as conn, conn.begin():
                yield conn
            return
        if not snapshot:  # the snapshot's first read: only now is a connection taken from the pool
            conn = self.engine.connect()
            conn.begin()
            snapshot.append(conn)
        yield snapshot[0]

    @contextmanager
    def consistent_read(self) -> Iterator[Connection]:
        """A read transaction whose every statement sees one state of the database (PostgreSQL:
        ``REPEATABLE READ``; SQLite's read transactions are that already), for reads that must agree
        with each other across statements, such as a read model and its checkpoint."""
        with self.engine.connect() as conn:
            if self.dialect == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction that every ``read`` on this thread joins until it closes; no writes inside.

        The reads of one call (a turn reads the log's tail for the index and its session's
        workstream) pay for one connection and one transaction instead of one each. The
        connection is taken at the first read, so waiting for a lock before it holds none.
        On SQLite the reads see one state of the database; on PostgreSQL (READ COMMITTED) each
        statement its own, and a statement that fails leaves the rest of the snapshot unusable:
        let the error end it. The shared search index may be ahead of the snapshot: read what
        must match what it ranked (rows, versions) after the snapshot closes.
        """
        if getattr(self._snapshot, "open", None) is not None:
            yield
            return
        held: list[Connection] = []
        self._snapshot.open = held
        try:
            yield
        finally:
            self._snapshot.open = None
            for conn in held:
                conn.close()  # rolls the read transaction back: nothing was written

    @contextmanager
    def write(self, within: Connection | None = None) -> Iterator[Connection]:
        """The caller's open transaction ``within``, else a transaction of its own that commits on success and
        rolls back on any error."""
        if within is not None:
            yield within
            return
        if getattr(self._snapshot, "open", None) is not None:
            raise RuntimeError("a write inside a snapshot: the snapshot's later reads would not see it")
        with self._writer.begin() as conn:
            yield conn

    @contextmanager
    def transaction(self, kind: type[T]) -> Iterator[T]:
        """A write transaction as a ``kind`` of ``Transaction``, which whoever writes in it is handed: it commits
        with the writes it deferred (one round trip) on success and rolls back on any error.

        A command's load, decision, append and in-process projection then cost one transaction and commit
        together, and its reads see its own writes.
        """
        if getattr(self._snapshot, "open", None) is not None:
            raise RuntimeError("a transaction inside a snapshot: the snapshot's later reads would not see its writes")
        with self._writer.connect() as conn, conn.begin():
            tx = kind(conn)
            with opened(tx):
                yield tx
                tx.send_with_commit()

    def before_dispose(self, drain: Callable[[], None]) -> None:
        """Run ``drain`` first when this database is disposed (a writer thread's last writes, say), so
        nothing opens a connection on the engine after its pool is closed."""
        self._drains.append(drain)

    def dispose(self) -> None:
        for drain in self._drains:
            drain()
        self.engine.dispose()


def out_of_reach(error: SQLAlchemyError) -> bool:
    """The database could not be used just now (unreachable, restarting, out of connections, locked), as
    opposed to refusing or failing a statement: the same request may succeed in a moment."""
    if isinstance(error, DisconnectionError | PoolTimeout) or (isinstance(error, DBAPIError) and error.connection_invalidated):
        return True
    if not isinstance(error, OperationalError):
        return False
    sqlstate = getattr(error.orig, "sqlstate", "")  # psycopg's; None when no server answered at all
    if sqlstate is None or (sqlstate or "").startswith("08") or sqlstate in _SERVER_AWAY:
        return True
    return getattr(error.orig, "sqlite_errorname", "") in _SQLITE_AWAY


def masked_url(url: str) -> str:
    """``url`` fit to print: its password as ``***``, also when it does not parse as a URL."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return _PASSWORD_IN_URL.sub(r"\1***@", url)


def unavailable(url: str, cause: BaseException) -> DatabaseUnavailable:
    """The error naming ``url`` (masked) and the first line of ``cause`` (scrubbed of the password too)."""
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    password = _password(url)
    if password and len(password) >= 4:  # a shorter one would mask letters of ordinary words
        reason = reason.replace(password, "***")
    return DatabaseUnavailable(f"cannot use the database {masked_url(url)}: {reason}")


def _password(url: str) -> str | None:
    try:
        return make_url(url).password
    except (ArgumentError, ValueError):
        found = _PASSWORD_IN_URL.search(url)
        return found.group(2) if found else None


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite database URL (None for another database, or SQLite in memory)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).expanduser()


def require_existing(url: str) -> None:
    """Refuse an SQLite database file that does not exist (opening it would create an empty one)."""
    try:
        path = sqlite_file(url)
    except (ArgumentError, ValueError) as error:
        raise unavailable(url, error) from None
    if path is not None and not path.exists():
        raise DatabaseUnavailable(f"no database at {path}: only 'memoryd serve' and 'memoryd db upgrade' create one "
                                  "(MEMORYD_DATABASE_URL or [storage] database_url names the database to use)")


def _create_engine(url: str) -> Engine:
    """``hide_parameters``: SQLAlchemy's message for a database error (logged, and kept with a failed worker
    job in Redis) leaves out the statement's values, which can be a memory's text an erasure cannot reach
    (PostgreSQL's own ``DETAIL`` may still quote a row)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20, hide_parameters=True)
        send_deferred_writes(engine)
        return engine
    if (path := sqlite_file(url)) is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
                           hide_parameters=True)
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
