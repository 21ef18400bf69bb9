"""Writes ``memoryd_sdk/_async.py`` from ``memoryd_sdk/_sync.py``: the async clients are the sync ones, awaited.

The two must keep identical signatures, so the async module is generated, never
edited by hand (as ``unasync`` does for httpx-style clients); a test checks that
the committed file is what this script writes. Run it after changing ``_sync.py``:

    .venv/bin/python sdk/python/tools/make_async.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memoryd_sdk"
KEPT_SYNC = ("__init__", "session")  # no I/O: the same in both
RENAMES = [
    ('"""The synchronous clients: ``MemorydServer`` (the public API), ``MemorydConsole`` (admins) and ``Session``."""',
     '"""The asynchronous clients, generated from ``_sync`` by ``tools/make_async.py``: do not edit by hand.\n\n'
     'The same signatures, each over its own ``httpx.AsyncClient``."""'),
    ("from collections.abc import Iterator", "from collections.abc import AsyncIterator"),
    ("SyncTransport", "AsyncTransport"),
    ("from memoryd_sdk._transport import", "from memoryd_sdk._sync import UNSET\nfrom memoryd_sdk._transport import"),
    ("UNSET: Any = object()\n\n\n", "\n"),
    ("httpx.Client", "httpx.AsyncClient"),
    ("class MemorydServer(", "class AsyncMemorydServer("),
    ("class MemorydConsole(", "class AsyncMemorydConsole("),
    ("class Session:", "class AsyncSession:"),
    ("-> Session:", "-> AsyncSession:"),
    ("return Session(", "return AsyncSession("),
    ('info = Session(self._transport, "", token).describe()',
     'info = await AsyncSession(self._transport, "", token).describe()'),
    ("self._transport.send(", "await self._transport.send("),
    ("-> Iterator[", "-> AsyncIterator["),
    ("            yield from found.records", "            for record in found.records:\n                yield record"),
    ("            yield from found.events", "            for event in found.events:\n                yield event"),
    ("            yield from found.memories", "            for memory in found.memories:\n                yield memory"),
    ("    def close(self) -> None:\n        self._transport.close()",
     "    async def aclose(self) -> None:\n        await self._transport.close()"),
    ("    def __enter__(self) -> Any:", "    async def __aenter__(self) -> Any:"),
    ("    def __exit__(self, *exc_info: object) -> None:\n        self.close()",
     "    async def __aexit__(self, *exc_info: object) -> None:\n        await self.aclose()"),
]


def generate(sync_source: str) -> str:
    text = sync_source
    for old, new in RENAMES:
        if old not in text:
            raise SystemExit(f"make_async: {old!r} is no longer in _sync.py; update RENAMES")
        text = text.replace(old, new)
    kept = "|".join(KEPT_SYNC)
    return re.sub(rf"\n    def (?!{kept}\b|__aenter__|__aexit__)(\w+)\(", r"\n    async def \1(", text)


def main() -> None:
    target = PACKAGE / "_async.py"
    target.write_text(generate((PACKAGE / "_sync.py").read_text()))
    print(f"wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
