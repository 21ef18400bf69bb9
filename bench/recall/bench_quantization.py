"""Which of the local model's products to run in int8: each choice's fidelity, speed and recall, in one run.

memoryd quantizes all-MiniLM-L6-v2's products of an activation and a weight to int8 at first use, all but
those ``memoryd.embeddings.local.quantizable`` keeps in float. This measures that rule beside the model as its
package ships it (no product in int8) and two other rules (every product with a weight; the attention's
384 x 384 projections only), each over the same texts:

* **fidelity**: each vector's cosine with the shipped model's (mean, least), over every ``--every``-th LoCoMo
  memory (``memory_text``) and every fourth question;
* **speed**: ms a text over those texts, one text a call, the choices in turn;
* **recall** on the dev split: memoryd's fusion of its BM25 and the vectors (``semantic.py``), as
  ``bench_recall.py``'s in-process "fused" row computes it.

Needs the semantic extra. Tune only on the development split:

    .venv/bin/python bench/recall/bench_quantization.py DATA
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from bench_recall import KINDS, TOP, figures, load_conversations
from semantic import Channels, fused_ranker

from memoryd.embeddings import local
from memoryd.embeddings.embedder import memory_text
from projections.search.analysis import Analyzer
from projections.search.fusion import Fusion

Rule = Callable[[tuple[int, ...]], bool]
RULES: dict[str, Rule | None] = {
    "none (the model as shipped)": None,
    "every product with a weight": lambda weight: True,
    "memoryd's: all but the narrowing ones": local.quantizable,
    "the attention's projections only": lambda weight: weight == (local.DIMENSION, local.DIMENSION),
}


def embedder(rule: Rule | None) -> local.LocalEmbedder:
    """The local model with ``rule`` in place of memoryd's (None: no product in int8), quantized now."""
    made = local.LocalEmbedder(quantize=rule is not None)
    with mock.patch.object(local, "quantizable", rule or local.quantizable):
        made.warm()
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="a folder of per-conversation LoCoMo files, or locomo10.json")
    parser.add_argument("--every", type=int, default=8, help="every n-th memory for fidelity and speed")
    args = parser.parse_args()
    started = time.perf_counter()
    conversations = load_conversations(args.data, [])
    texts = [memory_text(memory.description, memory.content)
             for item in conversations for kind in KINDS for memory in item.memories[kind]][::args.every]
    texts += [question.text for item in conversations for question in item.questions][::4]
    models = {name: embedder(rule) for name, rule in RULES.items()}
    vectors, took = {}, {}
    for name, model in models.items():
        began = time.perf_counter()
        vectors[name] = model.embed(texts)
        took[name] = (time.perf_counter() - began) * 1000 / len(texts)
    shipped = vectors[next(iter(RULES))]
    analyzer = Analyzer()
    asked = sum(len(item.questions) for item in conversations)
    print(f"# {len(texts)} texts for fidelity and speed; recall: {asked} questions, top {TOP}\n")
    print("| products in int8 | cosine with the shipped model: mean, least | ms a text | fused: obs R@5 | turns R@5 | "
          "turns R@10 |\n|---|---|---|---|---|---|")
    for name, model in models.items():
        cosines = (vectors[name] * shipped).sum(axis=1)
        recall = {}
        for kind in KINDS:
            cached: dict[str, np.ndarray] = {}
            ranked = []
            for item in conversations:
                rank = fused_ranker(Channels(item.memories[kind], model, analyzer, cached), Fusion(), TOP)
                ranked += [rank(question.text) for question in item.questions]
            recall[kind] = figures(conversations, kind, ranked)
        print(f"| {name} | {cosines.mean():.3f}, {cosines.min():.3f} | {took[name]:.1f} | "
              f"{recall['observations']['R@5']:.3f} | {recall['turns']['R@5']:.3f} | {recall['turns']['R@10']:.3f} |")
    command, date = shlex.join(["python", *sys.argv]), dt.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"\n`{command}`, {date}, {time.perf_counter() - started:.0f} s; python {sys.version.split()[0]}, "
          f"nproc {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
