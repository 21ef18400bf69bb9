"""The services one process runs, as the composition root (``memoryd.bootstrap``) builds them.

Entry points and the HTTP handlers reach them through this bag; application
services get only the collaborators they use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from commands.bus import CommandBus
from events.idempotency import IdempotencyKeys
from events.store import EventStore
from events.streams import MemoryLocator
from memoryd.app.erasure import Erasures
from memoryd.app.identities import Identities
from memoryd.app.tool import MemoryTool
from memoryd.app.turn import TurnComposer
from memoryd.app.workstreams import Workstreams
from memoryd.kernel.config import Config
from memoryd.kernel.queue_health import QueueHealth
from memoryd.storage.db import Database
from memoryd.storage.directory import Directory
from memoryd.storage.sessions import Sessions
from projections.memory_table import MemoryTableProjection
from projections.projector import Projector
from projections.search import SearchService
from projections.semantic import VectorChannel

if TYPE_CHECKING:  # the Redis client is imported only when workers are configured
    from redis import Redis
    from rq import Queue


@dataclass(frozen=True)
class Services:
    config: Config
    database: Database
    store: EventStore
    projector: Projector
    memory_table: MemoryTableProjection
    bus: CommandBus
    directory: Directory
    idempotency: IdempotencyKeys
    redis: Redis | None  # None: projections run in-process
    queue: Queue | None
    search: SearchService
    sessions: Sessions
    tool: MemoryTool
    turns: TurnComposer
    workstreams: Workstreams
    erasures: Erasures
    identities: Identities
    locator: MemoryLocator  # which stream holds a memory id (the read model, then the log)
    queue_health: QueueHealth | None = None  # with Redis: whether the worker queue answers (memoryd.kernel.queue_health)
    vectors: VectorChannel | None = None  # the semantic channel's vectors; None: it is off (BM25 alone)

    @property
    def checkpointed(self) -> list[str]:
        """Every read model the log feeds through a checkpoint: the projector's, then the vectors' when the semantic
        channel is on (it runs apart from the saves, so it may lag; ``/readyz`` counts that as degraded)."""
        return [projection.name for projection in self.projector.projections] + \
            ([self.vectors.name] if self.vectors is not None else [])
