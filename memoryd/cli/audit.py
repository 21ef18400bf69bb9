"""Commands for auditors: prove the log complete and unaltered (its hash chain), pin its head, and carry the
log itself out (and into an empty database) as JSON Lines."""

from __future__ import annotations

import sys
from typing import Any

import click

from events.chain import Checkpoint
from events.export import export_log, read_log
from events.log_import import import_log
from events.whole_log import verify_chain
from memoryd.cli.base import command_services, main, reported
from memoryd.cli.operations import events_group


@main.group()
def audit() -> None:
    """Verify the event log's hash chain; print its head to publish elsewhere."""


def _checkpoint(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Checkpoint | None:
    try:
        return None if value is None else Checkpoint.parse(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@audit.command("verify")
@click.option("--since-checkpoint", "since", metavar="POSITION:HASH", callback=_checkpoint,
              help="A head printed earlier by `memoryd audit checkpoint`: the log must still extend it.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@reported
def verify(since: Checkpoint | None, quiet: bool) -> None:
    """Walk the whole log and check every event's payload digest, chain hash and position.

    Exits 1 naming the first position that does not hold: an event changed, a position missing that
    was never a recorded gap, or a position out of order. Runs beside a serving memoryd, in constant
    memory; what is appended during the walk is left for the next one.
    """
    store = command_services().store
    head = store.chain_head()
    with click.progressbar(length=head.position, label="verifying", file=sys.stderr,
                           hidden=quiet) as bar:
        verdict = verify_chain(store, since, bar.update)
    if verdict.broken is not None:
        raise click.ClickException(f"the log does not verify at position {verdict.broken.position}: "
                                   f"{verdict.broken.reason} ({verdict.events} events before it verified)")
    click.echo(f"the log verifies: {verdict.events} events, head {verdict.head}"
               + (f", extending checkpoint {since.position}" if since else ""))


@audit.command("checkpoint")
@reported
def checkpoint() -> None:
    """Print the log's head as POSITION:HASH, to publish somewhere memoryd cannot write."""
    click.echo(str(command_services().store.checkpoint()))


@events_group.command("export")
@click.argument("target", type=click.File("w", encoding="utf-8"), default="-")
@reported
def export(target: Any) -> None:
    """Write the whole log as JSON Lines (standard output by default): a header with the head and the gaps,
    then every event exactly as stored, hashes included. A serving memoryd may go on writing: the export
    is one consistent read of the log, as it was when it began."""
    count = export_log(command_services().store, target)
    click.echo(f"exported {count} events", err=True)


@events_group.command("import")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@reported
def import_(source: Any) -> None:
    """Load an export into an empty database, checking its chain as it reads (nothing is kept unless all of
    it verifies), then project it. Users, tokens and other reference data are not part of the log."""
    services = command_services()
    head, gaps, erased, events = read_log(source)
    verdict = import_log(services.store, head, gaps, events, erased)
    reached = services.projector.catch_up()
    click.echo(f"imported {verdict.events} events, head {head}; projections at position {reached}")
