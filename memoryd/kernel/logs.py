"""Process-wide logging: memoryd's own loggers write one line per record to stderr.

Access log records are already JSON objects (one per request); this only
routes them. Called by the entry points (``serve``, ``worker``, the WSGI
module), never on import, so tests and embedding programs keep their setup.
"""

from __future__ import annotations

import logging
import sys

LOGGERS = ("memoryd.access", "memoryd.errors", "api", "projections", "workers")


def configure_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level)
        logger.propagate = False
