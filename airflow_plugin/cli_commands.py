"""``airflow dp-pipeline check``: the plan check as an Airflow CLI command (registered by provider info)."""

from __future__ import annotations

from typing import Any

__all__ = ["get_cli_commands"]


def get_cli_commands() -> list[Any]:
    """The ``dp-pipeline`` command group for the Airflow CLI.

    Returns
    -------
    list of GroupCommand
        ``airflow dp-pipeline check DAG_FOLDER [--conn-id ID | --ledger-url URL] [--against ...] [--json]``,
        with the arguments and exit status of ``python -m airflow_plugin.check``.
    """
    from airflow.cli.cli_config import ActionCommand, Arg, GroupCommand, lazy_load_command

    check = ActionCommand(
        name="check",
        help="Check the privacy plans of the DAGs in a folder against their budgets",
        func=lazy_load_command("airflow_plugin.check.airflow_command"),
        args=(
            Arg(("dag_folder",), help="a DAG folder or DAG file"),
            Arg(("--conn-id",), help="Airflow Connection of the ledger", default="dp_ledger_default"),
            Arg(("--ledger-url",), help="SQLAlchemy URL of the ledger (instead of a Connection)"),
            Arg(
                ("--against",),
                help="compare with the whole budget or what remains",
                choices=("budget", "remaining"),
                default="budget",
            ),
            Arg(("--json",), help="print JSON instead of a table", action="store_true"),
        ),
    )
    return [
        GroupCommand(name="dp-pipeline", help="Privacy budgets of DAGs (dp-pipeline)", subcommands=(check,))
    ]
