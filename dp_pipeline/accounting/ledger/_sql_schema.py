"""Schema migrations of :class:`~dp_pipeline.accounting.ledger.SQLLedger`: the Alembic revisions
shipped in ``migrations/``, run from code (no alembic.ini). Private to
:mod:`dp_pipeline.accounting.ledger`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def _alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def known_revisions() -> set[str]:
    """The schema revisions this code can read (all revisions shipped in ``migrations/versions``)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def upgrade_schema(connection: Connection) -> None:
    """Upgrade the ledger's schema to the head revision, on ``connection`` (inside the caller's locked
    transaction)."""
    from alembic import command

    command.upgrade(_alembic_config(connection), "head")
