"""Run the main Airflow example end to end on an embedded SQLite ledger, and print the budget table.

A throw-away AIRFLOW_HOME and ledger are made in a temporary directory. The dataset ``patients`` gets a
budget of ε = 1; the DAG examples/airflow/dags/dp_patients_report.py declares three releases at ε = 0.5.
The demo first checks the DAG's plan (before anything runs), then runs it with ``dag.test()``: two tasks
spend the budget, the third is refused before it reads the data. It prints the task states, the refusal,
the budget table and the ledger history.

Usage: ``python examples/airflow_demo.py`` (needs the airflow extra: ``pip install "dp-pipeline[airflow]"``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

EXAMPLE_DAG = Path(__file__).resolve().parent / "airflow" / "dags" / "dp_patients_report.py"


def _configure(workdir: Path) -> Path:
    """Point Airflow at a throw-away home (before airflow is imported) and the ledger connection at a
    fresh SQLite file; returns the ledger path."""
    home = workdir / "airflow"
    (home / "dags").mkdir(parents=True)
    ledger = workdir / "ledger.db"
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
            # the documented connection form: conn type sqlite, the ledger file's path as host
            "AIRFLOW_CONN_DP_LEDGER_DEFAULT": "sqlite://" + urllib.parse.quote(str(ledger), safe=""),
        }
    )
    return ledger


class _Failures:
    """An ``on_failure_callback`` that keeps each failed task's exception."""

    def __init__(self) -> None:
        self.errors: dict[str, BaseException] = {}

    def __call__(self, context: Any) -> None:
        self.errors[context["ti"].task_id] = context["exception"]


def _print_tables(title: str, header: list[str], rows: list[list[str]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text without the cli extra
        widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
        print(f"\n{title}")
        for row in [header, *rows]:
            print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
        return
    print()
    table = Table(title=title, title_justify="left")
    for name in header:
        table.add_column(name)
    for row in rows:
        table.add_row(*[str(cell) for cell in row])
    Console(width=150).print(table)


def run(workdir: Path) -> int:
    """Run the demo in ``workdir``; returns 0 when the outcome is the expected one."""
    ledger_path = _configure(workdir)

    # Airflow is imported only now, configured by the environment above
    from airflow.dag_processing.dagbag import DagBag
    from airflow.utils import db

    from dp_pipeline import PureDP
    from dp_pipeline.accounting import PrivacyAccountant
    from dp_pipeline.airflow import PrivacyBudgetExhausted, check_dag
    from dp_pipeline.airflow.planning import format_checks
    from dp_pipeline.airflow.reports import format_guarantee, summarize
    from dp_pipeline.airflow.testing import run_dag, task_states

    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        db.resetdb()
    ledger = PrivacyAccountant(f"sqlite:///{ledger_path}", create=True)
    ledger.set_budget("patients", PureDP(1.0), reason="demo budget: pays for two releases at ε = 0.5")

    bag = DagBag(dag_folder=str(EXAMPLE_DAG))
    if bag.import_errors:
        print(bag.import_errors, file=sys.stderr)
        return 1
    dag = bag.dags["dp_patients_report"]
    print(f"DAG {dag.dag_id}: {', '.join(t.task_id for t in dag.tasks)}; budget of 'patients': ε = 1\n")
    print("Plan check before anything runs (python -m dp_pipeline.airflow.check):")
    print(format_checks(check_dag(dag, ledger)))

    failures = _Failures()
    for task in dag.tasks:
        task.on_failure_callback = [failures]
    quiet = logging.getLogger("dp_pipeline.airflow")  # the refusal is printed below, once
    quiet.setLevel(logging.CRITICAL)
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        dag_run = run_dag(dag)
    quiet.setLevel(logging.NOTSET)
    (workdir / "airflow-run.log").write_text(log.getvalue())

    states = task_states(dag_run)
    outputs = {ti.task_id: ti.xcom_pull(task_ids=ti.task_id) for ti in dag_run.get_task_instances()}
    shown = {task: "-" if value is None else str(value) for task, value in outputs.items()}
    _print_tables(
        "Task instances",
        ["task", "state", "released value"],
        [[task, state, shown.get(task, "-")] for task, state in states.items()],
    )
    refused = failures.errors.get("sum_of_ages")
    if isinstance(refused, PrivacyBudgetExhausted):
        print(f"\nRefused: sum_of_ages raised {type(refused).__name__} (not retried):\n  {refused}")

    summary = summarize(ledger, "patients")
    _print_tables(
        "Privacy budget",
        ["dataset", "budget", "spent", "remaining", "method", "commits"],
        [
            [
                summary.dataset,
                format_guarantee(summary.budget),
                format_guarantee(summary.spent),
                format_guarantee(summary.remaining),
                summary.method,
                str(sum(1 for row in summary.history if row.is_charge and row.status == "committed")),
            ]
        ],
    )
    _print_tables(
        "Ledger history of 'patients'",
        ["record", "label", "key", "cost", "status"],
        [[r.kind, r.label, r.key, format_guarantee(r.cost), r.status] for r in summary.history],
    )
    expected = {"count_diabetic": "success", "count_over_65": "success", "sum_of_ages": "failed"}
    commits = [r for r in summary.history if r.is_charge and r.status == "committed"]
    ok = states == expected and len(commits) == 2 and isinstance(refused, PrivacyBudgetExhausted)
    print("\nOutcome as expected: two releases committed, the third refused." if ok else "\nUNEXPECTED")
    return 0 if ok else 1


def main() -> int:
    """Run the demo in a temporary directory and remove it afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix="dp-airflow-demo-"))
    try:
        return run(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
