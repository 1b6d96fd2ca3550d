"""Record signatures, and triggers that keep the chain and the head row consistent.

* ``dp_ledger_records.sig``: the HMAC of the record's hash under the ledger key (NULL when written
  without a key);
* a record must extend its dataset's chain (seq = last seq + 1, prev_hash = last hash), which also refuses
  ``INSERT OR REPLACE`` of an existing record;
* the head row cannot be deleted, may only move forward to the dataset's last record, and its budget or
  rule may change only together with a new ``budget`` record; a head is inserted only for a new dataset.

Revision ID: 0002_guards
Revises: 0001_initial
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002_guards"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None

_CHAIN = "dp-pipeline ledger records must extend their dataset''s chain"
_HEAD = "the dp-pipeline ledger head row moves only with new records"
_GENESIS = "0" * 64

_SQLITE = [
    f"""CREATE TRIGGER dp_ledger_records_chain BEFORE INSERT ON dp_ledger_records
WHEN NEW.seq IS NOT COALESCE((SELECT MAX(seq) FROM dp_ledger_records WHERE dataset = NEW.dataset), 0) + 1
  OR NEW.prev_hash IS NOT COALESCE(
       (SELECT hash FROM dp_ledger_records WHERE dataset = NEW.dataset AND seq = NEW.seq - 1), '{_GENESIS}')
  OR EXISTS (SELECT 1 FROM dp_ledger_records WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, '{_CHAIN}'); END""",
    f"""CREATE TRIGGER dp_ledger_budgets_no_delete BEFORE DELETE ON dp_ledger_budgets
BEGIN SELECT RAISE(ABORT, '{_HEAD}'); END""",
    f"""CREATE TRIGGER dp_ledger_budgets_insert BEFORE INSERT ON dp_ledger_budgets
WHEN NEW.head_seq IS NOT 1
  OR (SELECT MAX(seq) FROM dp_ledger_records WHERE dataset = NEW.dataset) IS NOT 1
  OR NOT EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset AND seq = 1
                 AND hash = NEW.head_hash AND kind = 'budget')
BEGIN SELECT RAISE(ABORT, '{_HEAD}'); END""",
    f"""CREATE TRIGGER dp_ledger_budgets_update BEFORE UPDATE ON dp_ledger_budgets
WHEN NEW.dataset IS NOT OLD.dataset
  OR NEW.head_seq <= OLD.head_seq
  OR NEW.head_seq IS NOT (SELECT MAX(seq) FROM dp_ledger_records WHERE dataset = NEW.dataset)
  OR NOT EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset AND seq = NEW.head_seq
                 AND hash = NEW.head_hash)
  OR ((NEW.budget IS NOT OLD.budget OR NEW.method IS NOT OLD.method)
      AND NOT EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset AND seq > OLD.head_seq
                      AND kind = 'budget'))
BEGIN SELECT RAISE(ABORT, '{_HEAD}'); END""",
]

_POSTGRES = [
    f"""CREATE FUNCTION dp_ledger_chain_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE last_seq integer; last_hash text;
BEGIN
  SELECT seq, hash INTO last_seq, last_hash FROM dp_ledger_records
   WHERE dataset = NEW.dataset ORDER BY seq DESC LIMIT 1;
  IF NEW.seq <= COALESCE(last_seq, 0) THEN
    -- the seq is taken (e.g. by a writer that created the dataset first): a unique violation, retried
    RAISE EXCEPTION '{_CHAIN}' USING ERRCODE = 'unique_violation';
  END IF;
  IF NEW.seq IS DISTINCT FROM COALESCE(last_seq, 0) + 1
     OR NEW.prev_hash IS DISTINCT FROM COALESCE(last_hash, '{_GENESIS}') THEN
    RAISE EXCEPTION '{_CHAIN}';
  END IF;
  RETURN NEW;
END $$""",
    """CREATE TRIGGER dp_ledger_records_chain BEFORE INSERT ON dp_ledger_records
FOR EACH ROW EXECUTE FUNCTION dp_ledger_chain_insert()""",
    f"""CREATE FUNCTION dp_ledger_head_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE last_seq integer; last_hash text; last_kind text;
BEGIN
  IF TG_OP IN ('DELETE', 'TRUNCATE') THEN
    RAISE EXCEPTION '{_HEAD}';
  END IF;
  SELECT seq, hash, kind INTO last_seq, last_hash, last_kind FROM dp_ledger_records
   WHERE dataset = NEW.dataset ORDER BY seq DESC LIMIT 1;
  IF last_seq IS NULL OR NEW.head_seq IS DISTINCT FROM last_seq
     OR NEW.head_hash IS DISTINCT FROM last_hash THEN
    RAISE EXCEPTION '{_HEAD}';
  END IF;
  IF TG_OP = 'INSERT' THEN
    IF last_seq <> 1 OR last_kind <> 'budget' THEN
      RAISE EXCEPTION '{_HEAD}';
    END IF;
  ELSIF NEW.dataset IS DISTINCT FROM OLD.dataset OR NEW.head_seq <= OLD.head_seq
     OR ((NEW.budget IS DISTINCT FROM OLD.budget OR NEW.method IS DISTINCT FROM OLD.method)
         AND NOT EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset
                         AND seq > OLD.head_seq AND kind = 'budget')) THEN
    RAISE EXCEPTION '{_HEAD}';
  END IF;
  RETURN NEW;
END $$""",
    """CREATE TRIGGER dp_ledger_budgets_guard BEFORE INSERT OR UPDATE OR DELETE ON dp_ledger_budgets
FOR EACH ROW EXECUTE FUNCTION dp_ledger_head_guard()""",
    """CREATE TRIGGER dp_ledger_budgets_no_truncate BEFORE TRUNCATE ON dp_ledger_budgets
FOR EACH STATEMENT EXECUTE FUNCTION dp_ledger_head_guard()""",
]


def upgrade() -> None:
    op.add_column("dp_ledger_records", sa.Column("sig", sa.String(64), nullable=True))
    dialect = op.get_context().dialect.name
    for statement in {"sqlite": _SQLITE, "postgresql": _POSTGRES}.get(dialect, []):
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        for name in ("records_chain", "budgets_no_delete", "budgets_insert", "budgets_update"):
            op.execute(f"DROP TRIGGER IF EXISTS dp_ledger_{name}")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_budgets_no_truncate ON dp_ledger_budgets")
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_budgets_guard ON dp_ledger_budgets")
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_chain ON dp_ledger_records")
        op.execute("DROP FUNCTION IF EXISTS dp_ledger_head_guard()")
        op.execute("DROP FUNCTION IF EXISTS dp_ledger_chain_insert()")
    op.drop_column("dp_ledger_records", "sig")
