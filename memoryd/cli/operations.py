"""Commands that operate the store: schema, projections, the log, workers, status, bulk transfer."""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from redis.exceptions import RedisError

from commands.supersede import SupersedeEvent
from events.types import EventMetadata
from memoryd.app.transfer import export_memories, import_memories, read_commands
from memoryd.cli.base import command_services, main, reported
from memoryd.kernel.logs import configure_logging
from memoryd.storage import migrate
from memoryd.storage.db import Database
from memoryd.storage.driver import Transaction
from memoryd.storage.vectors import drop_model, vectors_by_model
from projections.filters import MemoryFilter
from projections.queries import count_memories
from projections.vector_verify import verify_vectors
from projections.vectors import projection_name
from projections.verify import ReadModelVerifier, TableProjection
from workers.runner import run_worker


@main.group()
def db() -> None:
    """Manage the database schema."""


@db.command("upgrade")
@reported
def db_upgrade() -> None:
    """Create or upgrade the schema to the newest revision, then catch the projections up (an upgrade may
    hand a read model back to the log to be replayed)."""
    services = command_services(prepare=False, create=True)
    migrate.upgrade(services.database)
    reached = services.projector.catch_up()
    click.echo(f"database at the newest revision: {services.database.url!r}; projections at position {reached}")


@main.group()
def projections() -> None:
    """Operate the read models."""


@projections.command("rebuild")
@click.argument("which", type=click.Choice(["all", "table", "search", "vectors"]), default="all")
@reported
def rebuild(which: str) -> None:
    """Replay the whole event log into fresh read models.

    table: the structured_memories table, in one transaction (readers see the
    old table until it commits). search: the BM25 index, stored as the
    snapshot that API processes and workers start from. vectors: the semantic
    channel's vectors of the configured model, dropped and embedded again
    (meanwhile search finds the memories without one by BM25 alone); "all"
    includes them when the channel is on.
    """
    services = command_services()
    if which == "vectors" and services.vectors is None:
        raise click.ClickException("the semantic channel is off: there are no vectors to rebuild")
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
    if which in ("all", "vectors") and services.vectors is not None:
        started = time.perf_counter()
        position = services.vectors.rebuild()
        click.echo(f"rebuilt {services.vectors.name} from the log up to position {position} "
                   f"in {time.perf_counter() - started:.1f} s")


@projections.command("models")
@reported
def models() -> None:
    """List the embedding models whose vectors the database holds, and how many of each.

    The configured model (``[search] semantic``) is marked; another is left from a change of model, and
    ``memoryd projections drop-model`` takes it out."""
    services = command_services()
    configured = services.vectors.model if services.vectors is not None else None
    with services.database.read() as conn:
        held = vectors_by_model(conn)
    if configured is not None and configured not in held:
        held[configured] = 0
    if not held:
        click.echo("no vectors are held (the semantic channel has never been on)")
    for model, count in held.items():
        click.echo(f"{model}: {count} vectors" + (" (configured)" if model == configured else ""))


@projections.command("drop-model")
@click.argument("model")
@reported
def drop_vectors_of(model: str) -> None:
    """Delete the vectors of MODEL, and its checkpoint, after a change of model: a model no process is
    configured with any longer (``memoryd projections models`` lists them). The configured model's vectors
    are rebuilt, never dropped: ``memoryd projections rebuild vectors``."""
    services = command_services()
    if services.vectors is not None and model == services.vectors.model:
        raise click.ClickException(f"{model} is the configured model ([search] semantic): its vectors are rebuilt "
                                   "with `memoryd projections rebuild vectors`, not dropped")
    with services.database.transaction(Transaction) as tx:
        held = vectors_by_model(tx.conn)
        if model not in held:
            raise click.ClickException(f"no vectors of {model} are held; held: {', '.join(held) or 'none'}")
        dropped = drop_model(tx.conn, model, projection_name(model))
    click.echo(f"dropped {dropped} vectors of {model} and their checkpoint")


@projections.command("verify")
@reported
def verify() -> None:
    """Replay the whole log into scratch copies of every read model and compare them with the live ones.

    The tables (structured_memories with its counts, the project tables) are replayed into a scratch
    SQLite file and compared row by row at the live checkpoint; the newest stored search snapshot (what
    API processes start from) is compared document by document with a fresh index of the log up to its
    position. With the semantic channel on, its vectors are embedded again from the replayed memories and
    compared with the stored ones (within projections.vector_verify.TOLERANCE). Prints a digest per read
    model and the rows that differ; exits 1 on any difference. The
    live read models are only read, so it runs beside a serving memoryd.
    """
    services = command_services()
    with tempfile.TemporaryDirectory(prefix="memoryd-verify-") as directory:
        scratch = Database(f"sqlite:///{Path(directory) / 'scratch.db'}")
        try:
            migrate.upgrade(scratch)
            verifier = ReadModelVerifier(services.database, services.projector, services.search, scratch)
            results = [verifier.tables(projection) for projection in services.projector.projections
                       if isinstance(projection, TableProjection)]
            if (searched := verifier.search_snapshot()) is not None:
                results.append(searched)
            if services.vectors is not None:
                results.append(verify_vectors(services.database, services.projector, services.vectors.projection))
        finally:
            scratch.dispose()
    for result in results:
        click.echo(f"{result.read_model}: {'equal' if result.ok else 'DIFFERENT'} at position {result.position}, "
                   f"{result.compared} compared, live {result.live[:16]}, replayed {result.replayed[:16]}"
                   + (f", {result.different} differ" if result.different else ""))
        for difference in result.differences:
            click.echo(f"  {difference}")
    if searched is None:
        click.echo("search snapshot: none stored (workers store one; so does `memoryd projections rebuild search`)")
    if not all(result.ok for result in results):
        raise click.ClickException("a read model differs from the log's replay")


def _stopped(fault: Any) -> dict[str, Any] | None:
    return None if fault is None else {"position": fault.position, "event_type": fault.event_type, "error": fault.error}


@main.command()
@click.option("--burst", is_flag=True, help="Run the queued jobs, then exit (for scripts and tests).")
@reported
def worker(burst: bool) -> None:
    """Run projections from the Redis queue, plus a periodic catch-up from the log."""
    configure_logging()
    services = command_services()
    if services.redis is None:
        raise click.ClickException("memoryd worker needs Redis: set MEMORYD_REDIS_URL or [workers] redis_url")
    run_worker(services, burst=burst)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@reported
def status(as_json: bool) -> None:
    """Head of the log, each projection's checkpoint and lag, queue depth, failed jobs."""
    services = command_services()
    head = services.store.head_position()
    faults = {fault.projection: fault for fault in services.projector.faults(everywhere=True)}
    report: dict[str, Any] = {
        "head": head,
        "projections": {name: {"checkpoint": (c := services.projector.checkpoint(name)), "lag": head - c,
                               "stopped": _stopped(faults.get(name))}
                        for name in services.checkpointed},
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
@reported
def import_(source: str, batch_size: int) -> None:
    """Save each line's memory as an ordinary save event (checked whole before anything is written).

    Each line: {"name", "content", "description", "type"?, "scope"? (default global), "scope_id"?}.
    """
    services = command_services()
    with open(source, encoding="utf-8") as lines:
        total = sum(1 for _ in read_commands(lines))  # validate everything first: all or nothing
    with open(source, encoding="utf-8") as lines, click.progressbar(length=total, label="importing",
                                                                      file=sys.stderr) as bar:
        created, updated = import_memories(services.bus, lines, batch_size, bar.update)
    services.projector.catch_up()
    click.echo(f"imported {total} memories: {created} created, {updated} updated")


@memories.command("export")
@click.argument("target", type=click.File("w", encoding="utf-8"), default="-")
@reported
def export(target: Any) -> None:
    """Write every current memory as JSON Lines (to TARGET, default standard output)."""
    services = command_services()
    services.projector.catch_up()
    count = export_memories(services.database, target)
    click.echo(f"exported {count} memories", err=True)


@main.group("events")
def events_group() -> None:
    """Read the event log; supersede an event that projections cannot apply."""


@events_group.command("show")
@click.argument("position", type=click.IntRange(min=1))
@reported
def show_event(position: int) -> None:
    """Print the event at POSITION as JSON (unstorable text escaped)."""
    recorded = command_services().store.event_at(position)
    if recorded is None:
        raise click.ClickException(f"no event at position {position}")
    click.echo(json.dumps(dataclasses.asdict(recorded), indent=2))


@events_group.command("supersede")
@click.argument("position", type=click.IntRange(min=1))
@click.option("--reason", required=True, help="Why: kept in the log as the audit trail.")
@click.option("--replacement", "replacement_file", type=click.File("r"),
              help='JSON file {"event_type": ..., "payload": {...}} to apply instead (default: the original '
                   "with its unstorable text repaired).")
@reported
def supersede(position: int, reason: str, replacement_file: Any) -> None:
    """Let stopped projections move past the event at POSITION.

    Appends an event.supersede event; projections apply its replacement in
    place of the original, which stays in the log. Only an event a projection
    is stopped on can be superseded.
    """
    services = command_services()
    stopped = [fault.projection for fault in services.projector.faults(everywhere=True) if fault.position == position]
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
