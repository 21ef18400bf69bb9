"""Random traffic from many sessions: nobody ever sees outside their envelope,
and replaying the log reproduces exactly the same visibility."""

from __future__ import annotations

import random

from commands.projects import CreateProject, GrantProjectAccess
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.storage.sessions import Session
from projections.queries import get_memory
from tests.helpers import present

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]


def envelope(services: Services, session: Session, readable_by: dict[str, set[str]]) -> set[tuple[str, str]]:
    """What the spec lets this session see, computed here from the directory (not by the tool)."""
    workstream = present(services.directory.workstream(session.workstream_id))
    user = session.user_id
    project = workstream.project_id
    readable = project and project in readable_by.get(user, set())
    if session.kind == "coordinator":
        allowed = {("coordinator", user)}
    else:
        allowed = {("workstream", workstream.workstream_id)} | ({("user", user)} if user else set())
    return allowed | ({("project", project)} if project and readable else set())


def test_random_sessions_never_see_outside_their_envelope_and_a_replay_agrees(services: Services) -> None:
    rng = random.Random(2026)
    admin = EventMetadata(surface="admin")
    users = [services.directory.create_user(f"user{i}") for i in range(3)]
    projects = [services.bus.handle(CreateProject(f"p{i}", users[i]), admin).project.project_id for i in range(2)]
    services.bus.handle(GrantProjectAccess(projects[0], users[1], "read"), admin)
    services.bus.handle(GrantProjectAccess(projects[1], users[2], "write"), admin)
    # owners: user0 owns p0, user1 owns p1; grants: user1 reads p0, user2 writes p1
    readable_by = {users[0]: {projects[0]}, users[1]: {projects[0], projects[1]}, users[2]: {projects[1]}}
    sessions = []
    for index in range(9):
        user = users[index % 3]
        project = [None, projects[0], projects[1]][(index + index // 3) % 3]
        workstream = services.directory.create_workstream(user, f"ws{index}", project)
        kind = "coordinator" if index in (4, 7) else "interactive"
        sessions.append(services.sessions.create(kind, workstream, user if index != 8 else "")[0])
    tool = services.tool

    def reads(session: Session) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        listed = tool.run(session, {"action": "list", "limit": 50})
        searched = tool.run(session, {"action": "search", "query": " ".join(WORDS), "limit": 50})
        return ([(m["memory_id"], m["content"]) for m in listed.memories or []],
                [(m["memory_id"], m["content"]) for m in searched.memories or []])

    for step in range(400):
        session = rng.choice(sessions)
        if rng.random() < 0.6:
            scope = rng.choice([None, None, "global", "workstream", "user", "project", "coordinator"])
            arguments = {"action": "save", "name": f"n{rng.randrange(12)}", "description": "d",
                         "content": " ".join(rng.sample(WORDS, 3)) + f" step{step}", "scope": scope}
            tool.run(session, arguments)
            continue
        listed, searched = reads(session)
        allowed = envelope(services, session, readable_by)
        with services.database.read() as conn:
            for memory_id, _ in listed + searched:
                row = present(get_memory(conn, memory_id))
                where = (row["scope"], row["scope_id"])
                assert where in allowed or (row["scope"] == "global" and session.kind != "coordinator"), (
                    f"session {session.kind}/{session.user_id or 'anonymous'} saw {where}")

    before = {session.session_id: reads(session) for session in sessions}
    assert sum(len(listed) for listed, _ in before.values()) > 0
    services.projector.rebuild(services.memory_table)
    services.search.rebuild()
    after = {session.session_id: reads(session) for session in sessions}
    assert _ids(after) == _ids(before)


def _ids(reads: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]]) -> dict[str, tuple[list[str], list[str]]]:
    """Each session's listed and searched memory ids."""
    return {session: ([m for m, _ in listed], [m for m, _ in searched]) for session, (listed, searched) in reads.items()}
