"""Records of known kinds only, and no ``INSERT OR REPLACE`` that deletes a reservation.

* a record's kind must be one the accountant writes (``budget``, ``reserve``, ``commit``, ``release``,
  ``pay``, ``shrink``), and a ``reserve`` record carries an idempotency key;
* SQLite: a ``reserve`` record whose key an earlier reservation of its dataset holds is refused before the
  unique index sees it. ``INSERT OR REPLACE`` resolves a unique conflict by deleting the older row, and
  SQLite fires no DELETE trigger for that (unless ``recursive_triggers`` is on, which a tamperer's own
  connection need not set), so the append-only trigger alone let it delete an old reservation; likewise a
  head row is inserted only for a dataset that has none (``INSERT OR REPLACE`` of a head row). PostgreSQL
  has no REPLACE: ``ON CONFLICT DO UPDATE`` is an UPDATE, which the append-only trigger refuses.

The running totals, the charges and the rule settings are JSON that the accountant's own arithmetic
produces; the database does not re-check them. Every write checks them instead, from the records
appended since it last looked (:mod:`dp_pipeline.accounting._incremental`).

Revision ID: 0004_record_guards
Revises: 0003_payments
Create Date: 2027-01-12
"""

from __future__ import annotations

from alembic import op

revision: str = "0004_record_guards"
down_revision: str | None = "0003_payments"
branch_labels: str | None = None
depends_on: str | None = None

_KINDS = "('budget', 'reserve', 'commit', 'release', 'pay', 'shrink')"
_RECORD = "dp-pipeline ledger records must be of a known kind, and a reservation''s idempotency key new"
_HEAD = "the dp-pipeline ledger head row moves only with new records"

_SQLITE = [
    f"""CREATE TRIGGER dp_ledger_records_kind_key BEFORE INSERT ON dp_ledger_records
WHEN NEW.kind NOT IN {_KINDS}
  OR (NEW.kind = 'reserve' AND (NEW.idem_key IS NULL
      OR EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset AND kind = 'reserve'
                 AND idem_key = NEW.idem_key)))
BEGIN SELECT RAISE(ABORT, '{_RECORD}'); END""",
    f"""CREATE TRIGGER dp_ledger_budgets_insert_new BEFORE INSERT ON dp_ledger_budgets
WHEN EXISTS (SELECT 1 FROM dp_ledger_budgets WHERE dataset = NEW.dataset)
BEGIN SELECT RAISE(ABORT, '{_HEAD}'); END""",
]

_POSTGRES = [
    f"""CREATE FUNCTION dp_ledger_record_kind_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind NOT IN {_KINDS} OR (NEW.kind = 'reserve' AND NEW.idem_key IS NULL) THEN
    RAISE EXCEPTION '{_RECORD}';
  END IF;
  RETURN NEW;
END $$""",
    """CREATE TRIGGER dp_ledger_records_kind_key BEFORE INSERT ON dp_ledger_records
FOR EACH ROW EXECUTE FUNCTION dp_ledger_record_kind_key()""",
]


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    for statement in {"sqlite": _SQLITE, "postgresql": _POSTGRES}.get(dialect, []):
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_budgets_insert_new")
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_kind_key")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_kind_key ON dp_ledger_records")
        op.execute("DROP FUNCTION IF EXISTS dp_ledger_record_kind_key()")
