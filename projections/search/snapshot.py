"""The snapshot format: a whole index as one ``.npz`` blob (no pickle), so other processes start fast.

It holds one segment of every live memory, the vocabulary, the namespaces in
number order, the log position each memory was indexed from and the one the
whole snapshot reflects. ``format`` changes whenever the layout does; a blob
of another format is refused (``SnapshotFormatError``) and the index is built
from the log instead.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass

import numpy as np

from events.chain import canonical
from projections.search.parts import Segment, joined, split

FORMAT = 3
_ARRAYS = ("namespaces", "starts", "lengths", "types", "terms", "offsets", "docs", "tfs")


class SnapshotFormatError(ValueError):
    """A snapshot written by another version of the index: rebuild from the log instead."""


@dataclass
class Snapshot:
    position: int
    words: list[str]  # by term id
    keys: list[tuple[str, str]]  # namespaces (scope, scope id) by number
    memory_ids: list[str]  # by the segment's document number
    updated: list[str]
    versions: np.ndarray  # int64: the log position each memory was indexed from
    segment: Segment


def dump(snapshot: Snapshot) -> bytes:
    arrays = {
        "format": np.array([FORMAT], np.int64),
        "position": np.array([snapshot.position], np.int64),
        "words": joined(snapshot.words),
        "keys": np.frombuffer(json.dumps(snapshot.keys).encode(), np.uint8),
        "memory_ids": joined(snapshot.memory_ids),
        "updated": joined(snapshot.updated),
        "versions": snapshot.versions.astype(np.int64),
        **{name: getattr(snapshot.segment, name) for name in _ARRAYS},
    }
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def load(blob: bytes) -> Snapshot:
    data = np.load(io.BytesIO(blob), allow_pickle=False)
    if "format" not in data.files or int(data["format"][0]) != FORMAT:
        raise SnapshotFormatError("search snapshot from another index version")
    segment = Segment(0)
    for name in _ARRAYS:
        setattr(segment, name, data[name].copy())
    documents = len(segment.lengths)
    segment.slots = np.arange(documents, dtype=np.int32)
    segment.alive = np.ones(documents, bool)
    keys = [(key[0], key[1]) for key in json.loads(data["keys"].tobytes().decode())]
    return Snapshot(int(data["position"][0]), split(data["words"]), keys, split(data["memory_ids"]),
                    split(data["updated"]), data["versions"].copy(), segment)


def documents(snapshot: Snapshot) -> list[tuple[str, bytes]]:
    """Every memory the snapshot holds as (memory id, a digest of all it indexed of it), by memory id.

    The digest covers the memory's version, time, namespace, type, length and its multiset of
    (word, term frequency), so two snapshots of the same memories give the same list however their
    documents and words are numbered.
    """
    segment = snapshot.segment
    word_keys = np.array([int.from_bytes(hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                         "little") for word in snapshot.words], np.uint64)
    terms = np.repeat(segment.terms, np.diff(segment.offsets))
    postings = (word_keys[terms] ^ (segment.tfs.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))) \
        * np.uint64(0xBF58476D1CE4E5B9)  # each (word, tf) mixed into 64 bits; the sums wrap
    order = np.argsort(segment.docs, kind="stable")
    docs, postings = segment.docs[order], postings[order]
    summed = np.zeros(len(segment.lengths), np.uint64)
    if len(docs):
        firsts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
        summed[docs[firsts]] = np.add.reduceat(postings, firsts)
    namespace_of = np.repeat(segment.namespaces, np.diff(segment.starts)).tolist()
    found = [(memory_id, hashlib.sha256(canonical([memory_id, version, updated, *snapshot.keys[namespace], kind, length,
                                                   words])).digest())
             for memory_id, version, updated, namespace, kind, length, words in zip(
                 snapshot.memory_ids, snapshot.versions.tolist(), snapshot.updated, namespace_of,
                 segment.types.tolist(), segment.lengths.tolist(), summed.tolist())]
    found.sort()
    return found
