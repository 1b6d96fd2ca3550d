"""Initial ledger schema: per-dataset head rows and append-only, hash-chained records.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_APPEND_ONLY = "dp-pipeline ledger records are append-only"


def upgrade() -> None:
    op.create_table(
        "dp_ledger_budgets",
        sa.Column("dataset", sa.String(255), primary_key=True),
        sa.Column("budget", sa.Text, nullable=False),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("totals", sa.Text, nullable=False),
        sa.Column("head_seq", sa.Integer, nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
    )
    op.create_table(
        "dp_ledger_records",
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
        sa.UniqueConstraint("dataset", "seq", name="uq_dp_ledger_records_dataset_seq"),
    )
    where = sa.text("kind = 'reserve'")
    op.create_index(
        "ix_dp_ledger_records_key",
        "dp_ledger_records",
        ["dataset", "idem_key"],
        unique=True,
        sqlite_where=where,
        postgresql_where=where,
    )
    op.create_index("ix_dp_ledger_records_reservation", "dp_ledger_records", ["dataset", "reservation"])

    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER dp_ledger_records_no_{action.lower()} BEFORE {action} ON dp_ledger_records "
                f"BEGIN SELECT RAISE(ABORT, '{_APPEND_ONLY}'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION dp_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION '{_APPEND_ONLY}'; END $$"
        )
        op.execute(
            "CREATE TRIGGER dp_ledger_records_no_change BEFORE UPDATE OR DELETE ON dp_ledger_records "
            "FOR EACH ROW EXECUTE FUNCTION dp_ledger_append_only()"
        )
        op.execute(
            "CREATE TRIGGER dp_ledger_records_no_truncate BEFORE TRUNCATE ON dp_ledger_records "
            "FOR EACH STATEMENT EXECUTE FUNCTION dp_ledger_append_only()"
        )


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_no_truncate ON dp_ledger_records")
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_no_change ON dp_ledger_records")
        op.execute("DROP FUNCTION IF EXISTS dp_ledger_append_only()")
    op.drop_index("ix_dp_ledger_records_reservation", table_name="dp_ledger_records")
    op.drop_index("ix_dp_ledger_records_key", table_name="dp_ledger_records")
    op.drop_table("dp_ledger_records")
    op.drop_table("dp_ledger_budgets")
