"""Apache Airflow 3 integration for dp-pipeline: tasks that stay inside a dataset's privacy budget.

A task declares its privacy cost (dataset, mechanism or guarantee, group size) when the DAG is defined.
Before any user code runs, the task reserves that cost on the ledger; a task whose cost does not fit fails
with :class:`PrivacyBudgetExhausted`, which Airflow does not retry. Three ways to declare a cost:

- :class:`PrivacyBudgetOperator`, which runs a callable and hands it the mechanism and the accountant;
- the :func:`dp_task` TaskFlow decorator (also ``@task.dp`` once the package is installed);
- :func:`dp_guard`, a ``pre_execute`` guard for any operator, and :mod:`airflow_plugin.policies`, an opt-in
  cluster policy that attaches it to every task declaring a cost.

The task's code pays its releases from the attempt's reservation, handed to it as ``dp`` (one charge per
attempt, see :mod:`airflow_plugin.operators`); :func:`run_budget` makes a whole DAG run reserve its plan
before any task reads data (:mod:`airflow_plugin.runs`), and with a budget share calibrates the noise of the
tasks that leave it free (:mod:`airflow_plugin.allocating`).

The ledger is reached through an Airflow Connection (:class:`PrivacyLedgerHook`, conn id
``dp_ledger_default``). :mod:`airflow_plugin.planning` composes a DAG's declared costs before anything runs
(``python -m airflow_plugin.check DAG_FOLDER``), and :mod:`airflow_plugin.plugin` adds a read-only budget
dashboard to the Airflow UI.

Names are imported lazily, so that ``airflow_local_settings.py`` can import :mod:`airflow_plugin.policies`
while Airflow itself is still initialising.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

INSTALL_HINT = 'the Airflow integration needs Apache Airflow 3: pip install "dp-pipeline[airflow]"'

if importlib.util.find_spec("airflow") is None:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(INSTALL_HINT, name="airflow")

if TYPE_CHECKING:
    from airflow_plugin.costs import DPCost
    from airflow_plugin.decorators import dp_task
    from airflow_plugin.exceptions import PrivacyBudgetExhausted, PrivacyBudgetSkipped, PrivacyCostError
    from airflow_plugin.guards import PrivacyBudgetGuard, attach_guard, dp_guard
    from airflow_plugin.hooks import PrivacyLedgerHook
    from airflow_plugin.operators import PrivacyBudgetOperator
    from airflow_plugin.planning import DagPlan, check_dag, plan_dag
    from airflow_plugin.runs import RunBudgetSetupOperator, RunBudgetTeardownOperator, run_budget

_EXPORTS: dict[str, str] = {
    "DPCost": "airflow_plugin.costs",
    "DagPlan": "airflow_plugin.planning",
    "PrivacyBudgetExhausted": "airflow_plugin.exceptions",
    "PrivacyBudgetGuard": "airflow_plugin.guards",
    "PrivacyBudgetOperator": "airflow_plugin.operators",
    "PrivacyBudgetSkipped": "airflow_plugin.exceptions",
    "PrivacyCostError": "airflow_plugin.exceptions",
    "PrivacyLedgerHook": "airflow_plugin.hooks",
    "RunBudgetSetupOperator": "airflow_plugin.runs",
    "RunBudgetTeardownOperator": "airflow_plugin.runs",
    "attach_guard": "airflow_plugin.guards",
    "check_dag": "airflow_plugin.planning",
    "dp_guard": "airflow_plugin.guards",
    "dp_task": "airflow_plugin.decorators",
    "plan_dag": "airflow_plugin.planning",
    "run_budget": "airflow_plugin.runs",
}

__all__ = [
    "DPCost",
    "DagPlan",
    "PrivacyBudgetExhausted",
    "PrivacyBudgetGuard",
    "PrivacyBudgetOperator",
    "PrivacyBudgetSkipped",
    "PrivacyCostError",
    "PrivacyLedgerHook",
    "RunBudgetSetupOperator",
    "RunBudgetTeardownOperator",
    "attach_guard",
    "check_dag",
    "dp_guard",
    "dp_task",
    "plan_dag",
    "run_budget",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'airflow_plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
