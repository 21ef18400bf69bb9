"""Projects: shared memory namespaces with an owner, members and a state.

A project is event-sourced like a memory: every change of state or access is
an event carrying the whole project after the change, so auditors see who
granted or revoked what, and access checks can read the project's newest
event (live, never a lagging read model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from memoryd.kernel.errors import ValidationError
from memoryd.kernel.text import checked_text

ACTIVE, ARCHIVED = "active", "archived"
ACCESS_LEVELS = ("read", "write")


@dataclass(frozen=True)
class Project:
    project_id: str
    name: str
    owner_user_id: str
    state: str
    members: tuple[tuple[str, str], ...]  # (user_id, access), sorted by user id
    created: str
    updated: str

    def access_of(self, user_id: str) -> str | None:
        """``write`` for the owner, the granted level for a member, else None."""
        if user_id and user_id == self.owner_user_id:
            return "write"
        return dict(self.members).get(user_id) if user_id else None

    def with_member(self, user_id: str, access: str | None, now: str) -> Project:
        members = dict(self.members)
        if access is None:
            members.pop(user_id, None)
        else:
            members[user_id] = access
        return replace(self, members=tuple(sorted(members.items())), updated=now)

    def to_dict(self) -> dict[str, Any]:
        return {
            "project_id": self.project_id, "name": self.name, "owner_user_id": self.owner_user_id,
            "state": self.state, "members": dict(self.members), "created": self.created, "updated": self.updated,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Project:
        return cls(data["project_id"], data["name"], data["owner_user_id"], data["state"],
                   tuple(sorted(data["members"].items())), data["created"], data["updated"])


def clean_access(raw: Any) -> str:
    if raw not in ACCESS_LEVELS:
        raise ValidationError(f"access must be one of {list(ACCESS_LEVELS)}")
    return str(raw)


def clean_project_name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ValidationError("name is required")
    return checked_text(raw, "name").strip()
