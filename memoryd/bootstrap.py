"""The composition root: builds every service from a ``Config``, once per process."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path

from commands.bus import CommandBus, Dispatcher
from commands.handlers import Dependencies
from events.idempotency import IdempotencyKeys
from events.store import EventStore
from events.types import EventMetadata
from memoryd.app.erasure import Erasures
from memoryd.app.identities import Identities
from memoryd.app.services import Services
from memoryd.app.tool import MemoryTool
from memoryd.app.turn import TurnComposer
from memoryd.app.workstreams import Workstreams
from memoryd.embeddings.embedder import Embedder
from memoryd.kernel.config import Config, default_snapshot_dir
from memoryd.kernel.errors import ConfigError
from memoryd.kernel.queue_health import QueueHealth
from memoryd.storage import migrate
from memoryd.storage.db import Database
from memoryd.storage.directory import TOKEN_SCOPES, Directory
from memoryd.storage.sessions import Sessions
from projections.dispatch import InProcessDispatcher
from projections.memory_table import MemoryTableProjection
from projections.project_tables import ProjectTablesProjection
from projections.projector import Projector
from projections.queries import ProjectedMemoryLocator
from projections.search import Analyzer, SearchService
from projections.semantic import VectorChannel

ADMIN_PERMISSIONS = ["admin.memories"]


def build_services(config: Config, embedder: Embedder | None = None) -> Services:
    """``embedder``: the semantic channel's model (None: the channel is off, search is BM25 alone)."""
    database = Database(config.storage.database_url)
    store = EventStore(database)
    vectors = VectorChannel(database, store, embedder) if embedder is not None else None
    memory_table = MemoryTableProjection()
    projector = Projector(database, store, [memory_table, ProjectTablesProjection()])
    idempotency = IdempotencyKeys(database, dt.timedelta(hours=config.server.idempotency_window_hours))
    redis, queue, queue_health = None, None, None
    dispatcher: Dispatcher = InProcessDispatcher(projector)
    if config.workers.redis_url:  # imported only then: the Redis client is a tenth of a second of every start
        from redis import Redis
        from rq import Queue
        from rq.serializers import JSONSerializer

        from workers.redis_dispatch import RedisDispatcher

        redis = Redis.from_url(config.workers.redis_url, socket_connect_timeout=1, socket_timeout=2)
        queue = Queue(config.workers.queue, connection=redis, serializer=JSONSerializer)
        queue_health = QueueHealth(redis.ping)
        dispatcher = RedisDispatcher(redis, queue, projector, queue_health, config.server.write_wait_ms / 1000)
    directory = Directory(database)
    locator = ProjectedMemoryLocator(database)
    # PostgreSQL's commit waits for an fsync under the append lock: writes arriving together share one.
    # SQLite's (WAL, synchronous=NORMAL) does not, so a write there goes alone, at once.
    bus = CommandBus(Dependencies(store=store, locator=locator, users=directory), dispatcher, idempotency,
                     group_commit=database.dialect == "postgresql")
    snapshots = Path(config.search.snapshot_dir) if config.search.snapshot_dir else \
        default_snapshot_dir(config.storage.database_url)
    search = SearchService(store, config.search.k1, config.search.b, snapshots, analyzer_for(config))
    tool = MemoryTool(bus, store, database, directory, search, config.memory.max_content)
    turns = TurnComposer(store, database, directory, search, config.memory)
    erasures = Erasures(bus, store, projector, search, config.server.write_wait_ms / 1000,
                        vectors.index if vectors is not None else None)
    sessions = Sessions(database, directory, config.auth.session_idle_days)
    identities = Identities(store, directory, sessions, dispatcher.appended, config.auth.default_token_days)
    return Services(config, database, store, projector, memory_table, bus, directory, idempotency, redis, queue,
                    search, sessions, tool, turns, Workstreams(directory, store), erasures, identities, locator,
                    queue_health, vectors)


def analyzer_for(config: Config) -> Analyzer:
    """The analyzer the configuration names; ``ConfigError`` naming ``search.language`` for an unknown one."""
    try:
        return Analyzer(config.search.language)
    except ValueError as error:  # the one setting the kernel's config cannot check: the stemmers are the analyzer's
        raise ConfigError(f"search.language: {error}") from None


def prepare_database(services: Services, environ: Mapping[str, str] | None = None) -> str | None:
    """Create the schema if empty, catch projections up, make sure an admin token exists.

    Returns the new admin token when one was generated (to be printed once);
    ``MEMORYD_ADMIN_TOKEN`` supplies the value instead, and then nothing is returned.
    """
    environ = os.environ if environ is None else environ
    migrate.ensure_ready(services.database)
    services.projector.catch_up()
    if services.directory.has_tokens():
        return None
    first = EventMetadata(actor_user_id="memoryd", surface="cli")  # the first start, before anyone could act
    admin = services.directory.user_named("admin") or services.identities.create_user("admin", first)
    chosen = environ.get("MEMORYD_ADMIN_TOKEN") or None
    _, token = services.identities.create_token(admin.user_id, list(TOKEN_SCOPES), ADMIN_PERMISSIONS, first,
                                                name="admin (first start)", value=chosen, expires_in_days=None)
    return None if chosen else token
