"""The DAG check: the privacy plans of the DAGs in a folder against their budgets, before anything runs.

Usage (or ``airflow dp-pipeline check-dags ...`` with the same arguments; ``airflow dp-pipeline check`` is
kept as an alias)::

    python -m dp_pipeline.airflow.check DAG_FOLDER [--conn-id dp_ledger_default | --ledger-url URL] [--json]
                                              [--against budget|remaining] [--logical-date DATE]

``--logical-date`` renders templated dataset names (``dataset="visits/{{ ds }}"``) for the run of that date;
without it a name that needs a date is reported per template (see :mod:`dp_pipeline.airflow.planning`). On a
dataset declared partitioned, each line names the partition it checks (``visits/2026-03-02``: partition
``2026-03-02`` of ``visits``); without a date ``visits/{{ ds }}`` is checked as a new partition, one that has
spent nothing (shown ``{{ ds }} (new)``).

Not to be confused with ``dp-pipeline plan check``, which checks a JSON list of releases. Standard output
carries the report (a table, or JSON with ``--json``) and nothing else: Airflow's and the ledger's logs
go to standard error.

Exit status: 0 when every DAG's plan fits, 1 when a plan exceeds a budget (or the remaining budget with
``--against remaining``) or charges a dataset without a budget, 2 when the check could not be made: the
DAG folder does not exist or holds no DAG, a DAG file fails to import, or the ledger connection is not
defined, or a templated dataset name could not be rendered (give ``--logical-date``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting.ledger import redact_text
from dp_pipeline.airflow.declared import DEFAULT_CONN_ID
from dp_pipeline.exceptions import printable

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant
    from dp_pipeline.airflow.planning import DatasetCheck

__all__ = ["airflow_command", "check_folder", "main"]

EXIT_UNCHECKED = 2


class _CheckError(Exception):
    """The check could not be made (exit status 2)."""


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send everything written to standard output, by Python or by a log handler holding the stream or
    the file descriptor, to standard error, so that standard output carries only the report."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (e.g. captured)
        fd = None
    saved = None if fd is None else os.dup(fd)
    if fd is not None:
        os.dup2(sys.stderr.fileno(), fd)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved is not None and fd is not None:
            os.dup2(saved, fd)
            os.close(saved)


def _load_dags(folder: str) -> tuple[list[Any], dict[str, str]]:
    from airflow.dag_processing.dagbag import DagBag

    if not os.path.exists(folder):
        raise _CheckError(f"no DAG folder or file at {folder}")
    bag = DagBag(dag_folder=folder)
    if not bag.dags and not bag.import_errors:
        raise _CheckError(f"no DAG found in {folder}")
    return list(bag.dags.values()), dict(bag.import_errors)


def check_folder(
    folder: str, accountant: PrivacyAccountant, *, logical_date: str | None = None
) -> tuple[list[DatasetCheck], dict[str, str]]:
    """Plan and check every DAG found in ``folder``.

    Parameters
    ----------
    folder : str
        A DAG folder (or one DAG file).
    accountant : PrivacyAccountant
        The ledger holding the budgets (only read).
    logical_date : str, optional
        The logical date templated dataset names are rendered for.

    Returns
    -------
    checks : list of DatasetCheck
        One per DAG and charged dataset.
    import_errors : dict
        File → error for DAG files that failed to import (including cluster-policy refusals).

    Raises
    ------
    _CheckError
        ``folder`` does not exist, or holds no DAG and no DAG file that failed to import.
    """
    from dp_pipeline.airflow.planning import check_dag

    dags, errors = _load_dags(folder)
    checks = [
        check
        for dag in sorted(dags, key=lambda d: d.dag_id)
        for check in check_dag(dag, accountant, logical_date=logical_date)
    ]
    return checks, errors


def _as_dict(check: DatasetCheck) -> dict[str, Any]:
    from dp_pipeline.airflow.planning import hands_mechanism
    from dp_pipeline.planning import noise_parameters

    def show(guarantee: Any) -> Any:
        return None if guarantee is None else guarantee.to_dict()

    return {
        "dag_id": check.dag_id,
        "dataset": check.dataset,
        "partition": check.partition,
        "new_partition": check.new_partition,
        "relation": check.relation,
        "checked": check.checked,
        "tasks": [
            {
                "task_id": t.task_id,
                "cost": t.cost.describe(),
                "count": t.count,
                "map_bound": t.bound,
                "attempts": t.attempts,
                "releases": t.releases,
                "source": t.source,
                "up_front": "handed_mechanism" if hands_mechanism(check, t) else "budget_through_dp",
                "template": t.template,
                "calibrated": (
                    noise_parameters(check.calibrated[t.task_id]) if t.task_id in check.calibrated else None
                ),
            }
            for t in check.tasks
        ],
        "share": show(check.share),
        "total": show(check.total),
        "method": check.method,
        "budget": show(check.budget),
        "remaining": show(check.remaining),
        "fits_budget": check.fits_budget,
        "fits_remaining": check.fits_remaining,
        "problems": check.problems,
        "warnings": check.warnings,
    }


def _accountant(args: argparse.Namespace) -> PrivacyAccountant:
    if args.ledger_url:
        from dp_pipeline.accounting import PrivacyAccountant

        return PrivacyAccountant(args.ledger_url, create=False)
    from dp_pipeline.airflow.hooks import PrivacyLedgerHook

    try:
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:  # pragma: no cover - Airflow 2
        from airflow.exceptions import AirflowNotFoundException
    try:
        return PrivacyLedgerHook(args.conn_id).get_accountant()
    except AirflowNotFoundException:
        env = "AIRFLOW_CONN_" + args.conn_id.upper()
        raise _CheckError(
            f"no Airflow connection {args.conn_id!r}: define it (e.g. {env}=sqlite:////abs/path/ledger.db "
            "or 'airflow connections add'), or pass --ledger-url URL"
        ) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the DAG check; returns the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m dp_pipeline.airflow.check",
        description="DAG check: the privacy plans of the DAGs in a folder against their budgets. "
        "Exit 0: every plan fits; 1: a plan exceeds a budget; 2: the check could not be made (missing "
        "DAG folder, no DAG, DAG import errors, undefined ledger connection, templated dataset names not "
        "rendered). Logs go to stderr.",
    )
    parser.add_argument("dag_folder", help="a DAG folder or DAG file")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--conn-id", default=DEFAULT_CONN_ID, help="Airflow Connection of the ledger")
    source.add_argument("--ledger-url", help="SQLAlchemy URL of the ledger (instead of a Connection)")
    parser.add_argument("--against", choices=("budget", "remaining"), default="budget")
    parser.add_argument(
        "--logical-date", help="render templated dataset names for the run of this date (e.g. 2026-03-02)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    with _stdout_to_stderr():  # importing Airflow logs to stdout too
        from dp_pipeline.airflow.hooks import LedgerConnectionError
        from dp_pipeline.airflow.planning import format_checks
        from dp_pipeline.exceptions import InvalidParameterError, LedgerError

        try:
            accountant = _accountant(args)
        except _CheckError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_UNCHECKED
        except (LedgerConnectionError, LedgerError, ValueError) as exc:  # incl. InvalidParameterError
            message = redact_text(f"{type(exc).__name__}: {exc}", args.ledger_url)
            print(f"error: cannot open the ledger: {printable(message)}", file=sys.stderr)
            return EXIT_UNCHECKED
        try:
            checks, errors = check_folder(args.dag_folder, accountant, logical_date=args.logical_date)
        except (_CheckError, LedgerError, InvalidParameterError) as err:
            print(f"error: {printable(str(err))}", file=sys.stderr)
            return EXIT_UNCHECKED
    if args.json:
        print(json.dumps({"checks": [_as_dict(c) for c in checks], "import_errors": errors}, indent=2))
    else:
        print(format_checks(checks) if checks else "no DAG declares a privacy cost")
        for path, error in errors.items():
            shown = "\n".join(printable(line) for line in str(error).splitlines())
            print(f"import error in {printable(path)}:\n{shown}", file=sys.stderr)
    unchecked = [c for c in checks if not c.checked]
    if unchecked:
        names = ", ".join(sorted({f"{c.dag_id}: {c.dataset}" for c in unchecked}))
        print(f"error: templated dataset names not rendered: {printable(names)}", file=sys.stderr)
    if errors or unchecked:
        return EXIT_UNCHECKED
    failing = [c for c in checks if not c.ok or (args.against == "remaining" and not c.fits_remaining)]
    return 1 if failing else 0


def airflow_command(args: Any) -> None:
    """``airflow dp-pipeline check-dags`` (alias ``check``): the DAG check, from Airflow CLI arguments."""
    argv = [args.dag_folder, "--against", args.against]
    if getattr(args, "logical_date", None):
        argv += ["--logical-date", args.logical_date]
    if args.ledger_url:
        argv += ["--ledger-url", args.ledger_url]
    elif args.conn_id:
        argv += ["--conn-id", args.conn_id]
    if args.json:
        argv.append("--json")
    status = main(argv)
    if status:
        sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
