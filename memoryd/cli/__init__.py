"""The ``memoryd`` command line: serve, manage the directory, operate the store, agents' MCP server and hooks.

The CLI and the server find the database the same way:
``MEMORYD_DATABASE_URL``, else ``[storage] database_url`` in the config
file, else the default SQLite file.

``run`` is the console script. ``memoryd hook ...`` is answered before the rest
of the CLI is imported (it imports the server), because a hook runs before every
prompt and must start fast; ``main`` is the click group with every command.
"""

from __future__ import annotations

import sys
from typing import Any


def run() -> None:
    if sys.argv[1:2] == ["hook"]:
        from memoryd.cli.hook import main as hook

        raise SystemExit(hook(sys.argv[2:]))
    from memoryd.cli.commands import main

    main()


def __getattr__(name: str) -> Any:
    if name == "main":
        from memoryd.cli.commands import main

        return main
    raise AttributeError(f"module 'memoryd.cli' has no attribute {name!r}")
