"""The ``memoryd`` command group, the helpers its commands share, and ``serve``."""

from __future__ import annotations

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


def command_services(*, prepare: bool = True) -> Services:
    services = build_services(command_config())
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
@reported
def serve(host: str | None, port: int | None) -> None:
    """Run the HTTP API with waitress (a production WSGI server)."""
    import waitress

    from api.app import create_app

    configure_logging()
    config = command_config()
    services = build_services(config)
    token = prepare_database(services)
    if token:
        click.echo("Created the admin user. Its token (shown only this once):", err=True)
        click.echo(token)
    services.search.warm_up()
    host, port = host or config.server.host, port or config.server.port
    click.echo(f"memoryd listening on http://{host}:{port} (database: {services.database.url!r})", err=True)
    waitress.serve(create_app(services), host=host, port=port, threads=config.server.threads, ident="memoryd")
