"""Every cell of the isolation matrix (tests/isolation/matrix.md), asserted over HTTP.

For each session kind x project setup x acting user a world is built: the
project, the workstream, the session, and a memory named ``probe`` in every
namespace the session might reach and in foreign ones it must never see
(another user's user and coordinator scopes, another workstream, another
project). Then every action is called with every scope argument.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from commands.model import SaveMemory
from commands.projects import (
    ArchiveProject,
    CreateProject,
    GrantProjectAccess,
    RevokeProjectAccess,
)
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.kernel.domain import Namespace
from memoryd.kernel.errors import ValidationError
from tests.isolation import rules

MATRIX = Path(__file__).parent / "isolation" / "matrix.md"
REFUSALS = {
    "✗ unavailable": "is unavailable to this",
    "✗ needs user": "requires an authenticated acting user",
    "✗ not attached": "not attached to a project",
    "✗ no access": "cannot access the active attached project",
    "✗ read-only": "read-only access to the attached project",
}


def test_the_checked_in_matrix_is_the_rules_table() -> None:
    assert MATRIX.read_text() == rules.render(), "regenerate: python -m tests.isolation.rules > tests/isolation/matrix.md"


class World:
    def __init__(self, services: Services, kind: str, setup: str, user: str) -> None:
        self.services = services
        directory = services.directory
        people = {name: directory.create_user(name) for name in ("owner", "member", "stranger", "other")}
        self.actor = people.get(user, "")
        admin = EventMetadata(surface="admin")
        project = services.bus.handle(CreateProject("apollo", people["owner"]), admin).project.project_id
        foreign_project = services.bus.handle(CreateProject("zeus", people["other"]), admin).project.project_id
        self.project = project
        self.workstream = directory.create_workstream(self.actor or people["owner"], "ws",
                                                      project if setup != "none" else None)
        foreign_workstream = directory.create_workstream(people["other"], "theirs")
        self.namespaces = {
            "global": Namespace("global", ""), "workstream": Namespace("workstream", self.workstream),
            "project": Namespace("project", project),
        }
        if self.actor:
            self.namespaces |= {"user": Namespace("user", self.actor), "coordinator": Namespace("coordinator", self.actor)}
        self.seeds = [*self.namespaces.values(), Namespace("user", people["other"]),
                      Namespace("coordinator", people["other"]), Namespace("workstream", foreign_workstream),
                      Namespace("project", foreign_project)]
        self.seed()
        if setup in ("read", "write", "archived", "revoked"):
            level = "read" if setup == "read" else "write"
            services.bus.handle(GrantProjectAccess(project, people["member"], level), admin)
        if setup == "archived":
            services.bus.handle(ArchiveProject(project), admin)
        if setup == "revoked":
            services.bus.handle(RevokeProjectAccess(project, people["member"]), admin)
        sessions = services.sessions
        if kind == "interactive":
            self.session, self.token = sessions.create("interactive", self.workstream, self.actor)
        else:
            parent, parent_token = sessions.create("coordinator", self.workstream, self.actor)
            self.session, self.token = (parent, parent_token) if kind == "coordinator" else sessions.create(
                "interactive", self.workstream, parent_session_id=parent.session_id)

    def seed(self) -> None:
        for namespace in self.seeds:
            self.services.bus.handle(SaveMemory("probe", "probe alpha", "d", None, namespace), EventMetadata())


WORLDS = list(itertools.product(rules.KINDS, rules.SETUPS, rules.USERS))


@pytest.mark.parametrize(("kind", "setup", "user"), WORLDS, ids=["-".join(world) for world in WORLDS])
def test_every_cell_of_the_matrix_holds_over_http(services: Services, app: Flask, kind: Any, setup: Any, user: Any) -> None:
    if kind != "interactive" and user == "anonymous":
        assert rules.expected(kind, "get", "inherited", setup, user) == "n/a"
        with pytest.raises(ValidationError, match="require an authenticated user_id"):
            World(services, kind, setup, user)
        return
    world = World(services, kind, setup, user)
    client = app.test_client()
    mismatches = []
    for action, scope in itertools.product(rules.ACTIONS, rules.SCOPES):
        if action == "delete" or (action == "search" and scope == "inherited"):
            world.seed()  # every probe is back before each delete, and before the reads after them
        arguments = {"action": action, "name": "probe", "content": "probe alpha", "description": "d", "query": "probe"}
        if scope != "inherited":
            arguments["scope"] = scope
        result = client.post(f"/v1/api/sessions/{world.session.session_id}/memory", json=arguments,
                             headers={"Authorization": f"Bearer {world.token}"}).get_json()
        assert result is not None
        want = rules.expected(kind, action, scope, setup, user)
        if (got := _outcome(world, result, want)) != want:
            mismatches.append(f"{action} scope={scope}: expected {want!r}, got {got!r}")
    assert not mismatches, "\n".join(mismatches)


def _outcome(world: World, result: dict[str, Any], want: str) -> str:
    """Describe the result in the matrix's words (anything unexpected is spelled out)."""
    if not result["ok"]:
        for label, phrase in REFUSALS.items():
            if phrase in result["error"]:
                return label
        return f"error: {result['error']}"
    if "memories" in result:
        scopes = {(m["scope"], m["scope_id"]) for m in result["memories"]}
        named = [s for s, ns in world.namespaces.items() if (ns.scope, ns.scope_id) in scopes]
        if len(named) != len(scopes):
            return f"leaked: {sorted(scopes)}"
        order = list(rules.SHORT)
        return "sees " + "+".join(rules.SHORT[s] for s in sorted(named, key=order.index))
    memory = result["memory"]
    expected_namespace = world.namespaces.get(want)
    if expected_namespace is not None and (memory["scope"], memory["scope_id"]) != tuple(vars(expected_namespace).values()):
        return f"wrong namespace: {memory['scope']}/{memory['scope_id']}"
    return str(memory["scope"])
