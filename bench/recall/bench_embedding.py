"""The local model's speed on this machine: one query's embedding (p50, p95) and a batch's throughput.

Wall-clock and CPU time both: on a machine busy with other work the wall clock says what a caller waited,
the CPU time (with ``--threads 1``) what the model itself costs.

Queries are LoCoMo questions embedded one at a time, as a search or a turn embeds its query; the batch is
the conversations' memories (``memory_text`` of each turn and observation), as the vectors projection
embeds them. Needs the semantic extra (``.venv/bin/pip install -e '.[semantic]'``).

    .venv/bin/python bench/recall/bench_embedding.py DATA                  # a folder of LoCoMo files, or locomo10.json
    .venv/bin/python bench/recall/bench_embedding.py DATA --threads 0 --queries 500
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from bench_recall import KINDS, load_conversations

from memoryd.embeddings.embedder import memory_text
from memoryd.embeddings.local import LocalEmbedder


def percentile(values: list[float], share: float) -> float:
    return sorted(values)[min(len(values) - 1, int(share * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a folder of per-conversation LoCoMo files, or locomo10.json")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads per call (0: one per core)")
    parser.add_argument("--queries", type=int, default=300, help="queries embedded one by one")
    parser.add_argument("--memories", type=int, default=2000, help="memories embedded in one call")
    args = parser.parse_args()
    conversations = load_conversations(args.data, [])
    questions = [question.text for item in conversations for question in item.questions][:args.queries]
    memories = [memory_text(memory.description, memory.content)
                for item in conversations for kind in KINDS for memory in item.memories[kind]][:args.memories]
    started = time.perf_counter()
    embedder = LocalEmbedder(threads=args.threads)
    loaded = time.perf_counter() - started
    embedder.embed(questions[:5])  # the first calls allocate
    took, computed = [], []
    for question in questions:
        started, cpu = time.perf_counter(), time.process_time()
        embedder.embed([question])
        took.append((time.perf_counter() - started) * 1000)
        computed.append((time.process_time() - cpu) * 1000)
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed(memories)
    batch, batch_cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"# {embedder.model}, onnxruntime threads {args.threads or 'one per core'}, load average "
          f"{os.getloadavg()[0]:.1f} at the end\n")
    print("| what | wall clock | CPU time (all threads) |\n|---|---|---|")
    print(f"| model load | {loaded * 1000:.0f} ms | |")
    print(f"| query embedding, {len(took)} one at a time | p50 {statistics.median(took):.1f} ms, "
          f"p95 {percentile(took, 0.95):.1f} ms | p50 {statistics.median(computed):.1f} ms, "
          f"p95 {percentile(computed, 0.95):.1f} ms |")
    print(f"| batch of {len(memories)} memories | {batch:.1f} s, {len(memories) / batch:.0f} memories/s | "
          f"{batch_cpu:.1f} s, {len(memories) / batch_cpu:.0f} memories/s per core |")
    command, date = shlex.join(["python", *sys.argv]), dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"\n`{command}`, {date}; python {sys.version.split()[0]}, nproc {os.cpu_count()}")


if __name__ == "__main__":
    main()
