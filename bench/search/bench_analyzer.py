"""The analyzer's cost: PyStemmer (C) beside snowballstemmer (pure Python), cached and not, and the plain split it replaced.

What indexing a memory spends turning its text into term counts, on the synthetic corpus
(``corpus.py``: 30,000 made-up words, Zipfian), all paths in one process, taking turns
round by round (five rounds, medians):

* ``split only``: lowercase and ``[^\\W_]+``, then a ``Counter``: the tokenizer before the analyzer;
* ``analyzer none``: ``Analyzer("none").document`` (split, summary weighted, no stemming);
* ``analyzer english (PyStemmer)``: the shipped path, stems remembered per word (``CACHE_WORDS``);
* ``analyzer english (snowballstemmer)``: the same analyzer with the pure-Python stemmer of the
  same Snowball algorithm in place of PyStemmer;
* and, per word with nothing remembered, each stemmer's ``stemWords`` over every word of the corpus.

Both stemmers give the same stems (checked on every distinct word). Needs ``snowballstemmer``
(``.venv/bin/pip install -e '.[bench]'``).

    .venv/bin/python bench/search/bench_analyzer.py                 # 100,000 memories, about a minute
    .venv/bin/python bench/search/bench_analyzer.py --count 20000
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

import Stemmer
from corpus import CorpusSpec, generate
from snowballstemmer.english_stemmer import EnglishStemmer

from projections.search.analysis import Analyzer

_SPLIT = re.compile(r"[^\W_]+")
Fields = tuple[str, str, str]


def split_only(fields: Fields) -> Counter[str]:
    return Counter(_SPLIT.findall(f"{fields[0]} {fields[1]} {fields[2]}".lower()))


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    corpus = generate(CorpusSpec(count=args.count, seed=42))
    memories: list[Fields] = [(m["name"], m["description"], m["content"]) for m in corpus.memories()]
    words = [word for fields in memories for word in _SPLIT.findall(" ".join(fields).lower())]
    distinct = sorted(set(words))
    python_stemmer, c_stemmer = EnglishStemmer(), Stemmer.Stemmer("english")
    assert python_stemmer.stemWords(distinct) == c_stemmer.stemWords(distinct), "the two stemmers disagree"

    def analyzing(analyzer: Analyzer) -> Callable[[], object]:
        return lambda: [analyzer.document(*fields) for fields in memories]

    def fresh(stemmer: object | None) -> Analyzer:
        analyzer = Analyzer("english")
        if stemmer is not None:
            analyzer._stemmer = stemmer  # the same analyzer, another implementation of the same algorithm
        return analyzer

    paths: dict[str, Callable[[], Callable[[], object]]] = {
        "split only (the tokenizer before)": lambda: lambda: [split_only(fields) for fields in memories],
        "analyzer none": lambda: analyzing(Analyzer("none")),
        "analyzer english (PyStemmer), cold": lambda: analyzing(fresh(None)),
        "analyzer english (snowballstemmer), cold": lambda: analyzing(fresh(python_stemmer)),
        "stemWords per word, nothing remembered (PyStemmer)": lambda: lambda: c_stemmer.stemWords(words),
        "stemWords per word, nothing remembered (snowballstemmer)": lambda: lambda: python_stemmer.stemWords(words),
    }
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for round_ in range(args.rounds):
        order = list(paths)[round_ % len(paths):] + list(paths)[:round_ % len(paths)]
        for name in order:
            seconds[name].append(timed(paths[name]()))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)

    base = statistics.median(seconds["split only (the tokenizer before)"])
    print(f"# The analyzer's cost: {args.count:,} memories, {len(words):,} words ({len(distinct):,} distinct), "
          f"{args.rounds} rounds, medians\n")
    print("| path | seconds | µs per memory | words per second | vs split only |")
    print("|---|---|---|---|---|")
    for name, times in seconds.items():
        median = statistics.median(times)
        print(f"| {name} | {median:.2f} | {median / args.count * 1e6:.1f} | {len(words) / median:,.0f} "
              f"| {median / base:.2f}x |")
    print(f"\n`python {' '.join(sys.argv)}`, {dt.date.today()}; PyStemmer {Stemmer.version()}")


if __name__ == "__main__":
    main()
