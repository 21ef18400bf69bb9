"""Turn composition: memoryd's composer beside the reference algorithm, on the same data in one run.

* **compose, in process**: ``TurnComposer.compose`` (preview: nothing recorded; and recorded: turn
  number, receipt and read counters in one transaction) beside the reference implementation's
  algorithm on the same SQLite database and session: an SQL substring search of the whole context
  (terms OR'd, ``LIKE``, newest first, ``fetch_limit`` rows) united with the ``fetch_limit`` most
  recent memories when it returns fewer, then rank-bm25 (``BM25Okapi``, k1 1.5, b 0.75) over that
  pool (name, description and the first 200 characters of content, split on ``_ - . /`` and
  whitespace), the top k with a score above 0, rendered with the same block code. Envelopes of
  1,000, 10,000 and 100,000 memories (the synthetic corpus of ``bench/search/corpus.py``, one
  timestamp per memory, oldest first). The paths take turns in blocks of ``BLOCK`` turns.
  p50/p95/p99 in ms and ``ratio`` = reference / memoryd.
* **recall**: a labelled set where each prompt names one memory (two of its name's words in a
  question), over the 10,000 envelope: how often each algorithm injects the target (top 5); and
  prompts that share no word with any memory, which should inject nothing.
* **HTTP**: ``memoryd serve`` (waitress, one process) and gunicorn with two API processes on the
  10,000 envelope; 1 and then 4 client threads on keep-alive connections, 1,000 recorded
  ``POST /v1/api/sessions/{id}/turns`` each: p50/p95/p99 and turns per second.

    .venv/bin/python bench/turns/bench_turns.py                     # everything (about 4 minutes)
    .venv/bin/python bench/turns/bench_turns.py --sizes 1000,10000  # quick
    .venv/bin/python bench/turns/bench_turns.py --skip-http
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "search"))

from corpus import CorpusSpec, generate, make_queries  # noqa: E402
from rank_bm25 import BM25Okapi  # noqa: E402
from sqlalchemy import and_, or_, select  # noqa: E402

from events.types import EventMetadata, MemorySaved, memory_stream_id  # noqa: E402
from memoryd.app.scope import resolve  # noqa: E402
from memoryd.app.turn import TurnRequest, block  # noqa: E402
from memoryd.bootstrap import build_services  # noqa: E402
from memoryd.kernel.config import Config, StorageSettings  # noqa: E402
from memoryd.kernel.domain import Memory, utc_timestamp  # noqa: E402
from memoryd.storage import migrate  # noqa: E402
from memoryd.storage.schema import structured_memories as table  # noqa: E402
from memoryd.storage.sessions import Session  # noqa: E402
from projections.filters import MemoryFilter  # noqa: E402

FETCH_LIMIT, K = 50, 5
BLOCK = 250  # turns a path runs before the next path's block
_UPSTREAM_WORD = re.compile(r"[_\-./\s]+")


# -- the data ------------------------------------------------------------------------


def populate(count: int, directory: Path) -> tuple[object, Session, str, list[Memory]]:
    """A SQLite database holding ``count`` global memories (saved one second apart), and a session seeing them."""
    services = build_services(Config(storage=StorageSettings(database_url=f"sqlite:///{directory / 'memoryd.db'}")))
    migrate.upgrade(services.database)
    corpus = generate(CorpusSpec(count=count, seed=42))
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    memories = []
    for number, fields in enumerate(corpus.memories()):
        moment = utc_timestamp(start + dt.timedelta(seconds=number))
        memories.append(Memory(str(uuid.UUID(int=number + 1)), fields["name"], fields["description"], fields["type"],
                               fields["scope"], fields["scope_id"], fields["content"], moment, moment))
    metadata = EventMetadata(actor_user_id="", surface="bench")
    for first in range(0, count, 1_000):
        chunk = memories[first:first + 1_000]
        services.store.append_many([(memory_stream_id(m.name, m.scope, m.scope_id), 1, MemorySaved(m)) for m in chunk],
                                   metadata)
    services.projector.catch_up()
    services.search.catch_up().wait_for_merges()  # measured as a service runs: not while its load's merges finish
    user = services.directory.create_user("bench")
    services.directory.create_token(user, ["read", "write"], [])
    session, token = services.sessions.create("interactive", services.directory.create_workstream(user, "bench"), user)
    return services, session, token, memories


# -- the reference algorithm ---------------------------------------------------------


def reference_compose(services, session: Session, context: str) -> tuple[str, list[str]]:
    """Upstream's injection path on our tables: substring pool united with recency, rank-bm25 over the pool."""
    scope = resolve(session, services.directory, services.store)
    where = scope.envelope_filter()
    with services.database.read() as conn:
        pool = _substring_search(conn, where, context) if context.strip() else []
        if len(pool) < FETCH_LIMIT:
            seen = {row.memory_id for row in pool}
            pool += [row for row in _recent(conn, where) if row.memory_id not in seen]
    if not context.strip():
        chosen = pool[:K]
    else:
        documents = [_upstream_tokens(f"{row.name} {row.description} {row.content[:200]}") for row in pool]
        scores = BM25Okapi(documents, k1=1.5, b=0.75).get_scores(_upstream_tokens(context)) if documents else []
        ranked = sorted((index for index in range(len(pool)) if scores[index] > 0), key=lambda index: -scores[index])
        chosen = [pool[index] for index in ranked[:K]]
    memories = [Memory(row.memory_id, row.name, row.description, row.type, row.scope, row.scope_id, row.content,
                       row.created, row.updated) for row in chosen]
    return block.render(memories).text, [memory.memory_id for memory in memories]


def _substring_search(conn, where: MemoryFilter, context: str) -> list:
    terms, seen = [], set()
    for term in context.split():
        if len(term) >= 2 and term.lower() not in seen:
            seen.add(term.lower())
            terms.append(term)
    terms = terms[:16]
    if not terms:
        return _recent(conn, where)
    matches = [column.ilike(f"%{_escaped(term)}%", escape="\\") for term in terms
               for column in (table.c.name, table.c.description, table.c.content)]
    query = select(table).where(_visible(where), or_(*matches))
    return list(conn.execute(query.order_by(table.c.updated.desc(), table.c.memory_id).limit(FETCH_LIMIT)))


def _recent(conn, where: MemoryFilter) -> list:
    query = select(table).where(_visible(where)).order_by(table.c.updated.desc(), table.c.memory_id).limit(FETCH_LIMIT)
    return list(conn.execute(query))


def _visible(where: MemoryFilter):
    """The envelope as SQL: a pattern with no scope id takes every row of its scope (as upstream)."""
    return or_(*(table.c.scope == pattern.scope if pattern.scope_id is None
                 else and_(table.c.scope == pattern.scope, table.c.scope_id == pattern.scope_id)
                 for pattern in where.scopes or ()))


def _escaped(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _upstream_tokens(text: str) -> list[str]:
    return [token for token in _UPSTREAM_WORD.split(text.lower()) if token]


# -- measuring -----------------------------------------------------------------------


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)

    def at(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return statistics.median(ordered), at(0.95), at(0.99)


def timed(call: Callable[[], object], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def conversation(queries: list[str], number: int) -> list[dict[str, str]]:
    """A chat whose last three user messages are consecutive queries, with assistant replies between."""
    messages = []
    for back in (2, 1, 0):
        messages += [{"role": "user", "content": queries[(number - back) % len(queries)]},
                     {"role": "assistant", "content": "Noted."}]
    return messages[:-1]


def compose_rows(size: int, services, session: Session, queries: list[str], rounds: int) -> list[str]:
    turns = services.turns
    paths: dict[str, Callable[[int], object]] = {
        "memoryd compose (preview)": lambda n: turns.compose(
            session, TurnRequest.parse({"messages": conversation(queries, n), "preview": True})),
        "memoryd compose (recorded)": lambda n: turns.compose(
            session, TurnRequest.parse({"messages": conversation(queries, n)})),
        "reference algorithm": lambda n: reference_compose(
            services, session, TurnRequest.parse({"messages": conversation(queries, n)}).context),
    }
    reference_rounds = rounds if size <= 10_000 else max(50, rounds // 10)
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for first in range(0, rounds, BLOCK):  # blocks in turn: load hits every path alike, none runs in another's cold caches
        for name, path in paths.items():
            for number in range(first, min(first + BLOCK, reference_rounds if name == "reference algorithm" else rounds)):
                samples[name] += timed(lambda path=path, number=number: path(number), 1)
    base = percentiles(samples["memoryd compose (preview)"])
    rows = []
    for name, values in samples.items():
        p50, p95, p99 = percentiles(values)
        rows.append(f"| {size:,} | {name} | {len(values)} | {p50:.3f} | {p95:.3f} | {p99:.3f} | "
                    f"{p95 / base[1]:.1f}x |")
    return rows


def recall(services, session: Session, memories: list[Memory], targets: int, vocabulary: set[str]) -> list[str]:
    rng = random.Random(7)
    chosen = rng.sample(memories, targets)
    prompts = []
    for memory in chosen:
        words = memory.name.split("_")
        prompts.append((f"What did we decide about {' '.join(words[:2])}?", memory.memory_id))
    gibberish = []
    while len(gibberish) < targets:
        word = "".join(rng.choice("qxzjv") for _ in range(5))
        if word not in vocabulary:
            gibberish.append(f"{word.capitalize()} {word[::-1]}?")
    ours = sum(target in [item.memory_id for item in services.turns.compose(
        session, TurnRequest(query=prompt, preview=True)).items] for prompt, target in prompts)
    theirs = sum(target in reference_compose(services, session, prompt)[1] for prompt, target in prompts)
    ours_false = sum(bool(services.turns.compose(session, TurnRequest(query=prompt, preview=True)).items)
                     for prompt in gibberish)
    theirs_false = sum(bool(reference_compose(services, session, prompt)[1]) for prompt in gibberish)
    return [f"| memoryd | {ours}/{targets} ({ours / targets:.0%}) | {ours_false}/{targets} |",
            f"| reference algorithm | {theirs}/{targets} ({theirs / targets:.0%}) | {theirs_false}/{targets} |"]


SERVERS = {  # the embedded default, and the production shape with two API processes
    "memoryd serve (waitress)": [sys.executable, "-m", "memoryd", "serve"],
    "gunicorn -w 2": [sys.executable, "-m", "gunicorn", "-w", "2", "api.wsgi:application"],
}


def over_http(directory: Path, session: Session, token: str, queries: list[str], turns: int) -> list[str]:
    rows = []
    for label, command in SERVERS.items():
        port = _free_port()
        env = {**os.environ, "MEMORYD_DATABASE_URL": f"sqlite:///{directory / 'memoryd.db'}",
               "MEMORYD_PORT": str(port), "GUNICORN_CMD_ARGS": f"--bind 127.0.0.1:{port}"}
        server = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait(port)
            _clients(port, session, token, queries, 1, 100)  # warm-up: each process loads its index
            for clients in (1, 4):
                started = time.perf_counter()
                latencies = _clients(port, session, token, queries, clients, turns)
                rate = len(latencies) / (time.perf_counter() - started)
                p50, p95, p99 = percentiles(latencies)
                rows.append(f"| {label} | {clients} | {len(latencies)} | {p50:.2f} | {p95:.2f} | {p99:.2f} | {rate:.0f} |")
        finally:
            server.terminate()
            server.wait(10)
    return rows


def _clients(port: int, session: Session, token: str, queries: list[str], clients: int, turns: int) -> list[float]:
    """``turns`` recorded turns from ``clients`` threads, each on its own keep-alive connection: latencies in ms."""
    latencies: list[float] = []
    lock = threading.Lock()

    def client(offset: int, count: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for number in range(count):
            body = json.dumps({"messages": conversation(queries, offset + number)})
            started = time.perf_counter()
            connection.request("POST", f"/v1/api/sessions/{session.session_id}/turns", body, headers)
            response = connection.getresponse()
            response.read()
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status == 200, response.status
            with lock:
                latencies.append(elapsed)
        connection.close()

    threads = [threading.Thread(target=client, args=(number * 1_000, turns // clients)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(port: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("memoryd serve did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=500, help="turns per path and size")
    parser.add_argument("--targets", type=int, default=200, help="labelled prompts for recall")
    parser.add_argument("--http-turns", type=int, default=1_000)
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    queries = make_queries(CorpusSpec(count=1_000), 400)
    print(f"python {sys.version.split()[0]}, nproc {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, "
          f"fetch_limit {FETCH_LIMIT}, k {K}\n")
    print("| envelope | path | turns | p50 ms | p95 ms | p99 ms | p95 / memoryd preview |")
    print("|---|---|---|---|---|---|---|")
    recall_rows: list[str] = []
    http_rows: list[str] = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as scratch:
            directory = Path(scratch)
            services, session, token, memories = populate(size, directory)
            for row in compose_rows(size, services, session, queries, args.rounds):
                print(row, flush=True)
            if size == 10_000:
                vocabulary = {word for memory in memories for word in re.findall(r"[^\W_]+", memory.content.lower())}
                recall_rows = recall(services, session, memories, args.targets, vocabulary)
                if not args.skip_http:
                    http_rows = over_http(directory, session, token, queries, args.http_turns)
            services.database.dispose()
    if recall_rows:
        print(f"\nRecall over 10,000 memories ({args.targets} labelled prompts; top {K}):\n")
        print("| algorithm | target injected | prompts sharing no word that injected something |")
        print("|---|---|---|")
        print("\n".join(recall_rows))
    if http_rows:
        print("\nRecorded POST /v1/api/sessions/{id}/turns over loopback HTTP, 10,000 memories:\n")
        print("| server | client threads | turns | p50 ms | p95 ms | p99 ms | turns/s |\n|---|---|---|---|---|---|---|")
        print("\n".join(http_rows))


if __name__ == "__main__":
    main()
