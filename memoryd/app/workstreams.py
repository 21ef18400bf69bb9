"""Workstreams as admins and operators manage them: a project they attach must exist in the log."""

from __future__ import annotations

from typing import Any

from events.store import EventStore
from events.streams import live_project
from memoryd.kernel.errors import NotFound
from memoryd.storage.directory import Directory, Within, Workstream


class Workstreams:
    def __init__(self, directory: Directory, store: EventStore) -> None:
        self.directory = directory
        self.store = store

    def create(self, owner_user_id: str, name: str = "", project_id: str | None = None, persona_memory: bool = True,
               within: Within | None = None) -> str:
        """Create one (the owner must exist); ``within`` runs in the creating transaction."""
        return self.directory.create_workstream(owner_user_id, name, self._existing(project_id), persona_memory,
                                                within)

    def change(self, workstream_id: str, changes: dict[str, Any]) -> Workstream:
        """Apply ``project_id`` (None or "" detaches) and/or ``persona_memory``."""
        if "project_id" in changes:
            changes = changes | {"project_id": self._existing(changes["project_id"])}
        return self.directory.change_workstream(workstream_id, changes)

    def _existing(self, project_id: str | None) -> str | None:
        if project_id and live_project(self.store, project_id) is None:
            raise NotFound(f"project not found: {project_id}")
        return project_id or None
