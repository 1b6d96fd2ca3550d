"""The ledger's SQL schema as SQLAlchemy Core tables (the shape the current code reads and writes).

The schema itself is created and changed only by the Alembic revisions in ``migrations/versions``;
:data:`HEAD_REVISION` names the newest one, and a test checks that it is the head of the script directory.

Tables
------
``dp_ledger_budgets``
    One row per dataset: the cached state (budget, method, running totals as exact decimal strings) and
    the seq and hash of the newest record. Triggers (revision ``0002_guards``) refuse deleting it, moving it
    anywhere but forward to the dataset's last record, and changing the budget without a new ``budget``
    record. Writers lock this row (``SELECT … FOR UPDATE`` on PostgreSQL;
    ``BEGIN IMMEDIATE`` locks the whole file on SQLite).
``dp_ledger_records``
    The append-only, hash-chained records; ``UNIQUE (dataset, seq)``, and a unique index on
    ``(dataset, idem_key)`` over ``reserve`` records; ``sig`` is the record's HMAC under the ledger key
    (NULL without a key). Triggers reject UPDATE and DELETE, an INSERT that does not extend the
    dataset's chain (also ``INSERT OR REPLACE``), and (revision ``0003_payments``) a record that names a
    reservation which is not one of its dataset's, or cancels a reservation that paid for a release; and
    (revision ``0004_record_guards``) a record of an unknown kind, a ``reserve`` record without a key or
    with one an earlier reservation holds (SQLite's ``INSERT OR REPLACE`` would delete that one), and on
    SQLite a second head row for a dataset. What the JSON columns say is checked by every write instead
    (:mod:`dp_pipeline.accounting._incremental`).
``dp_ledger_schema``
    Alembic's version table (a name of its own, so that a database shared with another Alembic-managed
    application keeps both).
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["BUDGETS", "HEAD_REVISION", "METADATA", "RECORDS", "VERSION_TABLE"]

HEAD_REVISION = "0004_record_guards"
VERSION_TABLE = "dp_ledger_schema"

METADATA = sa.MetaData()

BUDGETS = sa.Table(
    "dp_ledger_budgets",
    METADATA,
    sa.Column("dataset", sa.String(255), primary_key=True),
    sa.Column("budget", sa.Text, nullable=False),
    sa.Column("method", sa.String(16), nullable=False),
    sa.Column("totals", sa.Text, nullable=False),
    sa.Column("head_seq", sa.Integer, nullable=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
)

RECORDS = sa.Table(
    "dp_ledger_records",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("dataset", sa.String(255), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("idem_key", sa.String(512), nullable=True),
    sa.Column("reservation", sa.Integer, nullable=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("sig", sa.String(64), nullable=True),
)
