"""The ``projects`` and ``project_members`` read models, for listing and display.

Each project event carries the whole project after the change, so applying
one replaces the project's rows: idempotent, like the memory table.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, delete, insert, select

from events.types import PROJECT_EVENTS, ProjectDeleted, ProjectEvent, RecordedEvent
from memoryd.kernel.projects import Project
from memoryd.storage.driver import Transaction
from memoryd.storage.schema import project_members, projects


class ProjectTablesProjection:
    name = "projects"
    tables = (projects, project_members)  # what ``reset`` clears and ``memoryd projections verify`` compares

    def apply(self, tx: Transaction, recorded: RecordedEvent) -> None:
        if not recorded.event_type.startswith(PROJECT_EVENTS):
            return  # another family's event: not decoded, so its trouble is not this projection's
        event = recorded.to_domain()
        if not isinstance(event, ProjectEvent):
            return
        project = event.project
        conn = tx.conn
        conn.execute(delete(project_members).where(project_members.c.project_id == project.project_id))
        conn.execute(delete(projects).where(projects.c.project_id == project.project_id))
        if isinstance(event, ProjectDeleted):
            return
        row = {key: value for key, value in project.to_dict().items() if key != "members"}
        conn.execute(insert(projects).values(row))
        if project.members:
            conn.execute(insert(project_members), [
                {"project_id": project.project_id, "user_id": user_id, "access": access}
                for user_id, access in project.members])

    def reset(self, conn: Connection) -> None:
        conn.execute(delete(project_members))
        conn.execute(delete(projects))


def get_project(conn: Connection, project_id: str) -> Project | None:
    row = conn.execute(select(projects).where(projects.c.project_id == project_id)).first()
    if row is None:
        return None
    members = conn.execute(select(project_members.c.user_id, project_members.c.access)
                           .where(project_members.c.project_id == project_id)).all()
    data: dict[str, Any] = dict(row._mapping) | {"members": {user_id: access for user_id, access in members}}
    return Project.from_dict(data)


def list_projects(conn: Connection, after: str = "", limit: int = 100, owner: str = "", member: str = "",
                  state: str = "") -> list[Project]:
    """Projects in id order after ``after`` (paged like the audit list), from the read model (it follows the
    log; a change is listed once projected)."""
    query = select(projects.c.project_id)
    if after:
        query = query.where(projects.c.project_id > after)
    if owner:
        query = query.where(projects.c.owner_user_id == owner)
    if state:
        query = query.where(projects.c.state == state)
    if member:
        query = query.where(projects.c.project_id.in_(
            select(project_members.c.project_id).where(project_members.c.user_id == member)))
    found = [get_project(conn, project_id) for project_id in conn.execute(
        query.order_by(projects.c.project_id).limit(limit)).scalars()]
    return [project for project in found if project is not None]
