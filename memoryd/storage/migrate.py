"""Schema upgrades through alembic, callable from the CLI and from ``serve``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from memoryd.kernel.errors import ConfigError
from memoryd.storage.db import Database

MIGRATIONS = Path(__file__).parent / "migrations"


def upgrade(database: Database) -> None:
    """Bring the schema to the newest revision (a no-op when it is already there)."""
    with database.write() as conn:
        settings = _alembic_config()
        settings.attributes["connection"] = conn
        command.upgrade(settings, "head")


def ensure_ready(database: Database) -> None:
    """Create the schema in an empty database; refuse to run on an outdated one.

    Upgrading a database that holds data is an operator's decision
    (``memoryd db upgrade``), never a side effect of starting a server.
    """
    with database.read() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if current is None:
        upgrade(database)
    elif current != head:
        raise ConfigError(f"the database schema is at revision {current}, this memoryd needs {head}: run 'memoryd db upgrade'")


def _alembic_config() -> AlembicConfig:
    settings = AlembicConfig()
    settings.set_main_option("script_location", str(MIGRATIONS))
    return settings
