"""The ``memoryd`` command line: serve, manage the directory, operate the store.

The CLI and the server find the database the same way:
``MEMORYD_DATABASE_URL``, else ``[storage] database_url`` in the config
file, else the default SQLite file.
"""

from memoryd.cli import directory, operations  # noqa: F401  (each registers its commands on main)
from memoryd.cli.base import main

__all__ = ["main"]
