"""Commands that manage the directory and projects: users, tokens, workstreams, sessions, projects."""

from __future__ import annotations

from typing import Any

import click

from commands.projects import (
    ArchiveProject,
    CreateProject,
    DeleteProject,
    GrantProjectAccess,
    ReactivateProject,
    RevokeProjectAccess,
)
from events.types import EventMetadata
from memoryd.cli.base import command_services, main, reported


@main.group()
def users() -> None:
    """Manage users."""


@users.command("create")
@click.argument("name")
@reported
def create_user(name: str) -> None:
    """Create a user (names are unique: a name taken fails); prints the new user id."""
    click.echo(command_services().identities.create_user(name).user_id)


@main.group()
def tokens() -> None:
    """Manage API tokens."""


@tokens.command("create")
@click.option("--user", "user_id", required=True, help="The user the token acts as (its id, or its name).")
@click.option("--scopes", default="read,write", show_default=True, help="Comma-separated: read, write, service.")
@click.option("--permission", "permissions", multiple=True, help="Extra permission, e.g. admin.memories (repeatable).")
@click.option("--name", default="", help="What the token is for (shown in lists).")
@click.option("--expires-in-days", type=click.IntRange(1, 36_500), default=None,
              help="Its lifetime (default: [auth] default_token_days; 0 there: never expires).")
@reported
def create_token(user_id: str, scopes: str, permissions: tuple[str, ...], name: str,
                 expires_in_days: int | None) -> None:
    """Create a token; prints it (only this once). A lost admin token: make a new one for the admin user
    with --scopes read,write,service --permission admin.memories (database access is the authority)."""
    services = command_services()
    if services.directory.user(user_id) is None and (named := services.directory.user_named(user_id)) is not None:
        user_id = named.user_id
    _, token = services.identities.create_token(user_id, _split(scopes), list(permissions), name=name,
                                                expires_in_days=expires_in_days)
    click.echo(token)


@main.group()
def workstreams() -> None:
    """Manage workstreams."""


@workstreams.command("create")
@click.option("--owner", "owner_user_id", required=True, help="The owning user's id.")
@click.option("--name", default="", help="A display name.")
@click.option("--project", "project_id", help="Attach this project.")
@click.option("--memory/--no-memory", default=True, show_default=True, help="The persona's memory lever.")
@reported
def create_workstream(owner_user_id: str, name: str, project_id: str | None, memory: bool) -> None:
    """Create a workstream; prints the new workstream id."""
    click.echo(command_services().workstreams.create(owner_user_id, name, project_id, memory))


@workstreams.command("update")
@click.argument("workstream_id")
@click.option("--project", "project_id", help="Attach this project.")
@click.option("--detach", is_flag=True, help="Detach the attached project.")
@click.option("--memory/--no-memory", default=None, help="Turn the persona's memory lever on or off.")
@reported
def update_workstream(workstream_id: str, project_id: str | None, detach: bool, memory: bool | None) -> None:
    """Attach or detach a project, or flip the persona's memory lever."""
    changes: dict[str, Any] = {}
    if project_id or detach:
        changes["project_id"] = None if detach else project_id
    if memory is not None:
        changes["persona_memory"] = memory
    click.echo(command_services().workstreams.change(workstream_id, changes).workstream_id)


@main.group("sessions")
def sessions_group() -> None:
    """Open agent sessions."""


@sessions_group.command("create")
@click.option("--kind", type=click.Choice(["interactive", "coordinator"]), default="interactive", show_default=True)
@click.option("--workstream", "workstream_id", required=True)
@click.option("--user", "user_id", default="", help="The acting user (omit: anonymous).")
@click.option("--parent", "parent_session_id", default="", help="A coordinator child's parent session.")
@reported
def create_session(kind: str, workstream_id: str, user_id: str, parent_session_id: str) -> None:
    """Open a session; prints its id, then its token alone on the last line."""
    session, token = command_services().identities.open_session(kind, workstream_id, user_id, parent_session_id)
    click.echo(session.session_id)
    click.echo(token)


def _split(values: str) -> list[str]:
    return [value.strip() for value in values.split(",") if value.strip()]


@main.group("projects")
def projects_group() -> None:
    """Manage projects (every change is an event in the log)."""


def _project_command(command: Any) -> None:
    outcome = command_services().bus.handle(command, EventMetadata(surface="cli"))
    click.echo(outcome.project.project_id)


@projects_group.command("create")
@click.option("--owner", "owner_user_id", required=True, help="The owning user's id.")
@click.option("--name", required=True, help="The project's name.")
@reported
def create_project(owner_user_id: str, name: str) -> None:
    """Create a project; prints its id."""
    _project_command(CreateProject(name, owner_user_id))


@projects_group.command("grant")
@click.argument("project_id")
@click.argument("user_id")
@click.option("--access", type=click.Choice(["read", "write"]), required=True)
@reported
def grant_access(project_id: str, user_id: str, access: str) -> None:
    """Grant a user read or write access (or change it)."""
    _project_command(GrantProjectAccess(project_id, user_id, access))


@projects_group.command("revoke")
@click.argument("project_id")
@click.argument("user_id")
@reported
def revoke_access(project_id: str, user_id: str) -> None:
    """Revoke a member's access."""
    _project_command(RevokeProjectAccess(project_id, user_id))


@projects_group.command("archive")
@click.argument("project_id")
@reported
def archive_project(project_id: str) -> None:
    """Archive a project: its memories become unreachable until it is reactivated."""
    _project_command(ArchiveProject(project_id))


@projects_group.command("reactivate")
@click.argument("project_id")
@reported
def reactivate_project(project_id: str) -> None:
    """Make an archived project active again."""
    _project_command(ReactivateProject(project_id))


@projects_group.command("delete")
@click.argument("project_id")
@reported
def delete_project(project_id: str) -> None:
    """Delete a project and every memory in its scope (each deletion an event)."""
    _project_command(DeleteProject(project_id))
