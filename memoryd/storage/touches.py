"""When a token or a session was last used, kept to about a minute without slowing a request.

Authentication reads the row anyway, so it knows when the row was last marked; only when that is more than
``EVERY`` seconds ago does it hand the id to this process's writer thread, which marks it (one ``UPDATE``)
off the request's path. A request never waits for the write nor fails with it: a busy or unreachable
database only makes the mark later (the error is logged once per burst). Each process also remembers what it
handed over recently, so a burst of requests with one token queues one write.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time

from sqlalchemy import Table, bindparam, or_, update

from memoryd.kernel.domain import TIMESTAMP_FORMAT
from memoryd.storage.db import Database

EVERY = 60  # seconds: how stale a mark may be
log = logging.getLogger(__name__)
_COLUMNS = {"tokens": ("token_id", "last_used_at"), "sessions": ("session_id", "last_active_at")}


class Touches:
    def __init__(self, database: Database) -> None:
        self.database = database
        self._pending: queue.SimpleQueue[tuple[Table, str, str] | threading.Event] = queue.SimpleQueue()
        self._handed: dict[tuple[str, str], float] = {}  # (table, id) -> monotonic time handed over
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        database.before_dispose(self.flush)

    def note(self, table: Table, row_id: str, marked: str | None, now: str) -> None:
        """The row ``row_id`` of ``table`` (marked at ``marked``) was used ``now``: mark it if stale."""
        if marked is not None and _seconds_between(marked, now) < EVERY:
            return
        key, clock = (table.name, row_id), time.monotonic()
        with self._lock:
            if clock - self._handed.get(key, -EVERY) < EVERY:
                return
            self._handed[key] = clock
            if len(self._handed) > 10_000:  # forget the oldest: a mark is at worst repeated
                for stale in sorted(self._handed, key=self._handed.__getitem__)[:5_000]:
                    del self._handed[stale]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._write, name="memoryd-touches", daemon=True)
                self._thread.start()
        self._pending.put((table, row_id, now))

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every mark handed over so far is written (for tests and an orderly stop)."""
        if self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            self._pending.put(done)
            done.wait(timeout)

    def _write(self) -> None:
        failing = False
        while True:
            item = self._pending.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            table, row_id, now = item
            key, column = _COLUMNS[table.name]
            statement = update(table).where(table.c[key] == bindparam("row_id"),
                                            or_(table.c[column].is_(None), table.c[column] < bindparam("now"))) \
                .values({column: bindparam("now")})
            try:
                with self.database.write() as conn:
                    conn.execute(statement, {"row_id": row_id, "now": now})
                failing = False
            except Exception as error:  # never the request's problem: the mark comes with the next use
                if not failing:
                    log.warning("could not mark %s %s as used: %s", table.name, row_id, type(error).__name__)
                failing = True
                with self._lock:
                    self._handed.pop((table.name, row_id), None)


def _seconds_between(earlier: str, later: str) -> float:
    try:
        return (dt.datetime.strptime(later, TIMESTAMP_FORMAT) - dt.datetime.strptime(earlier, TIMESTAMP_FORMAT)) \
            .total_seconds()
    except ValueError:
        return float("inf")
