"""The semantic channel's cost to reads: turns in process and searches over HTTP, channel off vs local, same data.

* ``turns``: ``TurnComposer.compose`` (preview and recorded) over a 10,000-memory envelope (the corpus of
  ``bench_turns.populate``), by two services on one SQLite file: one with the channel off, one with the local
  model (``LocalEmbedder``) and the file's real vectors. The paths take turns in blocks of ``BLOCK`` turns, the
  order rotating per round; p50/p95/p99 per round, medians over the rounds. The local side's
  ``embed_query`` is timed inside the turns: the query's embedding's share of a turn.
* ``search``: ``POST /v1/api/memories/search`` over loopback HTTP, one user's read token (one caller's envelope)
  on a keep-alive connection, against ``memoryd serve`` processes on one SQLite file of 100,000 memories, one
  without the channel and two with ``MEMORYD_SEARCH_SEMANTIC=local``; blocks of ``BLOCK`` searches in turn,
  the order rotating per round, medians over the rounds. The query is embedded by the real model on every
  search; the stored vectors are random unit vectors of the model's dimension, written straight into
  ``memory_vectors`` with the projection's checkpoint at the head (100,000 real embeddings take about 25
  minutes on 2 cores). Their values barely change what a search costs: it multiplies the query's vector with
  every row the caller may see and takes their spread, whatever they hold. What does follow the values is how
  many memories reach the similarity floor (each then joins the fusion): random vectors have cosines of about
  ±0.05 with any query, so none reach 0.4; the third server, with ``similarity_floor = 0``, lets half of them
  through, about the share real vectors of this corpus pass at 0.4 (``turns`` prints how many do per query).

The database is built once in ``--work`` (kept, and reused by the next run): the turns' vectors are embedded by
the projection's own catch-up with the real model (about 43 memories/s a core for these ~100-word memories: 4 minutes at 10,000).

    .venv/bin/python bench/turns/bench_semantic.py turns --work ../semantic-bench
    .venv/bin/python bench/turns/bench_semantic.py search --work ../semantic-bench
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_turns import ROOT, _free_port, _wait, conversation, percentiles, populate  # noqa: E402
from corpus import CorpusSpec, make_queries  # noqa: E402
from sqlalchemy import select  # noqa: E402

from memoryd.app.scope import resolve  # noqa: E402
from memoryd.app.services import Services  # noqa: E402
from memoryd.app.turn import TurnRequest  # noqa: E402
from memoryd.bootstrap import build_services  # noqa: E402
from memoryd.embeddings.local import DIMENSION, MODEL, LocalEmbedder  # noqa: E402
from memoryd.kernel.config import Config, StorageSettings  # noqa: E402
from memoryd.storage.driver import Transaction  # noqa: E402
from memoryd.storage.schema import structured_memories  # noqa: E402
from memoryd.storage.sessions import Session  # noqa: E402
from projections.filters import MemoryFilter  # noqa: E402
from projections.projector import lock_checkpoint, save_checkpoint  # noqa: E402
from projections.search.fusion import BM25_DEPTH  # noqa: E402
from projections.search.fusion import SIMILARITY_FLOOR as FLOOR  # noqa: E402
from projections.vectors import _upsert, projection_name, to_bytes  # noqa: E402

BLOCK = 100  # turns or searches a path runs before the next path's block


def database(work: Path, size: int) -> Path:
    """``work``'s database of ``size`` memories, populated on first use."""
    directory = work / f"memories-{size}"
    if not (directory / "memoryd.db").exists():
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        services, *_ = populate(size, directory)
        services.database.dispose()
        print(f"# populated {size:,} memories in {time.perf_counter() - started:.0f} s", flush=True)
    return directory


def open_services(directory: Path, embedder: LocalEmbedder | None) -> Services:
    services = build_services(Config(storage=StorageSettings(database_url=f"sqlite:///{directory / 'memoryd.db'}")),
                              embedder)
    services.search.catch_up().wait_for_merges()
    return services


def viewer(services: Services) -> tuple[Session, str]:
    """A new user's session (for turns) and read token (for searches): they see the global memories."""
    user = services.directory.create_user(f"bench-{uuid.uuid4().hex[:8]}")
    _, token = services.directory.create_token(user, ["read", "write"], [])
    session, _ = services.sessions.create("interactive", services.directory.create_workstream(user, "bench"), user)
    return session, token


def embed_real(services: Services) -> None:
    """The vectors of every memory, by the projection's catch-up and the real model (resumes where it stopped)."""
    channel = services.vectors
    assert channel is not None
    head, start = services.store.head_position(), channel.checkpoint()
    if start >= head:
        return
    started = time.perf_counter()
    channel.catch_up.run()
    channel.index.refresh()
    print(f"# embedded positions {start}..{head} ({len(channel.index):,} vectors held) in "
          f"{time.perf_counter() - started:.0f} s", flush=True)


def fill_random(directory: Path) -> None:
    """A random unit vector of the model's dimension per memory, and the checkpoint at the head, in one
    transaction; the model is never asked (the vectors' values do not change what a search costs)."""
    services = build_services(Config(storage=StorageSettings(database_url=f"sqlite:///{directory / 'memoryd.db'}")))
    name, head = projection_name(MODEL), services.store.head_position()
    rng = np.random.default_rng(42)
    with services.database.transaction(Transaction) as tx:
        if lock_checkpoint(tx.conn, name) >= head:
            services.database.dispose()
            return
        memories = tx.conn.execute(select(structured_memories.c.memory_id, structured_memories.c.version,
                                          structured_memories.c.scope, structured_memories.c.scope_id,
                                          structured_memories.c.type)).fetchall()
        vectors = rng.standard_normal((len(memories), DIMENSION)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        rows = [{"model": MODEL, "memory_id": memory_id, "version": version, "position": head, "scope": scope,
                 "scope_id": scope_id, "type": kind, "vector": to_bytes(vector)}
                for (memory_id, version, scope, scope_id, kind), vector in zip(memories, vectors, strict=True)]
        tx.conn.execute(_upsert(tx.conn.dialect.name), rows)
        save_checkpoint(tx.conn, name, head)
    services.database.dispose()
    print(f"# wrote {len(rows):,} random unit vectors of {DIMENSION} dimensions, checkpoint {head}", flush=True)


def summary(label: str, rounds: list[list[float]]) -> str:
    """A table row: medians over the rounds of each round's p50/p95/p99, and each round's p95."""
    per_round = [percentiles(samples) for samples in rounds]
    p50, p95, p99 = (statistics.median(found[at] for found in per_round) for at in range(3))
    return (f"| {label} | {sum(map(len, rounds))} | {p50:.2f} | {p95:.2f} | {p99:.2f} | "
            f"{' '.join(f'{found[1]:.1f}' for found in per_round)} |")


def turns(work: Path, size: int, rounds: int, per_round: int) -> None:
    directory = database(work, size)
    embedder = LocalEmbedder()
    local = open_services(directory, embedder)
    embed_real(local)
    off = open_services(directory, None)
    session, _ = viewer(off)
    assert local.vectors is not None
    embedding: list[float] = []
    embed_query = local.vectors.embed_query

    def timed_embedding(text: str) -> np.ndarray:
        started = time.perf_counter()
        try:
            return embed_query(text)
        finally:
            embedding.append((time.perf_counter() - started) * 1000)

    local.vectors.embed_query = timed_embedding  # type: ignore[method-assign]
    queries = make_queries(CorpusSpec(count=1_000), 400)
    paths: dict[str, Callable[[int], object]] = {}
    for side, services in (("off", off), ("local", local)):
        for mode, preview in (("preview", True), ("recorded", False)):
            paths[f"{side}, {mode}"] = lambda n, s=services, p=preview: s.turns.compose(
                session, TurnRequest.parse({"messages": conversation(queries, n), "preview": p}))
    for path in paths.values():  # warm-up: first looks at the vectors, caches
        for number in range(20):
            path(number)
    embedding.clear()
    samples: dict[str, list[list[float]]] = {name: [] for name in paths}
    embedded: list[list[float]] = []
    number = 0
    for round_ in range(rounds):
        names = list(paths)
        names = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in names:
            samples[name].append([])
        embedding.clear()
        for _ in range(0, per_round, BLOCK):
            for name in names:
                for _ in range(BLOCK):
                    started = time.perf_counter()
                    paths[name](number)
                    samples[name][-1].append((time.perf_counter() - started) * 1000)
                    number += 1
        embedded.append(list(embedding))
    print(f"\nTurns composed in process over {size:,} memories, channel off vs local (real vectors), "
          f"{rounds} rounds of {per_round} turns a path; ms, medians of the rounds' figures:\n")
    print("| path | turns | p50 | p95 | p99 | p95 of each round |\n|---|---|---|---|---|---|")
    for name, rounds_ in samples.items():
        print(summary(name, rounds_))
    print(summary("local: the query's embedding (inside the turns above)", embedded))
    print(f"\n# vectors held by the local side: {len(local.vectors.index):,}")
    for label, texts in (("a search's query", queries[:100]),
                         ("a turn's context", [TurnRequest.parse({"messages": conversation(queries, n)}).context
                                               for n in range(100)])):
        everything = len(local.vectors.index)  # as many as may pass: every one that reaches the floor counts
        close = [len(local.vectors.index.similar(embed_query(text), MemoryFilter(), FLOOR, everything)[0])
                 for text in texts]
        print(f"# memories whose real vector reaches the floor {FLOOR} with {label}: median "
              f"{statistics.median(close):.0f}, max {max(close)} (100 of them)")
    for services in (off, local):
        services.database.dispose()


def search(work: Path, size: int, rounds: int, per_round: int) -> None:
    directory = database(work, size)
    fill_random(directory)
    services = build_services(Config(storage=StorageSettings(database_url=f"sqlite:///{directory / 'memoryd.db'}")))
    _, token = viewer(services)
    services.database.dispose()
    queries = make_queries(CorpusSpec(count=1_000), 400)
    servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        floor = work / "floor-0.toml"
        floor.write_text("[search]\nsimilarity_floor = 0.0\n")
        for side, semantic, config in (("off", "off", None), ("local", "local", None),
                                       ("local, floor 0", "local", floor)):
            port = _free_port()
            env = {**os.environ, "MEMORYD_DATABASE_URL": f"sqlite:///{directory / 'memoryd.db'}",
                   "MEMORYD_PORT": str(port), "MEMORYD_SEARCH_SEMANTIC": semantic}
            if config is not None:
                env["MEMORYD_CONFIG"] = str(config)
            servers[side] = (subprocess.Popen([sys.executable, "-m", "memoryd", "serve"], env=env, cwd=ROOT,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port)
        connections = {}
        for side, (_, port) in servers.items():
            _wait(port)
            connections[side] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

        def searched(side: str, number: int) -> tuple[float, int]:
            body = json.dumps({"query": queries[number % len(queries)], "limit": 10})
            started = time.perf_counter()
            connections[side].request("POST", "/v1/api/memories/search", body, headers)
            response = connections[side].getresponse()
            answer = response.read()
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status == 200, (response.status, answer[:300])
            return elapsed, len(json.loads(answer).get("memories", []))

        for side in servers:  # warm-up: each process loads its index (and the vectors)
            for number in range(30):
                searched(side, number)
        samples: dict[str, list[list[float]]] = {side: [] for side in servers}
        hits: dict[str, list[int]] = {side: [] for side in servers}
        number = 0
        for round_ in range(rounds):
            order = list(servers)[round_ % len(servers):] + list(servers)[:round_ % len(servers)]
            for side in order:
                samples[side].append([])
            for _ in range(0, per_round, BLOCK):
                for side in order:
                    connections[side].close()  # a new keep-alive connection a block: waitress drops idle ones
                    for _ in range(BLOCK):
                        elapsed, found = searched(side, number)
                        samples[side][-1].append(elapsed)
                        hits[side].append(found)
                        number += 1
        print(f"\nPOST /v1/api/memories/search over loopback HTTP, {size:,} memories, one user's envelope, "
              f"limit 10, `memoryd serve` off vs local (and local, floor 0), {rounds} rounds of {per_round} "
              f"searches a side; ms, medians of the rounds' figures:\n")
        print("| server | searches | p50 | p95 | p99 | p95 of each round |\n|---|---|---|---|---|---|")
        for side, rounds_ in samples.items():
            print(summary(f"semantic {side}", rounds_))
        print("\n" + "\n".join(f"# {side}: hits per search, median {statistics.median(found):.0f}"
                               for side, found in hits.items()))
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(30)
    phases(directory, queries, per_round)


def phases(directory: Path, queries: list[str], count: int) -> None:
    """Where a fused search's time goes, in process on the same file: each phase on each query in turn."""
    services = open_services(directory, LocalEmbedder())
    channel, fused = services.vectors, services.search.fused
    assert channel is not None and fused is not None
    session, _ = viewer(services)
    where = resolve(session, services.directory, services.store).envelope_filter()
    index = services.search.catch_up()
    vectors = {query: channel.embed_query(query) for query in queries[:count]}
    steps: dict[str, Callable[[str], object]] = {
        "BM25, top 10 (the ranking with the channel off)": lambda query: index.candidates(where, query, 10),
        f"BM25, top {BM25_DEPTH} (the fusion's depth)": lambda query: index.candidates(where, query, BM25_DEPTH),
        "the query's embedding": channel.embed_query,
        f"similarities over the envelope, floor {FLOOR}, best 10": lambda query: channel.index.similar(
            vectors[query], where, FLOOR, 10),
        "similarities over the envelope, floor 0, best 10": lambda query: channel.index.similar(
            vectors[query], where, 0.0, 10),
        "the whole fused ranking, top 10": lambda query: fused.candidates(index, where, query, 10),
    }
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for query in vectors:
        for name, step in steps.items():
            started = time.perf_counter()
            step(query)
            samples[name].append((time.perf_counter() - started) * 1000)
    print(f"\nIn process, the same file ({len(channel.index):,} vectors), {count} queries, each phase on each "
          f"query in turn; ms:\n")
    print("| phase | p50 | p95 |\n|---|---|---|")
    for name, values in samples.items():
        p50, p95, _ = percentiles(values)
        print(f"| {name} | {p50:.2f} | {p95:.2f} |")
    services.database.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["turns", "search"])
    parser.add_argument("--work", type=Path, required=True, help="where the databases are built once and kept")
    parser.add_argument("--size", type=int, help="memories (default: 10,000 for turns, 100,000 for search)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=200, help="turns or searches a path a round")
    args = parser.parse_args()
    size = args.size or (10_000 if args.what == "turns" else 100_000)
    print(f"# bench_semantic {' '.join(sys.argv[1:])}: python {sys.version.split()[0]}, nproc {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    (turns if args.what == "turns" else search)(args.work.resolve(), size, args.rounds, args.per_round)
    print(f"# load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
