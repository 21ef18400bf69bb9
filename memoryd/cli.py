"""The ``memoryd`` command line: serve, manage the directory, operate the store.

The CLI and the server find the database the same way:
``MEMORYD_DATABASE_URL``, else ``[storage] database_url`` in the config
file, else the default SQLite file.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

import click

from memoryd import migrate
from memoryd.app.services import Services
from memoryd.bootstrap import build_services, prepare_database
from memoryd.config import Config, load_config
from memoryd.errors import MemorydError
from memoryd.logs import configure_logging
from projections.filters import MemoryFilter
from projections.queries import count_memories

F = TypeVar("F", bound=Callable[..., Any])


def _reported(command: F) -> F:
    """Turn our errors into a one-line message and exit status 1."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MemorydError as error:
            raise click.ClickException(error.message) from None

    return cast(F, run)


def _config() -> Config:
    return cast(Config, click.get_current_context().find_root().obj())


def _services(*, prepare: bool = True) -> Services:
    services = build_services(_config())
    click.get_current_context().call_on_close(services.database.dispose)
    if prepare:
        migrate.ensure_ready(services.database)
    return services


@click.group()
@click.option("--config", "config_path", envvar="MEMORYD_CONFIG", type=click.Path(dir_okay=False),
              help="config.toml to read (default: none; environment variables override it).")
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """memoryd: an event-sourced memory service for AI agents."""
    ctx.obj = lambda: load_config(config_path)


@main.command()
@click.option("--host", help="Address to listen on (default from config: 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (default from config: 8080).")
@_reported
def serve(host: str | None, port: int | None) -> None:
    """Run the HTTP API with waitress (a production WSGI server)."""
    import waitress

    from api.app import create_app

    configure_logging()
    config = _config()
    services = build_services(config)
    token = prepare_database(services)
    if token:
        click.echo("Created the admin user. Its token (shown only this once):", err=True)
        click.echo(token)
    services.search.warm_up()
    host, port = host or config.server.host, port or config.server.port
    click.echo(f"memoryd listening on http://{host}:{port} (database: {services.database.url!r})", err=True)
    waitress.serve(create_app(services), host=host, port=port, threads=config.server.threads, ident="memoryd")


@main.group()
def users() -> None:
    """Manage users."""


@users.command("create")
@click.argument("name")
@_reported
def create_user(name: str) -> None:
    """Create a user; prints the new user id."""
    click.echo(_services().directory.create_user(name))


@main.group()
def tokens() -> None:
    """Manage API tokens."""


@tokens.command("create")
@click.option("--user", "user_id", required=True, help="The user the token acts as.")
@click.option("--scopes", default="read,write", show_default=True, help="Comma-separated: read, write, service.")
@click.option("--permission", "permissions", multiple=True, help="Extra permission, e.g. admin.memories (repeatable).")
@_reported
def create_token(user_id: str, scopes: str, permissions: tuple[str, ...]) -> None:
    """Create a token; prints it (only this once)."""
    _, token = _services().directory.create_token(user_id, _split(scopes), list(permissions))
    click.echo(token)


@main.group()
def workstreams() -> None:
    """Manage workstreams."""


@workstreams.command("create")
@click.option("--owner", "owner_user_id", required=True, help="The owning user's id.")
@click.option("--name", default="", help="A display name.")
@click.option("--project", "project_id", help="Attach this project.")
@click.option("--memory/--no-memory", default=True, show_default=True, help="The persona's memory lever.")
@_reported
def create_workstream(owner_user_id: str, name: str, project_id: str | None, memory: bool) -> None:
    """Create a workstream; prints the new workstream id."""
    click.echo(_services().workstreams.create(owner_user_id, name, project_id, memory))


@workstreams.command("update")
@click.argument("workstream_id")
@click.option("--project", "project_id", help="Attach this project.")
@click.option("--detach", is_flag=True, help="Detach the attached project.")
@click.option("--memory/--no-memory", default=None, help="Turn the persona's memory lever on or off.")
@_reported
def update_workstream(workstream_id: str, project_id: str | None, detach: bool, memory: bool | None) -> None:
    """Attach or detach a project, or flip the persona's memory lever."""
    changes: dict[str, Any] = {}
    if project_id or detach:
        changes["project_id"] = None if detach else project_id
    if memory is not None:
        changes["persona_memory"] = memory
    click.echo(_services().workstreams.change(workstream_id, changes).workstream_id)


@main.group("sessions")
def sessions_group() -> None:
    """Open agent sessions."""


@sessions_group.command("create")
@click.option("--kind", type=click.Choice(["interactive", "coordinator"]), default="interactive", show_default=True)
@click.option("--workstream", "workstream_id", required=True)
@click.option("--user", "user_id", default="", help="The acting user (omit: anonymous).")
@click.option("--parent", "parent_session_id", default="", help="A coordinator child's parent session.")
@_reported
def create_session(kind: str, workstream_id: str, user_id: str, parent_session_id: str) -> None:
    """Open a session; prints its id, then its token alone on the last line."""
    session, token = _services().sessions.create(kind, workstream_id, user_id, parent_session_id)
    click.echo(session.session_id)
    click.echo(token)


@main.group()
def db() -> None:
    """Manage the database schema."""


@db.command("upgrade")
@_reported
def db_upgrade() -> None:
    """Create or upgrade the schema to the newest revision."""
    services = _services(prepare=False)
    migrate.upgrade(services.database)
    click.echo(f"database at the newest revision: {services.database.url!r}")


@main.group()
def projections() -> None:
    """Operate the read models."""


@projections.command("rebuild")
@click.argument("which", type=click.Choice(["all", "table", "search"]), default="all")
@_reported
def rebuild(which: str) -> None:
    """Replay the whole event log into fresh read models.

    table: the structured_memories table, in one transaction (readers see the
    old table until it commits). search: the BM25 index, stored as the
    snapshot that API processes and workers start from.
    """
    services = _services()
    if which in ("all", "table"):
        position = services.projector.rebuild(services.memory_table)
        with services.database.read() as conn:
            count = count_memories(conn, MemoryFilter())
        click.echo(f"rebuilt structured_memories from the log up to position {position}: {count} memories")
    if which in ("all", "search"):
        started = time.perf_counter()
        with click.progressbar(length=services.store.head_position(), label="indexing", file=sys.stderr) as bar:
            index = services.search.rebuild(bar.update)
        position = services.search.save_snapshot()
        click.echo(f"rebuilt the search index from the log up to position {position}: {len(index)} memories "
                   f"in {time.perf_counter() - started:.1f} s (snapshot stored)")


def _stopped(fault: Any) -> dict[str, Any] | None:
    return None if fault is None else {"position": fault.position, "event_type": fault.event_type, "error": fault.error}


def _split(values: str) -> list[str]:
    return [value.strip() for value in values.split(",") if value.strip()]



@main.command()
@click.option("--burst", is_flag=True, help="Run the queued jobs, then exit (for scripts and tests).")
@_reported
def worker(burst: bool) -> None:
    """Run projections from the Redis queue, plus a periodic catch-up from the log."""
    from workers.runner import run_worker

    configure_logging()
    services = _services()
    if services.redis is None:
        raise click.ClickException("memoryd worker needs Redis: set MEMORYD_REDIS_URL or [workers] redis_url")
    run_worker(services, burst=burst)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@_reported
def status(as_json: bool) -> None:
    """Head of the log, each projection's checkpoint and lag, queue depth, failed jobs."""
    import json

    from redis.exceptions import RedisError

    services = _services()
    head = services.store.head_position()
    faults = {fault.projection: fault for fault in services.projector.faults()}
    report: dict[str, Any] = {
        "head": head,
        "projections": {p.name: {"checkpoint": (c := services.projector.checkpoint(p.name)), "lag": head - c,
                                 "stopped": _stopped(faults.get(p.name))}
                        for p in services.projector.projections},
        "queue": None,
    }
    if services.queue is not None:
        try:
            report["queue"] = {"name": services.queue.name, "depth": services.queue.count,
                               "failed_jobs": services.queue.failed_job_registry.count}
        except RedisError as error:
            report["queue"] = {"name": services.queue.name, "error": f"Redis unreachable: {error}"}
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(f"log head: position {head}")
    for name, progress in report["projections"].items():
        click.echo(f"projection {name}: checkpoint {progress['checkpoint']}, lag {progress['lag']}")
        if name in faults:
            click.echo(f"  STOPPED: {faults[name].describe()}")
            click.echo(f"  see the event with 'memoryd events show {faults[name].position}'; "
                       f"supersede it with 'memoryd events supersede {faults[name].position} --reason ...'")
    queue = report["queue"]
    if queue is None:
        click.echo("queue: none (projections run in-process)")
    elif "error" in queue:
        click.echo(f"queue {queue['name']}: {queue['error']}")
    else:
        click.echo(f"queue {queue['name']}: {queue['depth']} waiting, {queue['failed_jobs']} failed")


@main.group()
def memories() -> None:
    """Bulk import and export (JSON Lines, one memory per line)."""


@memories.command("import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--batch", "batch_size", default=500, show_default=True, help="Memories per transaction.")
@_reported
def import_(source: str, batch_size: int) -> None:
    """Save each line's memory as an ordinary save event (checked whole before anything is written).

    Each line: {"name", "content", "description", "type"?, "scope"? (default global), "scope_id"?}.
    """
    from memoryd.app.transfer import import_memories, read_commands

    services = _services()
    with open(source, encoding="utf-8") as lines:
        total = sum(1 for _ in read_commands(lines))  # validate everything first: all or nothing
    with open(source, encoding="utf-8") as lines, click.progressbar(length=total, label="importing",
                                                                      file=sys.stderr) as bar:
        created, updated = import_memories(services.bus, lines, batch_size, bar.update)
    services.projector.catch_up()
    click.echo(f"imported {total} memories: {created} created, {updated} updated")


@memories.command("export")
@click.argument("target", type=click.File("w", encoding="utf-8"), default="-")
@_reported
def export(target: Any) -> None:
    """Write every current memory as JSON Lines (to TARGET, default standard output)."""
    from memoryd.app.transfer import export_memories

    services = _services()
    services.projector.catch_up()
    count = export_memories(services.database, target)
    click.echo(f"exported {count} memories", err=True)


@main.group("events")
def events_group() -> None:
    """Read the event log; supersede an event that projections cannot apply."""


@events_group.command("show")
@click.argument("position", type=click.IntRange(min=1))
@_reported
def show_event(position: int) -> None:
    """Print the event at POSITION as JSON (unstorable text escaped)."""
    import dataclasses
    import json

    recorded = _services().store.event_at(position)
    if recorded is None:
        raise click.ClickException(f"no event at position {position}")
    click.echo(json.dumps(dataclasses.asdict(recorded), indent=2))


@events_group.command("supersede")
@click.argument("position", type=click.IntRange(min=1))
@click.option("--reason", required=True, help="Why: kept in the log as the audit trail.")
@click.option("--replacement", "replacement_file", type=click.File("r"),
              help='JSON file {"event_type": ..., "payload": {...}} to apply instead (default: the original '
                   "with its unstorable text repaired).")
@_reported
def supersede(position: int, reason: str, replacement_file: Any) -> None:
    """Let stopped projections move past the event at POSITION.

    Appends an event.supersede event; projections apply its replacement in
    place of the original, which stays in the log. Only an event a projection
    is stopped on can be superseded.
    """
    import json

    from commands.supersede import SupersedeEvent
    from events.types import EventMetadata

    services = _services()
    stopped = [fault.projection for fault in services.projector.faults() if fault.position == position]
    if not stopped:
        raise click.ClickException(f"no projection is stopped on the event at position {position}; "
                                   "'memoryd status' shows where projections stand")
    try:
        replacement = json.load(replacement_file) if replacement_file is not None else None
    except ValueError as error:
        raise click.ClickException(f"the replacement file is not JSON: {error}") from None
    outcome = services.bus.handle(SupersedeEvent(position, reason, replacement), EventMetadata(surface="cli"))
    click.echo(f"superseded the event at position {position} by the event at position {outcome.position}; "
               f"{', '.join(stopped)} moved on")


@main.group("projects")
def projects_group() -> None:
    """Manage projects (every change is an event in the log)."""


def _project_command(command: Any) -> None:
    from events.types import EventMetadata

    outcome = _services().bus.handle(command, EventMetadata(surface="cli"))
    click.echo(outcome.project.project_id)


@projects_group.command("create")
@click.option("--owner", "owner_user_id", required=True, help="The owning user's id.")
@click.option("--name", required=True, help="The project's name.")
@_reported
def create_project(owner_user_id: str, name: str) -> None:
    """Create a project; prints its id."""
    from commands.projects import CreateProject

    _project_command(CreateProject(name, owner_user_id))


@projects_group.command("grant")
@click.argument("project_id")
@click.argument("user_id")
@click.option("--access", type=click.Choice(["read", "write"]), required=True)
@_reported
def grant_access(project_id: str, user_id: str, access: str) -> None:
    """Grant a user read or write access (or change it)."""
    from commands.projects import GrantProjectAccess

    _project_command(GrantProjectAccess(project_id, user_id, access))


@projects_group.command("revoke")
@click.argument("project_id")
@click.argument("user_id")
@_reported
def revoke_access(project_id: str, user_id: str) -> None:
    """Revoke a member's access."""
    from commands.projects import RevokeProjectAccess

    _project_command(RevokeProjectAccess(project_id, user_id))


@projects_group.command("archive")
@click.argument("project_id")
@_reported
def archive_project(project_id: str) -> None:
    """Archive a project: its memories become unreachable until it is reactivated."""
    from commands.projects import ArchiveProject

    _project_command(ArchiveProject(project_id))


@projects_group.command("reactivate")
@click.argument("project_id")
@_reported
def reactivate_project(project_id: str) -> None:
    """Make an archived project active again."""
    from commands.projects import ReactivateProject

    _project_command(ReactivateProject(project_id))


@projects_group.command("delete")
@click.argument("project_id")
@_reported
def delete_project(project_id: str) -> None:
    """Delete a project and every memory in its scope (each deletion an event)."""
    from commands.projects import DeleteProject

    _project_command(DeleteProject(project_id))
