"""Text analysis: how a memory and a query become the index's terms, one analyzer for both.

In order:

1. the text is normalized (NFKC: full-width letters, ligatures and half-width
   kana become their plain forms) and lowercased;
2. it splits into words, runs of letters and digits: ``_ - . /`` and every
   other character split, so a snake_case name is its words. In English a word
   keeps an inner apostrophe, so ``don't`` is one stopword and ``Caroline's``
   stems to ``carolin``;
3. runs of a script written without spaces (Han, Hiragana, Katakana, Hangul,
   Thai, Lao, Khmer, Myanmar) become overlapping character bigrams, as
   Lucene's CJK analyzer makes them, a lone character itself: a query of a
   few characters finds the memory that holds them;
4. the language's stopwords go (Snowball's lists, in ``stopwords/``) and every
   other word is replaced by its Snowball stem (PyStemmer, Snowball's own C).

The language ``none`` skips step 4 and splits at apostrophes too: words exactly
as written. A memory's name and description are its summary (the spec calls
the description its relevance summary): their terms count ``SUMMARY_WEIGHT``
times, its content's once.

An analyzer's ``identity`` names everything that decides the terms: the
language, ``RULES`` (the version of the steps above) and the stemmer's version.
An index built under another identity is never served.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from functools import cache
from importlib import resources
from typing import cast

import Stemmer

DEFAULT_LANGUAGE = "english"
NONE = "none"
RULES = 1  # raise when a change to the steps above changes any term
SUMMARY_WEIGHT = 2  # name and description terms count twice (docs/benchmarks.md, "Recall on LoCoMo")
CACHE_WORDS = 1 << 18  # words whose terms are remembered, per analyzer; then it starts over
_UNSPACED = ("\u0e00-\u0eff"  # Thai, Lao
             "\u1000-\u109f"  # Myanmar
             "\u1100-\u11ff"  # Hangul Jamo
             "\u1780-\u17ff"  # Khmer
             "\u2e80-\u2fdf"  # CJK and Kangxi radicals
             "\u3005-\u3007"  # 々 〆 〇
             "\u3040-\u31ff"  # Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Katakana extensions
             "\u3400-\u4dbf\u4e00-\u9fff"  # CJK ideographs and extension A
             "\ua960-\ua97f\uac00-\ud7ff"  # Hangul
             "\uf900-\ufaff"  # CJK compatibility ideographs
             "\U00020000-\U0003134f")  # CJK extensions B-G
_RUNS = re.compile(f"[{_UNSPACED}]+")
_WORD = re.compile(f"[^\\W_{_UNSPACED}]+")
_WORD_WITH_APOSTROPHES = re.compile(f"[^\\W_{_UNSPACED}]+(?:'+[^\\W_{_UNSPACED}]+)*")
_KEEPS_APOSTROPHES = {"english", "porter"}  # the languages whose stemmer and stopwords know "'s" and "don't"


def _ascii_folding(apostrophes: bool) -> bytes:
    """For ASCII text, the words regex's work in one ``bytes.translate``: letters lowercased, digits (and
    apostrophes, if kept) as they are, everything else a space."""
    kept = {ord(character) for character in "abcdefghijklmnopqrstuvwxyz0123456789" + ("'" if apostrophes else "")}
    return bytes(byte if byte in kept else byte + 32 if 65 <= byte <= 90 else 32 for byte in range(256))


def languages() -> list[str]:
    """Every language an analyzer can be made for: ``none`` and Snowball's stemmers."""
    return [NONE, *sorted(Stemmer.algorithms())]


class Analyzer:
    """Terms of documents and queries in one language; thread-safe."""

    def __init__(self, language: str = DEFAULT_LANGUAGE) -> None:
        if language not in languages():
            raise ValueError(f"unknown search language {language!r}: use one of {', '.join(languages())}")
        self.language = language
        self._stemmer = None if language == NONE else Stemmer.Stemmer(language)
        self._stopwords = stopwords(language)
        self._apostrophes = language in _KEEPS_APOSTROPHES
        self._word = _WORD_WITH_APOSTROPHES if self._apostrophes else _WORD
        self._ascii = _ascii_folding(self._apostrophes)
        self._terms: dict[str, str] = {}  # a word -> its term, "" for a stopword
        self._stemming = threading.Lock()  # a PyStemmer stemmer is not thread-safe
        stemmer = f"/pystemmer-{Stemmer.version()}" if self._stemmer is not None else ""
        self.identity = f"{language}/{RULES}{stemmer}"

    @classmethod
    def of(cls, identity: str) -> Analyzer | None:
        """The analyzer whose identity is ``identity``; None if this installation cannot make it (an unknown
        language, other rules, another stemmer version)."""
        try:
            analyzer = cls(identity.split("/")[0])
        except ValueError:
            return None
        return analyzer if analyzer.identity == identity else None

    def __repr__(self) -> str:
        return f"Analyzer({self.identity})"

    def terms(self, text: str) -> list[str]:
        """The terms of ``text``, in no particular order (a query's)."""
        return list(self._counts(text).elements())

    def document(self, name: str, description: str, content: str) -> Counter[str]:
        """A memory's terms and how often each counts: its summary's ``SUMMARY_WEIGHT`` times."""
        counts = self._counts(content)
        for term, times in self._counts(f"{name} {description}").items():
            counts[term] += times * SUMMARY_WEIGHT
        return counts

    def _counts(self, text: str) -> Counter[str]:
        """How often each term occurs in ``text`` (counted in C: this is every indexed memory's cost)."""
        if text.isascii():  # most text: split without a regex, half the time
            lowered = None
            folded = text.encode().translate(self._ascii).decode()
            words = folded.split()
            if self._apostrophes and "'" in folded:  # as the regex: apostrophes only inside a word
                words = [word for word in (word.strip("'") for word in words) if word]
        else:
            lowered = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
            words = self._word.findall(lowered)
        if self._stemmer is None:
            counts = Counter(words)
        else:
            remembered: Counter[str | None] = Counter(map(self._terms.get, words))
            counts = cast("Counter[str]", remembered) if None not in remembered \
                else Counter(map(self._known(words).__getitem__, words))  # words not seen yet: stemmed once
            del counts[""]  # the stopwords
        if lowered is not None:
            counts.update(_bigrams(lowered))
        return counts

    def _known(self, words: list[str]) -> dict[str, str]:
        """(A stemming analyzer) the word -> term map, holding every one of ``words``: stems are remembered,
        since a few thousand words make up most of any text."""
        known = self._terms
        missing = set(words).difference(known)
        if len(known) + len(missing) > CACHE_WORDS:
            known, missing = {}, set(words)
            self._terms = known
        kept = [word for word in missing if word not in self._stopwords]
        with self._stemming:
            stems = self._stemmer.stemWords(kept)  # type: ignore[union-attr]
        known.update(dict.fromkeys(missing, ""))
        known.update(zip(kept, stems))
        return known


@cache
def stopwords(language: str) -> frozenset[str]:
    """Snowball's stopwords for ``language``, normalized as text is; none for a language without a list."""
    source = {"porter": "english", "dutch_porter": "dutch"}.get(language, language)
    path = resources.files("projections.search").joinpath("stopwords", f"{source}.txt")
    if language == NONE or not path.is_file():
        return frozenset()
    words = (word for line in path.read_text("utf-8").splitlines() for word in line.split("|")[0].split())
    return frozenset(unicodedata.normalize("NFKC", word).lower() for word in words)


def _bigrams(text: str) -> list[str]:
    """Each run of unspaced script as its overlapping character pairs; a lone character alone."""
    found = []
    for run in _RUNS.findall(text):
        found += [run] if len(run) == 1 else [run[at:at + 2] for at in range(len(run) - 1)]
    return found
