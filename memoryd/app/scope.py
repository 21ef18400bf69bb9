"""A session as it stands at this call, and the memories it may see.

The memory tool and the turn composer both resolve a session live: its
workstream, the attached project read from the log, and the acting user's
access to it, so a revoked member or an archived project falls out of the
envelope at once. The envelope is the spec's "visibility envelope":

* interactive sessions (and coordinators' children): every ``global`` memory,
  their own workstream's, their user's (when there is one) and the attached
  project's when it is active and readable;
* coordinators: their user's ``coordinator`` scope and the readable project,
  never global, workstream or user memories.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.store import EventStore
from events.streams import live_project
from memoryd.kernel.domain import Namespace
from memoryd.kernel.projects import ACTIVE, Project
from memoryd.storage.directory import Directory, Workstream
from memoryd.storage.sessions import Session
from projections.filters import MemoryFilter, ScopePattern


class WorkstreamGone(Exception):
    """The session's workstream was deleted; the session can no longer act."""


@dataclass(frozen=True)
class SessionScope:
    """A session, its workstream and the attached project, read at this call."""

    session: Session
    workstream: Workstream
    project: Project | None = field(default=None)  # the attached project, read live from the log

    @property
    def user_id(self) -> str:
        return self.session.user_id

    @property
    def memory_enabled(self) -> bool:
        """The persona's memory lever."""
        return self.workstream.persona_memory

    def project_access(self) -> str | None:
        """``read``/``write`` on the attached project if it is active and the user may, else None."""
        if self.project is None or self.project.state != ACTIVE:
            return None
        return self.project.access_of(self.user_id)

    def envelope(self) -> list[Namespace | ScopePattern]:
        """Everything an unscoped search, list or turn may see."""
        visible: list[Namespace | ScopePattern] = []
        if self.session.is_coordinator:
            visible.append(Namespace("coordinator", self.user_id))
        else:
            visible += [ScopePattern("global"), Namespace("workstream", self.workstream.workstream_id)]
            if self.user_id:
                visible.append(Namespace("user", self.user_id))
        if self.project_access() is not None:
            visible.append(Namespace("project", self.workstream.project_id or ""))
        return visible

    def envelope_filter(self, memory_type: str = "") -> MemoryFilter:
        return MemoryFilter(type=memory_type, scopes=patterns(self.envelope()))


def patterns(chosen: list[Namespace | ScopePattern]) -> tuple[ScopePattern, ...]:
    return tuple(p if isinstance(p, ScopePattern) else ScopePattern(p.scope, p.scope_id) for p in chosen)


def resolve(session: Session, directory: Directory, store: EventStore) -> SessionScope:
    """The session as it stands now; ``WorkstreamGone`` if its workstream was deleted."""
    workstream = directory.workstream(session.workstream_id)
    if workstream is None:
        raise WorkstreamGone("this session's workstream no longer exists")
    project = live_project(store, workstream.project_id) if workstream.project_id else None
    return SessionScope(session, workstream, project)
