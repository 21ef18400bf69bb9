"""Every ``memoryd`` command, registered on the one click group."""

import memoryd.cli.agents  # noqa: F401  (each module registers its commands on main)
import memoryd.cli.audit  # noqa: F401
import memoryd.cli.directory  # noqa: F401
import memoryd.cli.identities  # noqa: F401
import memoryd.cli.operations  # noqa: F401
from memoryd.cli.base import main

__all__ = ["main"]
