"""Least-privilege set-up of a PostgreSQL ledger: the SQL that lets a writing role spend and nothing more.

The role that owns the ledger's tables (the one that ran ``dp-pipeline ledger init``) can alter them, and so
disable their triggers. The workers should therefore write as another role, which:

* reads the ledger's tables;
* may INSERT records (the chain trigger accepts only a record that extends its dataset's chain; UPDATE,
  DELETE and TRUNCATE are not granted, and the append-only triggers refuse them anyway);
* may INSERT a dataset's head row and UPDATE only its columns (the head trigger refuses what no writer
  writes: the head moves forward to the dataset's last record, and the budget changes only with a new
  ``budget`` record; what the JSON says is checked by every write before it trusts it, see
  :mod:`dp_pipeline.accounting._incremental`);
* does not own the tables, so it cannot ``ALTER TABLE … DISABLE TRIGGER``, drop them or change the
  schema (``SET session_replication_role``, which would skip triggers, needs a superuser).

:func:`grant_statements` returns the statements; ``dp-pipeline ledger grant --role NAME`` prints them, and
with ``--apply`` runs them as the connecting (owner) role.
"""

from __future__ import annotations

import re

from dp_pipeline.accounting.ledger._schema import BUDGETS, RECORDS, VERSION_TABLE
from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["grant_statements"]

_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def grant_statements(role: str) -> list[str]:
    """The SQL that gives ``role`` exactly the privileges a writer of the ledger needs (see module doc).

    Raises
    ------
    InvalidParameterError
        ``role`` is not a plain PostgreSQL identifier (letters, digits, ``_``, ``$``; at most 63).
    """
    if not isinstance(role, str) or not _ROLE.fullmatch(role):
        raise InvalidParameterError(
            "the role must be a plain PostgreSQL identifier (letters, digits, '_' or '$', at most 63)", "role"
        )
    who = f'"{role}"'
    head_columns = ", ".join(c.name for c in BUDGETS.columns if c.name != "dataset")
    return [
        f"REVOKE ALL ON {RECORDS.name}, {BUDGETS.name}, {VERSION_TABLE} FROM {who}",
        f"GRANT SELECT, INSERT ON {RECORDS.name} TO {who}",
        f"GRANT USAGE ON SEQUENCE {RECORDS.name}_id_seq TO {who}",
        f"GRANT SELECT, INSERT ON {BUDGETS.name} TO {who}",
        f"GRANT UPDATE ({head_columns}) ON {BUDGETS.name} TO {who}",
        f"GRANT SELECT ON {VERSION_TABLE} TO {who}",
    ]
