"""The semantic channel's cost to saves, and how fast its embedding backlog drains.

Two measurements, per backend:

* **Saves, channel off vs on, side by side.** Two fresh databases per round, one without the channel and one
  with it (its catch-up thread running in the same process, as the serving process runs it without workers).
  The same saves go to both, interleaved in chunks of ``CHUNK`` (alternating which goes first), so noise hits
  both alike; saves/s per side, median over the rounds. A save never waits for its embedding, so the two
  should match; what the channel costs a save is the catch-up's own transactions and CPU beside it.
* **Drain of a bulk import.** ``--drain`` memories are imported (``memoryd memories import``'s path, batches of
  500) with the channel off, then the channel's catch-up thread starts from position 0 and the time until its
  checkpoint reaches the head gives the drain rate (memories/s). Meanwhile a reader thread searches (the search
  service's own path: the query embedded, BM25 fused with the vectors caught up so far) and the vectors index
  answers similarities for 100 candidates: both keep answering, and their median latencies are reported.
  100,000 memories drain in ``100000 / rate`` seconds at the measured rate (the per-batch work does not grow
  with the backlog: each step reads the next batch by position).

The embedder is the tests' deterministic fake (hashed bag of words, 64 dimensions: ``tests/fake_embeddings.py``),
so the numbers are the channel's own mechanics (read, decode, write, checkpoint). ``--embed-ms`` adds a pause per
text inside the embedder, releasing the GIL as an ONNX session does, to see a model's speed bound the drain: the
drain rate is then about ``min(mechanics rate, 1000 / embed_ms)`` memories/s per catch-up thread.
``--embedder local`` uses the real local model instead (``memoryd.embeddings.local``, the semantic extra): the
saves' figures then include the model's CPU beside them, and the searches during the drain embed their query.

Run from the repo root::

    .venv/bin/python bench/bench_vectors.py                         # both backends, defaults
    .venv/bin/python bench/bench_vectors.py --backend sqlite --saves 1000 --rounds 5 --drain 20000
    .venv/bin/python bench/bench_vectors.py --embed-ms 2            # a model at 2 ms per text
    .venv/bin/python bench/bench_vectors.py --backend sqlite --embedder local --drain 3000  # the real model

PostgreSQL: ``MEMORYD_BENCH_POSTGRES_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``); fresh
schemas, dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import SEED, environment, memory_content, postgres_schema, print_header, print_results

from commands.model import SaveMemory
from events.types import EventMetadata
from memoryd.app.services import Services
from memoryd.app.transfer import import_memories
from memoryd.bootstrap import build_services
from memoryd.embeddings.embedder import Embedder, Vectors
from memoryd.kernel.config import Config, StorageSettings
from memoryd.kernel.domain import REST_MAX_CONTENT, Namespace
from memoryd.storage import migrate
from projections.filters import MemoryFilter, ScopePattern
from tests.fake_embeddings import FakeEmbedder

CHUNK = 50
DEFAULT_SAVES = {"sqlite": 1000, "postgres": 500}
DEFAULT_DRAIN = {"sqlite": 20_000, "postgres": 10_000}
GLOBAL = Namespace("global", "")
EVERYONE = MemoryFilter(scopes=(ScopePattern("global"),))


class SlowFake(FakeEmbedder):
    """The fake, plus a pause per text (GIL released, as in an ONNX session's ``run``)."""

    def __init__(self, seconds_per_text: float) -> None:
        super().__init__()
        self.seconds_per_text = seconds_per_text

    def embed(self, texts: Sequence[str]) -> Vectors:
        time.sleep(self.seconds_per_text * len(texts))
        return super().embed(texts)


def make_embedder(kind: str, seconds_per_text: float) -> Callable[[], Embedder]:
    """A new fake per call, or the one local model (loaded once: it is thread-safe)."""
    if kind == "fake":
        return lambda: SlowFake(seconds_per_text)
    from memoryd.embeddings.local import LocalEmbedder

    model = LocalEmbedder()
    return lambda: model


def stopped(services: Services) -> None:
    """The channel's catch-up stopped and its thread gone: a real model's step (256 texts) outlasts ``stop``'s
    10 s wait, and would go on embedding into the next round, then fail on a removed database."""
    assert services.vectors is not None
    services.vectors.stop()
    for thread in threading.enumerate():
        if thread.name == f"memoryd-{services.vectors.name}":
            thread.join()


@contextmanager
def databases(backend: str, count: int) -> Iterator[list[str]]:
    """``count`` fresh, empty database URLs on ``backend``."""
    with ExitStack() as stack:
        if backend == "sqlite":
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memoryd-bench-vectors-")))
            yield [f"sqlite:///{directory / f'db{index}.sqlite'}" for index in range(count)]
        else:
            yield [stack.enter_context(postgres_schema("vectors"))[1] for _ in range(count)]


def services_on(url: str, embedder: Embedder | None) -> Services:
    services = build_services(Config(storage=StorageSettings(database_url=url)), embedder)
    migrate.upgrade(services.database)
    return services


def saves(rng: random.Random, count: int) -> list[SaveMemory]:
    return [SaveMemory.validated(name=f"note_{index}", content=memory_content(rng), description="bench",
                                 type="general", max_content=REST_MAX_CONTENT, resolve_namespace=lambda: GLOBAL)
            for index in range(count)]


def saves_round(backend: str, count: int, seed: int, embedder: Callable[[], Embedder]) -> tuple[float, float, int]:
    """(saves/s off, saves/s on, vectors written by the end) for one round on fresh databases."""
    commands = saves(random.Random(seed), count)
    metadata = EventMetadata(surface="cli")
    with databases(backend, 2) as (off_url, on_url):
        off, on = services_on(off_url, None), services_on(on_url, embedder())
        assert on.vectors is not None
        on.vectors.start()
        spent = {"off": 0.0, "on": 0.0}
        try:
            for first in range(0, count, CHUNK):
                order = [("off", off), ("on", on)] if (first // CHUNK) % 2 == 0 else [("on", on), ("off", off)]
                for side, services in order:
                    started = time.perf_counter()
                    for command in commands[first:first + CHUNK]:
                        services.bus.handle(command, metadata)
                    spent[side] += time.perf_counter() - started
            embedded = on.vectors.checkpoint()
        finally:
            stopped(on)
            off.database.dispose()
            on.database.dispose()
    return count / spent["off"], count / spent["on"], embedded


def drain(backend: str, count: int, seed: int, embedder: Callable[[], Embedder]) -> dict[str, float]:
    rng = random.Random(seed)
    lines = (json.dumps({"name": f"imported_{index}", "content": memory_content(rng), "description": "imported"})
             for index in range(count))
    with databases(backend, 1) as (url,):
        services = services_on(url, embedder())
        channel = services.vectors
        assert channel is not None
        try:
            started = time.perf_counter()
            import_memories(services.bus, lines)
            imported = time.perf_counter() - started
            head = services.store.head_position()
            searches, similarities = [], []
            done = threading.Event()
            query = channel.embed_query("deploy release rollback")

            def read() -> None:
                while not done.is_set():
                    at = time.perf_counter()
                    with services.database.read() as conn:
                        candidates = [row["memory_id"] for row in services.search.memories(conn, EVERYONE, "deploy", 100)]
                    searches.append(time.perf_counter() - at)
                    at = time.perf_counter()
                    channel.similarities(query, candidates)
                    similarities.append(time.perf_counter() - at)
                    done.wait(0.05)

            reader = threading.Thread(target=read)
            reader.start()
            started = time.perf_counter()
            channel.start()
            while channel.checkpoint() < head:
                time.sleep(0.05)
            drained = time.perf_counter() - started
            done.set()
            reader.join()
            channel.stop()
            channel.index.refresh()
            return {"imported_per_s": count / imported, "drain_s": drained, "drain_per_s": count / drained,
                    "searches": len(searches), "search_ms": 1000 * statistics.median(searches),
                    "similarities_ms": 1000 * statistics.median(similarities), "held": len(channel.index)}
        finally:
            channel.stop()
            services.database.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--saves", type=int, help="saves per side per round (default: 1000 SQLite, 500 PostgreSQL)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--drain", type=int, help="memories imported, then drained (default: 20000 SQLite, "
                                                  "10000 PostgreSQL; 0: skip)")
    parser.add_argument("--embed-ms", type=float, default=0.0, help="a pause per text in the fake (a model's cost)")
    parser.add_argument("--embedder", choices=["fake", "local"], default="fake",
                        help="local: the real all-MiniLM-L6-v2 (the semantic extra) in place of the fake")
    args = parser.parse_args(argv)
    embedder = make_embedder(args.embedder, args.embed_ms / 1000)
    described = (f"local, {embedder().model}" if args.embedder == "local"
                 else f"fake, 64 dims, +{args.embed_ms:g} ms per text")
    print_header(__file__, argv, environment(f"embedder: {described}"))
    table, notes = ["backend   side  saves/s (median of rounds)  rounds"], []
    for backend in ("sqlite", "postgres") if args.backend == "both" else (args.backend,):
        count = args.saves or DEFAULT_SAVES[backend]
        rounds = [saves_round(backend, count, SEED + index, embedder) for index in range(args.rounds)]
        for side, column in (("off", 0), ("on", 1)):
            values = [round_[column] for round_ in rounds]
            table.append(f"{backend:9} {side:4}  {statistics.median(values):10.0f}"
                         f"                  {' '.join(f'{value:.0f}' for value in values)}")
        ratio = statistics.median(round_[1] / round_[0] for round_ in rounds)
        notes.append(f"{backend}: {count} saves per side per round, {args.rounds} rounds; on/off median ratio "
                     f"{ratio:.3f}; vectors caught up during the saves to {statistics.median(r[2] for r in rounds):.0f} "
                     f"of {count} positions (median)")
        size = DEFAULT_DRAIN[backend] if args.drain is None else args.drain
        if size:
            found = drain(backend, size, SEED, embedder)
            notes.append(f"{backend}: drain of {size} imported memories (imported at {found['imported_per_s']:.0f}/s "
                         f"with the channel off): {found['drain_s']:.1f} s, {found['drain_per_s']:.0f} memories/s "
                         f"-> 100,000 in about {100_000 / found['drain_per_s']:.0f} s (extrapolated); "
                         f"{found['searches']:.0f} searches during it, median {found['search_ms']:.1f} ms, "
                         f"similarities for 100 candidates median {found['similarities_ms']:.2f} ms; "
                         f"{found['held']:.0f} vectors held at the end")
    print_results(table, notes)


if __name__ == "__main__":
    main()
