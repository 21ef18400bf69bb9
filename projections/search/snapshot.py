"""The snapshot format: a whole index as one file that every process on a host memory-maps.

A snapshot holds one segment of every live memory, the per-slot arrays an index
starts with (a memory's ``updated`` time is its recency key there, rebuilt by
``state.timestamp``; a time not in the spec's format is in the manifest as it
is), the memory ids (by slot, and sorted for lookups), the vocabulary and the
namespaces in number order. Stored in the
database it is the same bytes as on disk, so a process writes the blob to a
file once per host and every process maps that file: the pages are the page
cache's, shared, and only what a process changes later (liveness, a merge's
bookkeeping) becomes its own, copy-on-write.

Layout, little-endian::

    0   magic  b"memoryd-search\\0\\0"          16 bytes
    16  format uint32, then 4 zero bytes
    24  manifest length uint64
    32  sha256 of every byte from offset 64 to the end
    64  manifest (JSON), then each array at a page-aligned offset

The manifest names the log position the snapshot reflects, the hash of the
log's event at that position (so a snapshot of another database, or of a log
since rewritten, is recognised), the identity of the analyzer that made its
terms (an index of another analyzer never serves it) and each array's dtype,
length and offset. A
file with another magic or format is refused with ``SnapshotFormatError``, one
whose bytes do not match its checksum with ``SnapshotCorrupt``; the index is
then built from the log instead, never served from it.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from events.chain import canonical
from projections.search.parts import Segment, joined, split
from projections.search.state import recency_key, timestamp

FORMAT = 6  # 6: ``updated`` only as the slots' recency keys (and the odd times in the manifest)
MAGIC = b"memoryd-search\x00\x00"
_HEADER = struct.Struct("<16sIxxxxQ32s")  # magic, format, manifest length, sha256 of the rest
_BODY = 64  # where the checksummed part starts
_PAGE = 4096
SEGMENT_ARRAYS = ("namespaces", "starts", "lengths", "types", "terms", "offsets", "docs", "tfs", "slots", "alive")
SLOT_ARRAYS = ("length", "type", "namespace", "alive", "part", "document", "version", "recency")
_WRITABLE = {"segment.alive", *(f"slot.{name}" for name in SLOT_ARRAYS)}  # changed in place, copy-on-write


class SnapshotFormatError(ValueError):
    """Not a snapshot of this index version (another format, or not a snapshot): rebuild from the log."""


class SnapshotCorrupt(ValueError):
    """A snapshot whose bytes do not match its checksum (truncated, or changed on disk): never served."""


@dataclass
class Snapshot:
    position: int
    log_hash: str  # the hash of the log's event at ``position``: which log this is a snapshot of
    analyzer: str  # the identity of the analyzer that made its terms
    words: list[str]  # by term id
    keys: list[tuple[str, str]]  # namespaces (scope, scope id) by number
    segment: Segment  # its documents are slots 0..documents-1, in that order
    slot: dict[str, np.ndarray]  # SLOT_ARRAYS, with room for slots added later (zeros)
    memory_ids: np.ndarray  # bytes (S), by slot
    odd_times: dict[int, str]  # by slot, the ``updated`` times ``timestamp`` does not rebuild from their recency key
    sorted_ids: np.ndarray  # the memory ids ascending, and the slot of each
    sorted_slots: np.ndarray

    @property
    def documents(self) -> int:
        return self.segment.documents


def dump(snapshot: Snapshot) -> bytes:
    """The snapshot's bytes: what the database stores and every host's file holds."""
    arrays: dict[str, np.ndarray] = {f"segment.{name}": getattr(snapshot.segment, name) for name in SEGMENT_ARRAYS}
    arrays |= {f"slot.{name}": array for name, array in snapshot.slot.items()}
    arrays |= {"memory_ids": snapshot.memory_ids, "sorted_ids": snapshot.sorted_ids,
               "sorted_slots": snapshot.sorted_slots,
               "words": joined(snapshot.words)}
    offset, table = 0, dict[str, tuple[str, int, int]]()
    for name, array in arrays.items():
        table[name] = (array.dtype.str, len(array), offset)
        offset = _aligned(offset + array.nbytes)
    manifest = canonical({"position": snapshot.position, "log_hash": snapshot.log_hash,
                          "analyzer": snapshot.analyzer, "keys": snapshot.keys,
                          "odd_times": sorted(snapshot.odd_times.items()), "arrays": table})
    start = _aligned(_BODY + len(manifest))
    out = bytearray(start + offset)
    out[_BODY:_BODY + len(manifest)] = manifest
    for name, array in arrays.items():
        at = start + table[name][2]
        np.frombuffer(out, array.dtype, len(array), at)[:] = array
    _HEADER.pack_into(out, 0, MAGIC, FORMAT, len(manifest), hashlib.sha256(memoryview(out)[_BODY:]).digest())
    return bytes(out)


def verified(blob: bytes) -> tuple[int, str]:
    """The position and log hash of ``blob`` once its format and bytes are checked (``SnapshotFormatError``,
    ``SnapshotCorrupt``): what is written to a file must be a whole snapshot of this version, of this log."""
    _, length, checksum = _header(blob)
    _check(memoryview(blob)[_BODY:], checksum)
    manifest = json.loads(bytes(memoryview(blob)[_BODY:_BODY + length]))
    return int(manifest["position"]), str(manifest["log_hash"])


def load(blob: bytes) -> Snapshot:
    """A snapshot read from bytes (copied arrays, writable), after checking its format and checksum."""
    _, length, checksum = _header(blob)
    _check(memoryview(blob)[_BODY:], checksum)
    return _parsed(memoryview(bytearray(blob)), length)


def write_file(blob: bytes, path: Path) -> None:
    """Write ``blob`` to ``path`` whole, under a temporary name renamed into place, so no process maps a file
    still being written. No fsync: a file a crash left torn fails its checksum and is written again."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")  # unique, even across containers
    try:
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            handle.write(blob)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def open_file(path: Path) -> Snapshot:
    """The snapshot in ``path``, memory-mapped copy-on-write: the arrays are views of the page cache that
    every process mapping the file shares. Its format and checksum are checked before anything is read."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _BODY:
            raise SnapshotFormatError(f"{path.name} is too short to be a search snapshot")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    view = memoryview(mapped)
    _, length, checksum = _header(view[:_BODY])
    _check(view[_BODY:], checksum)
    return _parsed(view, length)


def _header(blob: bytes | memoryview) -> tuple[int, int, bytes]:
    if len(blob) < _BODY:
        raise SnapshotFormatError("too short to be a search snapshot")
    magic, version, length, checksum = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise SnapshotFormatError("not a search snapshot")
    if version != FORMAT:
        raise SnapshotFormatError(f"search snapshot of format {version}; this index reads format {FORMAT}")
    return version, length, checksum


def _check(body: memoryview, checksum: bytes) -> None:
    if hashlib.sha256(body).digest() != checksum:
        raise SnapshotCorrupt("the search snapshot's bytes do not match its checksum")


def _parsed(view: memoryview, length: int) -> Snapshot:
    """(Checked bytes) the snapshot's arrays as views of ``view``; the ones no one changes are read-only."""
    manifest = json.loads(bytes(view[_BODY:_BODY + length]))
    start = _aligned(_BODY + length)
    arrays = {}
    for name, (dtype, count, offset) in manifest["arrays"].items():
        array = np.frombuffer(view, np.dtype(dtype), count, start + offset)
        array.flags.writeable = name in _WRITABLE
        arrays[name] = array
    segment = Segment(0)
    for name in SEGMENT_ARRAYS:
        setattr(segment, name, arrays[f"segment.{name}"])
    return Snapshot(manifest["position"], manifest["log_hash"], manifest["analyzer"], split(arrays["words"]),
                    [(scope, scope_id) for scope, scope_id in manifest["keys"]], segment,
                    {name: arrays[f"slot.{name}"] for name in SLOT_ARRAYS}, arrays["memory_ids"],
                    {int(slot): str(time) for slot, time in manifest["odd_times"]}, arrays["sorted_ids"],
                    arrays["sorted_slots"])


def _aligned(offset: int) -> int:
    return -(-offset // _PAGE) * _PAGE


def inconsistencies(snapshot: Snapshot) -> list[str]:
    """What in the snapshot disagrees with itself: the arrays an index starts from (the sorted ids it looks
    memories up by, the per-slot arrays it scores and counts with) against the segment and the ids by slot."""
    try:
        return _inconsistencies(snapshot)
    except (IndexError, ValueError) as error:  # arrays of the wrong shapes, slots out of range
        return [f"the stored snapshot's arrays are malformed ({error})"]


def _inconsistencies(snapshot: Snapshot) -> list[str]:
    segment, documents = snapshot.segment, snapshot.documents
    slot = {name: values[:documents] for name, values in snapshot.slot.items()}
    expected = {
        "segment slots": (segment.slots, np.arange(documents)),
        "sorted ids": (snapshot.sorted_ids, snapshot.memory_ids[snapshot.sorted_slots]),
        "slot lengths": (slot["length"], segment.lengths), "slot types": (slot["type"], segment.types),
        "slot namespaces": (slot["namespace"], np.repeat(segment.namespaces, np.diff(segment.starts))),
        "slot liveness": (slot["alive"] & segment.alive, np.ones(documents, bool)),
        "slot parts": (slot["part"], np.zeros(documents)), "slot documents": (slot["document"], np.arange(documents)),
        "odd times' recency": (np.array([slot["recency"][at] if 0 <= at < documents else -1
                                         for at in snapshot.odd_times], np.int64),
                               np.array([recency_key(time) for time in snapshot.odd_times.values()], np.int64)),
        "room for new slots": (snapshot.slot["alive"][documents:], np.zeros(len(snapshot.slot["alive"]) - documents)),
    }
    found = [name for name, (held, wanted) in expected.items()
             if len(held) != len(wanted) or not np.array_equal(held, wanted)]
    if not np.array_equal(np.sort(snapshot.sorted_slots), np.arange(documents)):
        found.append("sorted slots (not every slot once)")
    if len(snapshot.sorted_ids) > 1 and not bool(np.all(snapshot.sorted_ids[1:] > snapshot.sorted_ids[:-1])):
        found.append("sorted ids (out of order)")
    return [f"the stored snapshot's {name} disagree with its segment and ids" for name in found]


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
    summed = np.zeros(segment.documents, np.uint64)
    if len(docs):
        firsts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
        summed[docs[firsts]] = np.add.reduceat(postings, firsts)
    namespace_of = np.repeat(segment.namespaces, np.diff(segment.starts)).tolist()
    slots = segment.slots.tolist()
    found = [(memory_id, hashlib.sha256(canonical([memory_id, version, updated, *snapshot.keys[namespace], kind, length,
                                                   words])).digest())
             for memory_id, version, updated, namespace, kind, length, words in zip(
                 (snapshot.memory_ids[slot].decode() for slot in slots),
                 snapshot.slot["version"][segment.slots].tolist(),
                 (snapshot.odd_times.get(slot) or timestamp(key) for slot, key in zip(
                     slots, snapshot.slot["recency"][segment.slots].tolist())), namespace_of,
                 segment.types.tolist(), segment.lengths.tolist(), summed.tolist())]
    found.sort()
    return found
