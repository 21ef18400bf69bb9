"""memoryd unreachable, two ways: nothing listening, or a listener that accepts and never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from tests.helpers import free_port


@contextmanager
def dead_url() -> Iterator[str]:
    yield f"http://127.0.0.1:{free_port()}"


@contextmanager
def silent_server_url() -> Iterator[str]:
    with socket.socket() as silent:  # the kernel completes the connection; nobody ever reads or answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        yield f"http://127.0.0.1:{silent.getsockname()[1]}"


def outage(where: str) -> AbstractContextManager[str]:
    """The URL of an outage of this kind ("down" or "silent"), as a context manager."""
    return dead_url() if where == "down" else silent_server_url()
