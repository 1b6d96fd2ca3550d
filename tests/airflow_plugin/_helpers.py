"""Helpers for the Airflow tests (import them after conftest.py has configured AIRFLOW_HOME)."""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from dp_pipeline.accounting import ledger_entries
from dp_pipeline.airflow.testing import run_dag
from dp_pipeline.airflow.testing import task_states as states

__all__ = ["FailureLog", "charges", "ledger_conn_uri", "ledger_copy", "run_dag", "states"]


def ledger_conn_uri(path: Path) -> str:
    """The documented connection form: conn type ``sqlite`` with the file path as host."""
    return "sqlite://" + urllib.parse.quote(str(path), safe="")


def ledger_copy(url: str, to: Path) -> Any:
    """A consistent copy of a SQLite ledger (through SQLite's backup, which includes the WAL), opened."""
    from dp_pipeline import PrivacyAccountant

    source = sqlite3.connect(url.removeprefix("sqlite:///"))
    target = sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return PrivacyAccountant(f"sqlite:///{to}", create=False)


def charges(accountant: Any, dataset: str) -> list[tuple[str, str]]:
    """(key, status) of every reservation on the dataset, in ledger order."""
    return [
        (entry.key, entry.status)
        for entry in ledger_entries(accountant.store, dataset)
        if entry.kind == "reserve"
    ]


class FailureLog:
    """An ``on_failure_callback`` that keeps the exception Airflow hands to it (the task's real error)."""

    def __init__(self) -> None:
        self.errors: dict[str, BaseException] = {}

    def __call__(self, context: Any) -> None:
        self.errors[context["ti"].task_id] = context["exception"]
