"""Every ``memoryd`` command, registered on the one click group."""

from memoryd.cli import agents, directory, operations  # noqa: F401  (each registers its commands on main)
from memoryd.cli.base import main

__all__ = ["main"]
