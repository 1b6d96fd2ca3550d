"""Alembic migrations of the ledger schema, run from code by :mod:`dp_pipeline.accounting.ledger._sql`."""
