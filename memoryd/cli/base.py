"""The ``memoryd`` command group, the helpers its commands share, and ``serve``."""

from __future__ import annotations

import errno
from collections.abc import Callable
from functools import cache, wraps
from typing import Any, TypeVar, cast

import click
from sqlalchemy.exc import DBAPIError

from memoryd.app.services import Services
from memoryd.bootstrap import build_services, prepare_database
from memoryd.kernel.config import Config, load_config
from memoryd.kernel.errors import MemorydError
from memoryd.kernel.logs import configure_logging
from memoryd.storage import migrate
from memoryd.storage.db import require_existing, unavailable

F = TypeVar("F", bound=Callable[..., Any])


def reported(command: F) -> F:
    """Turn our errors into a one-line message and exit status 1."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MemorydError as error:
            raise click.ClickException(error.message) from None

    return cast(F, run)


def command_config() -> Config:
    return cast(Config, click.get_current_context().find_root().obj())


def command_services(*, prepare: bool = True, create: bool = False) -> Services:
    """The services on the configured database; an SQLite file that does not exist is refused unless
    ``create`` (only ``serve`` and ``db upgrade`` create a database)."""
    config = command_config()
    if not create:
        require_existing(config.storage.database_url)
    services = build_services(config)
    click.get_current_context().call_on_close(services.database.dispose)
    if prepare:
        migrate.ensure_ready(services.database)
    return services


class MemorydGroup(click.Group):
    """The root group: a database that cannot be reached, from any command, is one line naming its URL."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DBAPIError as error:
            if error.statement is not None:  # a statement failed: not the connection
                raise
            url = command_config().storage.database_url
            raise click.ClickException(unavailable(url, error.orig or error).message) from None


@click.group(cls=MemorydGroup)
@click.option("--config", "config_path", envvar="MEMORYD_CONFIG", type=click.Path(dir_okay=False),
              help="config.toml to read (default: none; environment variables override it).")
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """memoryd: an event-sourced memory service for AI agents."""
    ctx.obj = cache(lambda: load_config(config_path))  # loaded once, by the first command that needs it


@main.command()
@click.option("--host", help="Address to listen on (default from config: 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535),
              help="Port to listen on (default from config: 8080; 0: any free port, announced).")
@reported
def serve(host: str | None, port: int | None) -> None:
    """Run the HTTP API with waitress (a production WSGI server)."""
    import waitress

    from api.app import create_app

    configure_logging()
    config = command_config()
    services = build_services(config)
    host = host or config.server.host
    port = config.server.port if port is None else port
    try:  # bound before anything is announced or created, so a port in use is one line and nothing else
        server = waitress.create_server(create_app(services), host=host, port=port, threads=config.server.threads,
                                        ident="memoryd")
    except OSError as error:
        raise click.ClickException(_unbindable(host, port, error)) from None
    token = prepare_database(services)
    if token:
        click.echo("Created the admin user. Its token (shown only this once):", err=True)
        click.echo(token)
    services.search.warm_up()
    if services.vectors is not None and services.redis is None:  # with workers, they embed
        services.vectors.start()
    bound_host = f"[{server.effective_host}]" if ":" in server.effective_host else server.effective_host
    bound = f"{bound_host}:{server.effective_port}"  # port 0: the one the system chose
    click.echo(f"memoryd listening on http://{bound} (database: {services.database.url!r})", err=True)
    server.run()


def _unbindable(host: str, port: int, error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use: choose another with --port or MEMORYD_PORT"
    return f"cannot listen on {host}:{port}: {error.strerror or error}; choose another with --host/--port " \
           "(MEMORYD_HOST, MEMORYD_PORT)"
