"""The identity commands beside ``create``: users, tokens and sessions listed, deactivated, revoked, closed;
projects and workstreams listed. Each change is audited with the actor ``cli`` (database access is the
authority). Lists print one JSON object a line."""

from __future__ import annotations

import json
from typing import Any

import click

from memoryd.cli.base import command_services, reported
from memoryd.cli.directory import projects_group, sessions_group, tokens, users, workstreams
from memoryd.kernel.domain import utc_timestamp
from memoryd.storage.listings import Page, list_sessions, list_tokens, list_users, list_workstreams
from projections.project_tables import list_projects


def _print(items: list[dict[str, Any]]) -> None:
    for item in items:
        click.echo(json.dumps(item, sort_keys=False))


def _listing(command: Any) -> Any:
    command = click.option("--after", default="", help="The last id of the previous page.")(command)
    return click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 1000))(command)


@users.command("list")
@click.option("--state", type=click.Choice(["active", "deactivated"]), default=None)
@click.option("--name", default="", help="Only the user of this name.")
@_listing
@reported
def list_users_command(state: str | None, name: str, after: str, limit: int) -> None:
    """List users, one JSON object a line."""
    services = command_services()
    with services.database.read() as conn:
        _print([user.to_dict() for user in list_users(conn, Page(after, limit), state or "", name)])


@users.command("deactivate")
@click.argument("user_id")
@click.option("--reason", default="", help="Why (in the audit trail).")
@reported
def deactivate_user(user_id: str, reason: str) -> None:
    """Deactivate a user: its tokens and sessions are refused at once, by every API process."""
    click.echo(command_services().identities.set_user_active(user_id, False, reason=reason).user_id)


@users.command("reactivate")
@click.argument("user_id")
@click.option("--reason", default="", help="Why (in the audit trail).")
@reported
def reactivate_user(user_id: str, reason: str) -> None:
    """Reactivate a deactivated user."""
    click.echo(command_services().identities.set_user_active(user_id, True, reason=reason).user_id)


@tokens.command("list")
@click.option("--user", "user_id", default="", help="Only this user's tokens.")
@click.option("--state", type=click.Choice(["active", "revoked", "expired"]), default=None)
@_listing
@reported
def list_tokens_command(user_id: str, state: str | None, after: str, limit: int) -> None:
    """List tokens (id, prefix, name, user, scopes, dates; never the secret), one JSON object a line."""
    services = command_services()
    with services.database.read() as conn:
        found = list_tokens(conn, Page(after, limit), user_id, state or "", utc_timestamp())
    _print([token.to_dict() for token in found])


@tokens.command("revoke")
@click.argument("token_id")
@click.option("--reason", default="", help="Why (in the audit trail).")
@reported
def revoke_token(token_id: str, reason: str) -> None:
    """Revoke a token: its next request, to any API process, is refused."""
    click.echo(command_services().identities.revoke_token(token_id, reason=reason).token_id)


@sessions_group.command("list")
@click.option("--user", "user_id", default="")
@click.option("--workstream", "workstream_id", default="")
@click.option("--state", type=click.Choice(["open", "closed"]), default=None)
@_listing
@reported
def list_sessions_command(user_id: str, workstream_id: str, state: str | None, after: str, limit: int) -> None:
    """List sessions, one JSON object a line (idle ones are closed first)."""
    services = command_services()
    services.identities.close_idle()
    with services.database.read() as conn:
        found = list_sessions(conn, Page(after, limit), user_id, workstream_id, state or "")
    _print([{"session_id": s.session_id, "kind": s.kind, "user_id": s.user_id or None,
             "workstream_id": s.workstream_id, "parent_session_id": s.parent_session_id or None,
             "created": s.created, "state": "open" if s.closed_at is None else "closed", "closed_at": s.closed_at,
             "last_active_at": s.last_active_at} for s in found])


@sessions_group.command("close")
@click.argument("session_id", required=False)
@click.option("--idle", is_flag=True, help="Instead: close every session unused for [auth] session_idle_days.")
@click.option("--reason", default="", help="Why (in the audit trail).")
@reported
def close_session(session_id: str | None, idle: bool, reason: str) -> None:
    """Close a session (a coordinator's children with it), or with --idle every idle one; prints the ids closed."""
    services = command_services()
    if idle == bool(session_id):
        raise click.UsageError("name a session, or --idle")
    closed = services.identities.close_idle() if idle else \
        [s.session_id for s in services.identities.close_session(str(session_id), reason=reason)]
    for closed_id in closed:
        click.echo(closed_id)


@projects_group.command("list")
@click.option("--owner", default="")
@click.option("--member", default="")
@click.option("--state", type=click.Choice(["active", "archived"]), default=None)
@_listing
@reported
def list_projects_command(owner: str, member: str, state: str | None, after: str, limit: int) -> None:
    """List projects (as projected from the log), one JSON object a line."""
    services = command_services()
    with services.database.read() as conn:
        found = list_projects(conn, after, limit, owner, member, state or "")
    _print([project.to_dict() | {"members": dict(project.members)} for project in found])


@workstreams.command("list")
@click.option("--owner", default="")
@click.option("--member", default="", help="Attached to a project this user is a member of.")
@click.option("--project", "project_id", default="")
@_listing
@reported
def list_workstreams_command(owner: str, member: str, project_id: str, after: str, limit: int) -> None:
    """List workstreams, one JSON object a line."""
    services = command_services()
    with services.database.read() as conn:
        found = list_workstreams(conn, Page(after, limit), owner, project_id, member)
    _print([{"workstream_id": w.workstream_id, "name": w.name, "owner": w.owner_user_id, "project_id": w.project_id,
             "persona": {"memory": w.persona_memory}} for w in found])
