"""Alembic environment of the ledger schema.

Run only through :func:`dp_pipeline.accounting.ledger._sql_schema.upgrade_schema`, which passes an open
connection (already inside a locked transaction) in ``config.attributes["connection"]``; there is no
alembic.ini.
"""

from __future__ import annotations

from alembic import context

from dp_pipeline.accounting.ledger._schema import VERSION_TABLE

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only reachable by running alembic by hand
    raise RuntimeError(
        "the ledger migrations run from dp_pipeline.accounting.ledger._sql_schema.upgrade_schema()"
    )

context.configure(connection=connection, version_table=VERSION_TABLE, transactional_ddl=True)
with context.begin_transaction():
    context.run_migrations()
