"""``airflow dp-pipeline check-dags``: the DAG check as an Airflow command (registered in provider info)."""

from __future__ import annotations

from typing import Any

__all__ = ["get_cli_commands"]


def get_cli_commands() -> list[Any]:
    """The ``dp-pipeline`` command group for the Airflow CLI.

    Returns
    -------
    list of GroupCommand
        ``airflow dp-pipeline check-dags DAG_FOLDER [--conn-id ID | --ledger-url URL] [--against ...]
        [--json] [--logical-date DATE]``, with the arguments and exit status of
        ``python -m dp_pipeline.airflow.check``;
        ``airflow dp-pipeline check`` is the same command under its former name.
    """
    from airflow.cli.cli_config import ActionCommand, Arg, GroupCommand, lazy_load_command

    args = (
        Arg(("dag_folder",), help="a DAG folder or DAG file"),
        Arg(("--conn-id",), help="Airflow Connection of the ledger (default: dp_ledger_default)"),
        Arg(("--ledger-url",), help="SQLAlchemy URL of the ledger (instead of a Connection)"),
        Arg(
            ("--against",),
            help="compare with the whole budget or what remains",
            choices=("budget", "remaining"),
            default="budget",
        ),
        Arg(("--json",), help="print JSON instead of a table", action="store_true"),
        Arg(("--logical-date",), help="render templated dataset names for the run of this date"),
    )
    func = lazy_load_command("dp_pipeline.airflow.check.airflow_command")
    help_text = (
        "DAG check: the privacy plans of the DAGs in a folder against their budgets (exit 1: a plan exceeds "
        "a budget; 2: missing folder, no DAG, import errors or no ledger connection)"
    )
    commands = (
        ActionCommand(name="check-dags", help=help_text, func=func, args=args),
        ActionCommand(name="check", help="alias of check-dags", func=func, args=args),
    )
    return [
        GroupCommand(name="dp-pipeline", help="Privacy budgets of DAGs (dp-pipeline)", subcommands=commands)
    ]
