"""A deterministic synthetic corpus of memories and chat-like queries for search benchmarks.

Everything is drawn from one seeded generator, so a ``CorpusSpec`` always gives
the same memories and queries:

* a vocabulary of ``vocab_size`` (default 30,000) made-up pronounceable words,
  about 3 % of them digit-bearing (``kor64``, ``2024``, ``v8n``), ranked so that
  short words tend to be frequent (Zipf's law of abbreviation);
* word frequencies Zipfian: P(rank r) proportional to 1 / (r + q)^s
  (default s = 1.0, q = 0: pure Zipf), sampled with numpy by inverse CDF;
* a memory = snake_case ``name`` (2 to 4 words drawn from ranks >= 50, unique per
  namespace: a colliding name grows by one more word), a one-line ``description``
  (5 to 12 words, first capitalized), and ``content`` (log-normal word count, mean
  ~80, median ~53, clipped to [3, 2000]; sentences with capitals, commas, periods);
* ``type`` one of the service's memory types; ``scope``/``scope_id``: every memory
  ``global`` (``namespaces=0``) or spread evenly over ``namespaces`` user
  namespaces (``user``/``u00042``), interleaved in insertion order, so
  "1,000 of 1,000,000 visible to a caller" is ``count=1_000_000, namespaces=1000``;
* queries of 3 to 12 words drawn from the same distribution, like the last user
  message of a chat (first word capitalized, sometimes a ``?``).

The word ids of each memory (name, then description, then content) are kept as a
flat ``int32`` array with offsets, so index benchmarks can skip tokenizing text:
the words of ``name + " " + description + " " + content`` (``Analyzer("none")``, no stemming, no
stopwords) are exactly ``[vocab[i] for i in ids[offsets[d]:offsets[d + 1]]]`` (checked by ``--check``).
``text=False`` skips building the strings (the 1,000,000-memory design bench).

CLI (from the repo root)::

    .venv/bin/python bench/search/corpus.py --count 1000000               # time generation
    .venv/bin/python bench/search/corpus.py --count 100000 --out m.jsonl  # write JSONL
    .venv/bin/python bench/search/corpus.py --count 1000000 --namespaces 1000 --out m.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MEMORY_TYPES = ("feedback", "general", "reference", "user")  # memoryd.kernel.domain.MEMORY_TYPES
TYPE_WEIGHTS = (0.10, 0.60, 0.20, 0.10)
NAME_MIN_RANK = 50  # names are content words: skip the stop-word-like head of the distribution
_CHUNK = 25_000  # memories per text-building chunk


@dataclass(frozen=True)
class CorpusSpec:
    count: int = 100_000
    seed: int = 42
    vocab_size: int = 30_000
    zipf_s: float = 1.0
    zipf_q: float = 0.0
    mean_words: float = 80.0  # content words, before clipping
    sigma: float = 0.9  # log-normal shape of content length
    min_words: int = 3
    max_words: int = 2_000
    namespaces: int = 0  # 0: every memory global; N: spread evenly over N user namespaces
    sentence_p: float = 1 / 12  # chance a content word ends a sentence
    comma_p: float = 0.05


@dataclass
class Corpus:
    spec: CorpusSpec
    vocab: list[str]
    namespace: np.ndarray  # int32 per memory: namespace number (0 when all global)
    types: np.ndarray  # int8 per memory: index into MEMORY_TYPES
    offsets: np.ndarray  # int64, count + 1: memory d's word ids are ids[offsets[d]:offsets[d + 1]]
    ids: np.ndarray  # int32 word ids, name then description then content
    name_len: np.ndarray  # int16 words in each name
    desc_len: np.ndarray  # int16 words in each description
    names: list[str] = field(default_factory=list)
    descriptions: list[str] = field(default_factory=list)
    contents: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.namespace)

    def scope(self, index: int) -> tuple[str, str]:
        if self.spec.namespaces == 0:
            return "global", ""
        return "user", namespace_id(int(self.namespace[index]))

    def text(self, index: int) -> str:
        """What search indexes: name, description and content."""
        return f"{self.names[index]} {self.descriptions[index]} {self.contents[index]}"

    def token_ids(self, index: int) -> np.ndarray:
        return self.ids[self.offsets[index]:self.offsets[index + 1]]

    def raw_text_bytes(self) -> int:
        return sum(len(self.text(i).encode()) for i in range(self.count))

    def memories(self) -> Iterator[dict[str, str]]:
        for i in range(self.count):
            scope, scope_id = self.scope(i)
            yield {"name": self.names[i], "description": self.descriptions[i], "content": self.contents[i],
                   "type": MEMORY_TYPES[self.types[i]], "scope": scope, "scope_id": scope_id}


def namespace_id(number: int) -> str:
    return f"u{number:05d}"


# --- vocabulary -------------------------------------------------------------------------------

_ONSETS = ("", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "cr", "dr", "fl", "gr", "pl", "st", "tr", "sh", "ch", "th", "qu", "sk")
_VOWELS = ("a", "e", "i", "o", "u", "y", "ai", "ea", "ou", "io", "ee", "oa")
_CODAS = ("", "", "", "n", "r", "s", "l", "m", "t", "x", "nd", "st", "rk", "ng", "ck")


def make_vocab(size: int, seed: int) -> list[str]:
    """``size`` unique lowercase alphanumeric words, most frequent (rank 0) first."""
    rng = np.random.default_rng([seed, 1])
    syllables = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]
    words: dict[str, None] = {}
    digit_share = 0.03
    while len(words) < size:
        n = size
        counts = rng.choice([1, 2, 3, 4], size=n, p=[0.12, 0.45, 0.31, 0.12])
        picks = rng.integers(0, len(syllables), size=(n, 4))
        for k, row in zip(counts.tolist(), picks.tolist()):
            words.setdefault("".join(syllables[j] for j in row[:k]), None)
    letters = list(words)[:size]
    # Short words first, with noise, so the head is short like real stop words.
    keys = np.array([len(w) for w in letters], dtype=float) + rng.normal(0, 1.5, size)
    letters = [letters[i] for i in np.argsort(keys, kind="stable")]
    # Digit-bearing tokens replace ~3 % of the ranks from 20 on: versions, numbers, ports, model names.
    n_digit = int(size * digit_share)
    taken = set(letters)
    digit_words: list[str] = []
    while len(digit_words) < n_digit:
        form = rng.integers(0, 4)
        syl = syllables[rng.integers(0, len(syllables))] or "k"
        num = str(int(rng.choice([rng.integers(0, 10), rng.integers(10, 100), rng.integers(100, 10_000)])))
        word = (syl + num, num if rng.random() < 0.5 else f"{1990 + rng.integers(0, 40)}",
                syl[0] + num + syl[-1], "v" + num)[form]
        if word not in taken:
            taken.add(word)
            digit_words.append(word)
    slots = rng.choice(np.arange(20, size), size=n_digit, replace=False)
    for slot, word in zip(slots.tolist(), digit_words):
        letters[slot] = word
    assert len(set(letters)) == size and all(w.isalnum() and w == w.lower() for w in letters)
    return letters


def zipf_cdf(size: int, s: float, q: float, start: int = 0) -> np.ndarray:
    """Cumulative distribution over ranks ``start..size-1`` (P(r) ~ 1/(r + 1 + q)^s)."""
    weights = 1.0 / (np.arange(start + 1, size + 1, dtype=np.float64) + q) ** s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return cdf


_GUIDE_BITS = 20
_guides: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def sample(rng: np.random.Generator, cdf: np.ndarray, n: int, start: int = 0) -> np.ndarray:
    """``n`` ranks by inverse CDF (exactly ``searchsorted(cdf, u, "right")``), int32.

    A guide table (Chen's method) maps the top bits of u to the first candidate
    rank, then a few vectorized steps finish: much faster than a binary search per
    draw over a 30,000-entry CDF. Chunked to bound memory.
    """
    key = id(cdf)
    if key not in _guides or _guides[key][0] is not cdf:
        m = 1 << _GUIDE_BITS
        _guides[key] = (cdf, np.searchsorted(cdf, np.arange(m) / m, side="right").astype(np.int32))
    guide = _guides[key][1]
    last = len(cdf) - 1
    out = np.empty(n, dtype=np.int32)
    step = 8_000_000
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        u = rng.random(hi - lo)
        idx = guide[(u * (1 << _GUIDE_BITS)).astype(np.int64)]
        np.minimum(idx, last, out=idx)
        todo = np.flatnonzero((cdf[idx] <= u) & (idx < last))
        while len(todo):
            idx[todo] += 1
            keep = (cdf[idx[todo]] <= u[todo]) & (idx[todo] < last)
            todo = todo[keep]
        out[lo:hi] = idx + start
    return out


# --- memories ---------------------------------------------------------------------------------

def generate(spec: CorpusSpec, text: bool = True, progress: bool = False) -> Corpus:
    rng = np.random.default_rng(spec.seed)
    vocab = make_vocab(spec.vocab_size, spec.seed)
    n = spec.count
    cdf = zipf_cdf(spec.vocab_size, spec.zipf_s, spec.zipf_q)
    name_cdf = zipf_cdf(spec.vocab_size, spec.zipf_s, spec.zipf_q, start=NAME_MIN_RANK)

    if spec.namespaces:
        namespace = rng.permutation(np.arange(n, dtype=np.int32) % spec.namespaces).astype(np.int32)
    else:
        namespace = np.zeros(n, dtype=np.int32)
    types = rng.choice(len(MEMORY_TYPES), size=n, p=TYPE_WEIGHTS).astype(np.int8)
    name_len = rng.integers(2, 5, size=n).astype(np.int16)
    desc_len = rng.integers(5, 13, size=n).astype(np.int16)
    mu = np.log(spec.mean_words) - spec.sigma ** 2 / 2
    content_len = np.clip(np.rint(rng.lognormal(mu, spec.sigma, size=n)), spec.min_words, spec.max_words).astype(np.int64)

    name_ids = sample(rng, name_cdf, int(name_len.sum()), start=NAME_MIN_RANK)
    desc_ids = sample(rng, cdf, int(desc_len.sum()))
    content_ids = sample(rng, cdf, int(content_len.sum()))

    # Names are unique per namespace: a colliding name grows by one more word until it is new.
    extra = np.random.default_rng([spec.seed, 2])
    name_offsets = np.concatenate(([0], np.cumsum(name_len, dtype=np.int64)))
    seen: set[tuple[int, ...]] = set()
    collided: dict[int, tuple[int, ...]] = {}
    ns_list = namespace.tolist()
    flat_names = name_ids.tolist()
    for d in range(n):
        key = (ns_list[d], *flat_names[name_offsets[d]:name_offsets[d + 1]])
        if key in seen:
            while key in seen:
                key = (*key, int(sample(extra, name_cdf, 1, start=NAME_MIN_RANK)[0]))
            collided[d] = key[1:]
        seen.add(key)
    del seen
    if collided:
        for d, words in collided.items():
            name_len[d] = len(words)
        parts = []
        for d in range(n):
            parts.append(collided[d] if d in collided else flat_names[name_offsets[d]:name_offsets[d + 1]])
        name_ids = np.fromiter((w for p in parts for w in p), dtype=np.int32, count=int(name_len.sum()))
        name_offsets = np.concatenate(([0], np.cumsum(name_len, dtype=np.int64)))
        del parts
    del flat_names

    desc_offsets = np.concatenate(([0], np.cumsum(desc_len, dtype=np.int64)))
    content_offsets = np.concatenate(([0], np.cumsum(content_len, dtype=np.int64)))
    lengths = name_len.astype(np.int64) + desc_len + content_len
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    ids = np.empty(int(offsets[-1]), dtype=np.int32)
    content_slots = np.ones(len(ids), dtype=bool)
    content_slots[_scatter(ids, offsets[:-1], name_offsets, name_ids)] = False
    content_slots[_scatter(ids, offsets[:-1] + name_len, desc_offsets, desc_ids)] = False
    ids[content_slots] = content_ids  # content fills the rest, in order
    del content_slots

    corpus = Corpus(spec, vocab, namespace, types, offsets, ids, name_len, desc_len)
    if text:
        _build_text(corpus, rng, name_ids, name_offsets, desc_ids, desc_offsets, content_ids, content_offsets, progress)
    return corpus


def _scatter(out: np.ndarray, dest_starts: np.ndarray, src_offsets: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Copy segment d of ``src`` (``src_offsets``) to ``out[dest_starts[d]:...]``; returns the positions."""
    seg_len = np.diff(src_offsets)
    positions = np.arange(len(src), dtype=np.int64) + np.repeat(dest_starts - src_offsets[:-1], seg_len)
    out[positions] = src
    return positions


def _build_text(corpus: Corpus, rng: np.random.Generator, name_ids: np.ndarray, name_offsets: np.ndarray,
                desc_ids: np.ndarray, desc_offsets: np.ndarray, content_ids: np.ndarray,
                content_offsets: np.ndarray, progress: bool) -> None:
    spec, vocab = corpus.spec, corpus.vocab
    v = len(vocab)
    lower = np.array(vocab, dtype=object)
    upper = np.array([w.capitalize() for w in vocab], dtype=object)
    # Six spellings per word: (lower, Capital) x (" ", ", ", ". ").
    variants = np.concatenate([lower + " ", lower + ", ", lower + ". ", upper + " ", upper + ", ", upper + ". "])
    n = corpus.count
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        a, b = name_offsets[lo], name_offsets[hi]
        words = lower[name_ids[a:b]].tolist()
        offs = (name_offsets[lo:hi + 1] - a).tolist()
        corpus.names.extend("_".join(words[offs[i]:offs[i + 1]]) for i in range(hi - lo))

        a, b = desc_offsets[lo], desc_offsets[hi]
        words = lower[desc_ids[a:b]].tolist()
        offs = (desc_offsets[lo:hi + 1] - a).tolist()
        corpus.descriptions.extend(" ".join(words[offs[i]:offs[i + 1]]).capitalize() for i in range(hi - lo))

        a, b = content_offsets[lo], content_offsets[hi]
        ids = content_ids[a:b]
        m = len(ids)
        u = rng.random(m)
        sep = np.where(u < spec.sentence_p, 2, np.where(u < spec.sentence_p + spec.comma_p, 1, 0))
        ends = content_offsets[lo + 1:hi + 1] - a - 1
        sep[ends] = 2  # every content ends a sentence
        cap = np.empty(m, dtype=bool)
        cap[0] = True
        cap[1:] = sep[:-1] == 2  # after a period (including the previous memory's last word)
        spelled = variants[(cap * 3 + sep) * v + ids].tolist()
        offs = (content_offsets[lo:hi + 1] - a).tolist()
        corpus.contents.extend("".join(spelled[offs[i]:offs[i + 1]])[:-1] for i in range(hi - lo))
        if progress:
            print(f"\r  text {hi:,}/{n:,}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)


# --- queries ----------------------------------------------------------------------------------

def make_queries(spec: CorpusSpec, count: int, seed: int = 7) -> list[str]:
    """``count`` chat-like queries of 3 to 12 words from the corpus's word distribution."""
    rng = np.random.default_rng([spec.seed, seed, 3])
    vocab = make_vocab(spec.vocab_size, spec.seed)
    cdf = zipf_cdf(spec.vocab_size, spec.zipf_s, spec.zipf_q)
    lengths = rng.integers(3, 13, size=count)
    ids = sample(rng, cdf, int(lengths.sum()))
    queries, at = [], 0
    for k in lengths.tolist():
        words = [vocab[i] for i in ids[at:at + k].tolist()]
        at += k
        text = " ".join(words).capitalize()
        queries.append(text + ("?" if rng.random() < 0.5 else ""))
    return queries


# --- JSONL ------------------------------------------------------------------------------------

def write_jsonl(corpus: Corpus, path: str | Path) -> int:
    """One memory per line (name, description, content, type, scope, scope_id); returns bytes written."""
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        lines = []
        for memory in corpus.memories():
            lines.append(json.dumps(memory, ensure_ascii=False))
            if len(lines) >= 10_000:
                chunk = "\n".join(lines) + "\n"
                written += out.write(chunk)
                lines = []
        if lines:
            written += out.write("\n".join(lines) + "\n")
    return written


def _check(corpus: Corpus, samples: int = 2_000) -> None:
    """The word ids agree with the words the service's analyzer finds in the text before stemming (``none``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from projections.search.analysis import Analyzer

    words = Analyzer("none").terms
    step = max(1, corpus.count // samples)
    for d in range(0, corpus.count, step):
        expected = [corpus.vocab[i] for i in corpus.token_ids(d).tolist()]
        assert Counter(words(corpus.text(d))) == Counter(expected), d


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--namespaces", type=int, default=0, help="0: all global; N: N user namespaces")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", help="write JSONL here")
    parser.add_argument("--check", action="store_true", help="verify word ids against the analyzer's words (none)")
    parser.add_argument("--no-text", action="store_true", help="word ids only (no strings)")
    parser.add_argument("--show", type=int, default=0, help="print this many memories and queries")
    args = parser.parse_args()

    spec = CorpusSpec(count=args.count, seed=args.seed, namespaces=args.namespaces)
    started = time.perf_counter()
    corpus = generate(spec, text=not args.no_text, progress=True)
    elapsed = time.perf_counter() - started
    words = np.diff(corpus.offsets)
    content = words - corpus.name_len - corpus.desc_len
    print(f"{corpus.count:,} memories in {elapsed:.1f} s; words/memory mean {words.mean():.1f} "
          f"(content mean {content.mean():.1f}, median {np.median(content):.0f}, max {content.max()}); "
          f"distinct words used {len(np.unique(corpus.ids)):,} of {spec.vocab_size:,}")
    if not args.no_text:
        print(f"raw text {corpus.raw_text_bytes() / 1e6:.1f} MB")
    if args.check and not args.no_text:
        _check(corpus)
        print("word ids match the analyzer's words (none)")
    for i in range(min(args.show, corpus.count) if not args.no_text else 0):
        print(json.dumps({"name": corpus.names[i], "description": corpus.descriptions[i],
                          "content": corpus.contents[i][:200], "scope": corpus.scope(i)}))
    if args.show:
        for q in make_queries(spec, args.show):
            print("query:", q)
    if args.out:
        started = time.perf_counter()
        size = write_jsonl(corpus, args.out)
        print(f"wrote {args.out}: {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
