"""Check the privacy plans of the DAGs in a folder against their budgets, before anything runs.

Usage (or ``airflow dp-pipeline check ...`` with the same arguments)::

    python -m airflow_plugin.check DAG_FOLDER [--conn-id dp_ledger_default | --ledger-url URL] [--json]
                                              [--against budget|remaining]

Exit status: 0 when every DAG's plan fits, 1 when a plan exceeds a budget (or the remaining budget with
``--against remaining``) or charges a dataset without a budget, 2 when a DAG file fails to import.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting.ledger.urls import redact_text
from dp_pipeline.exceptions import LedgerError, printable

if TYPE_CHECKING:
    from airflow_plugin.planning import DatasetCheck
    from dp_pipeline.accounting.accountant import PrivacyAccountant

__all__ = ["airflow_command", "check_folder", "main"]


def _load_dags(folder: str) -> tuple[list[Any], dict[str, str]]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=folder)
    return list(bag.dags.values()), dict(bag.import_errors)


def check_folder(folder: str, accountant: PrivacyAccountant) -> tuple[list[DatasetCheck], dict[str, str]]:
    """Plan and check every DAG found in ``folder``.

    Parameters
    ----------
    folder : str
        A DAG folder (or one DAG file).
    accountant : PrivacyAccountant
        The ledger holding the budgets (only read).

    Returns
    -------
    checks : list of DatasetCheck
        One per DAG and charged dataset.
    import_errors : dict
        File → error for DAG files that failed to import (including cluster-policy refusals).
    """
    from airflow_plugin.planning import check_dag

    dags, errors = _load_dags(folder)
    checks = [check for dag in sorted(dags, key=lambda d: d.dag_id) for check in check_dag(dag, accountant)]
    return checks, errors


def _as_dict(check: DatasetCheck) -> dict[str, Any]:
    def show(guarantee: Any) -> Any:
        return None if guarantee is None else guarantee.to_dict()

    return {
        "dag_id": check.dag_id,
        "dataset": check.dataset,
        "tasks": [
            {"task_id": t.task_id, "cost": t.cost.describe(), "count": t.count, "source": t.source}
            for t in check.tasks
        ],
        "total": show(check.total),
        "method": check.method,
        "budget": show(check.budget),
        "remaining": show(check.remaining),
        "fits_budget": check.fits_budget,
        "fits_remaining": check.fits_remaining,
        "problems": check.problems,
        "warnings": check.warnings,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m airflow_plugin.check", description="Check DAG privacy plans against their budgets."
    )
    parser.add_argument("dag_folder", help="a DAG folder or DAG file")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--conn-id", default="dp_ledger_default", help="Airflow Connection of the ledger")
    source.add_argument("--ledger-url", help="SQLAlchemy URL of the ledger (instead of a Connection)")
    parser.add_argument("--against", choices=("budget", "remaining"), default="budget")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    from airflow_plugin.planning import format_checks

    try:
        if args.ledger_url:
            from dp_pipeline.accounting.accountant import PrivacyAccountant

            accountant = PrivacyAccountant(args.ledger_url)
        else:
            from airflow_plugin.hooks import PrivacyLedgerHook

            accountant = PrivacyLedgerHook(args.conn_id).get_accountant()
    except (LedgerError, ValueError) as exc:  # incl. InvalidParameterError, LedgerConnectionError
        message = redact_text(f"{type(exc).__name__}: {exc}", args.ledger_url)
        print(f"error: cannot open the ledger: {printable(message)}", file=sys.stderr)
        return 2
    checks, errors = check_folder(args.dag_folder, accountant)
    if args.json:
        print(json.dumps({"checks": [_as_dict(c) for c in checks], "import_errors": errors}, indent=2))
    else:
        print(format_checks(checks) if checks else "no DAG declares a privacy cost")
        for path, error in errors.items():
            shown = "\n".join(printable(line) for line in str(error).splitlines())
            print(f"import error in {printable(path)}:\n{shown}", file=sys.stderr)
    if errors:
        return 2
    failing = [c for c in checks if not c.ok or (args.against == "remaining" and not c.fits_remaining)]
    return 1 if failing else 0


def airflow_command(args: Any) -> None:
    """``airflow dp-pipeline check``: the same check, from the Airflow CLI's parsed arguments."""
    argv = [args.dag_folder, "--against", args.against]
    argv += ["--ledger-url", args.ledger_url] if args.ledger_url else ["--conn-id", args.conn_id]
    if args.json:
        argv.append("--json")
    status = main(argv)
    if status:
        sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
