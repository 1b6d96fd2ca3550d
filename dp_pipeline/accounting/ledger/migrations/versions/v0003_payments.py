"""Releases paid from a reservation (``pay`` records) and reservations lowered to a sub-plan (``shrink``).

Both kinds name their reservation in the ``reservation`` column, as ``commit`` and ``release`` do, but do not
end it. An older dp-pipeline would read the first of them as the reservation's end (and could then cancel a
reservation that paid for releases, or return its original charge after it was lowered), so it must not
write to a ledger that has them: this revision is unknown to it, and it refuses the ledger.

The schema gains one guard: a record that names a reservation (commit, release, pay, shrink) must name a
``reserve`` record of its dataset under the same idempotency key, and a reservation that paid for a release
cannot be cancelled (a ``release`` record after a ``pay``). The accountant never writes either; the guard
stops a hand-written row.

Revision ID: 0003_payments
Revises: 0002_guards
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision: str = "0003_payments"
down_revision: str | None = "0002_guards"
branch_labels: str | None = None
depends_on: str | None = None

_NAMES = "dp-pipeline ledger records must name a reservation of their dataset; one that paid stays charged"

_SQLITE = f"""CREATE TRIGGER dp_ledger_records_reservation BEFORE INSERT ON dp_ledger_records
WHEN NEW.kind IN ('commit', 'release', 'pay', 'shrink') AND (
  NOT EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset AND seq = NEW.reservation
              AND kind = 'reserve' AND idem_key IS NEW.idem_key)
  OR (NEW.kind = 'release' AND EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset
                                       AND reservation = NEW.reservation AND kind = 'pay')))
BEGIN SELECT RAISE(ABORT, '{_NAMES}'); END"""

_POSTGRES = [
    f"""CREATE FUNCTION dp_ledger_reservation_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind IN ('commit', 'release', 'pay', 'shrink') AND (
     NOT EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset AND seq = NEW.reservation
                 AND kind = 'reserve' AND idem_key IS NOT DISTINCT FROM NEW.idem_key)
     OR (NEW.kind = 'release' AND EXISTS (SELECT 1 FROM dp_ledger_records WHERE dataset = NEW.dataset
                                          AND reservation = NEW.reservation AND kind = 'pay'))) THEN
    RAISE EXCEPTION '{_NAMES}';
  END IF;
  RETURN NEW;
END $$""",
    """CREATE TRIGGER dp_ledger_records_reservation BEFORE INSERT ON dp_ledger_records
FOR EACH ROW EXECUTE FUNCTION dp_ledger_reservation_insert()""",
]


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    for statement in {"sqlite": [_SQLITE], "postgresql": _POSTGRES}.get(dialect, []):
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_reservation")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS dp_ledger_records_reservation ON dp_ledger_records")
        op.execute("DROP FUNCTION IF EXISTS dp_ledger_reservation_insert()")
