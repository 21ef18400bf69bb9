"""The local model's speed on this machine: one query's embedding (p50, p95) and a batch's throughput.

Wall-clock and CPU time both: on a machine busy with other work the wall clock says what a caller waited,
the CPU time (with ``--threads 1``) what the model itself costs.

Queries are LoCoMo questions embedded one at a time, as a search or a turn embeds its query; the batch is
the conversations' memories (``memory_text`` of each turn and observation), as the vectors projection
embeds them; each batch's vectors are compared with the model as its package ships it (int8 weights
scaled to float32, float products: ``LocalEmbedder(quantize=False)``): mean and least cosine.
``--checkout PATH`` (repeatable) measures another checkout's ``LocalEmbedder`` beside this one's (``git
worktree add ../before REV``), in one process: the queries in blocks of ``BLOCK``, taking turns, the order
rotating per round; medians over the rounds. Needs the semantic extra
(``.venv/bin/pip install -e '.[semantic]'``).

    .venv/bin/python bench/recall/bench_embedding.py DATA                  # a folder of LoCoMo files, or locomo10.json
    .venv/bin/python bench/recall/bench_embedding.py DATA --checkout ../before --memories 1000
    .venv/bin/python bench/recall/bench_embedding.py DATA --threads 0 --queries 500
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from bench_recall import KINDS, commit_label, load_conversations

from memoryd.embeddings.embedder import memory_text

BLOCK = 50  # queries one embedder embeds before the next one's block


def percentile(values: list[float], share: float) -> float:
    return sorted(values)[min(len(values) - 1, int(share * len(values)))]


def embedder_of(checkout: Path, threads: int, **options: bool) -> Any:
    """``checkout``'s ``LocalEmbedder`` (its own ``memoryd/embeddings/local.py``, the shared kernel of this one)."""
    spec = importlib.util.spec_from_file_location(f"local_{abs(hash(checkout))}",
                                                  checkout / "memoryd" / "embeddings" / "local.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LocalEmbedder(threads=threads, **options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a folder of per-conversation LoCoMo files, or locomo10.json")
    parser.add_argument("--checkout", type=Path, action="append", default=[], help="another checkout to measure beside")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads per call (0: one per core)")
    parser.add_argument("--queries", type=int, default=300, help="queries embedded one by one, a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memories", type=int, default=2000, help="memories embedded in one call")
    args = parser.parse_args()
    conversations = load_conversations(args.data, [])
    questions = [question.text for item in conversations for question in item.questions][:args.queries]
    memories = [memory_text(memory.description, memory.content)
                for item in conversations for kind in KINDS for memory in item.memories[kind]][:args.memories]
    embedders, loaded = {}, {}
    for checkout in [*args.checkout, ROOT]:
        label = f"{commit_label(checkout)} {checkout.resolve().name}"
        started = time.perf_counter()
        embedders[label] = embedder_of(checkout.resolve(), args.threads)
        embedders[label].embed(questions[:1])  # a model made on first use is made now
        loaded[label] = time.perf_counter() - started
        embedders[label].embed(questions[1:5])  # the first calls allocate
    took: dict[str, list[list[float]]] = {label: [] for label in embedders}
    computed: dict[str, list[list[float]]] = {label: [] for label in embedders}
    for round_ in range(args.rounds):
        order = list(embedders)[round_ % len(embedders):] + list(embedders)[:round_ % len(embedders)]
        for label in order:
            took[label].append([])
            computed[label].append([])
        for first in range(0, len(questions), BLOCK):
            for label in order:
                for question in questions[first:first + BLOCK]:
                    started, cpu = time.perf_counter(), time.process_time()
                    embedders[label].embed([question])
                    took[label][-1].append((time.perf_counter() - started) * 1000)
                    computed[label][-1].append((time.process_time() - cpu) * 1000)
    print(f"# onnxruntime threads {args.threads or 'one per core'}, {args.rounds} rounds of {len(questions)} queries\n")
    reference = embedder_of(ROOT, args.threads, quantize=False).embed(memories)
    print("| checkout | model | ready (made, a first text embedded) | query, wall clock | query, CPU time | "
          "batch of memories, wall clock | "
          "the same, CPU time | cosine with the model as shipped: mean, least |\n|---|---|---|---|---|---|---|---|")
    for label, embedder in embedders.items():
        started, cpu = time.perf_counter(), time.process_time()
        vectors = embedder.embed(memories)
        batch, batch_cpu = time.perf_counter() - started, time.process_time() - cpu
        cosines = (vectors * reference).sum(axis=1)
        print(f"| {label} | {embedder.model} | {loaded[label]:.1f} s | {median_of(took[label])} | "
              f"{median_of(computed[label])} | {len(memories) / batch:.0f} memories/s | "
              f"{len(memories) / batch_cpu:.0f} memories/s per core | {cosines.mean():.4f}, {cosines.min():.4f} |")
    command, date = shlex.join(["python", *sys.argv]), dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"\n`{command}`, {date}; python {sys.version.split()[0]}, nproc {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f} at the end")


def median_of(rounds: list[list[float]]) -> str:
    """p50 and p95 in ms: the medians over the rounds of each round's."""
    return (f"p50 {statistics.median(statistics.median(found) for found in rounds):.1f} ms, "
            f"p95 {statistics.median(percentile(found, 0.95) for found in rounds):.1f} ms")


if __name__ == "__main__":
    main()
