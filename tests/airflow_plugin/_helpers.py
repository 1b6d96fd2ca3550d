"""Helpers for the Airflow tests (import them after conftest.py has configured AIRFLOW_HOME)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

from airflow_plugin.testing import run_dag
from airflow_plugin.testing import task_states as states

__all__ = ["FailureLog", "charges", "ledger_conn_uri", "run_dag", "states"]


def ledger_conn_uri(path: Path) -> str:
    """The documented connection form: conn type ``sqlite`` with the file path as host."""
    return "sqlite://" + urllib.parse.quote(str(path), safe="")


def charges(accountant: Any, dataset: str) -> list[tuple[str, str]]:
    """(key, status) of every reservation on the dataset, in ledger order."""
    return [(entry.key, entry.status) for entry in accountant.records(dataset) if entry.kind == "reserve"]


class FailureLog:
    """An ``on_failure_callback`` that keeps the exception Airflow hands to it (the task's real error)."""

    def __init__(self) -> None:
        self.errors: dict[str, BaseException] = {}

    def __call__(self, context: Any) -> None:
        self.errors[context["ti"].task_id] = context["exception"]
