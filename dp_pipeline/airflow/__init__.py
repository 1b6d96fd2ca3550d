"""Apache Airflow 3 integration for dp-pipeline: tasks that stay inside a dataset's privacy budget.

A task declares its privacy cost (dataset, mechanism or guarantee, group size) when the DAG is defined.
Before any user code runs, the task reserves that cost on the ledger; a task whose cost does not fit fails
with :class:`PrivacyBudgetExhausted`, which Airflow does not retry. Three ways to declare a cost:

- :class:`PrivacyBudgetOperator`, which runs a callable and hands it the mechanism and the accountant;
- the :func:`dp_task` TaskFlow decorator (also ``@task.dp`` once the package is installed);
- :func:`dp_guard`, a ``pre_execute`` guard for any operator, and :mod:`dp_pipeline.airflow.policies`, an
  opt-in
  cluster policy that attaches it to every task declaring a cost.

The task's code pays its releases from the attempt's reservation, handed to it as ``dp`` (one charge per
attempt, see :mod:`dp_pipeline.airflow.operators`); :func:`run_budget` makes a whole DAG run reserve its plan
before any task reads data (:mod:`dp_pipeline.airflow.runs`), and with a budget share calibrates the noise
of the
tasks that leave it free (:mod:`dp_pipeline.airflow.allocating`).

The ledger is reached through an Airflow Connection (:class:`PrivacyLedgerHook`, conn id
``dp_ledger_default``). :mod:`dp_pipeline.airflow.planning` composes a DAG's declared costs before anything
runs
(``python -m dp_pipeline.airflow.check DAG_FOLDER``), and :mod:`dp_pipeline.airflow.plugin` adds a read-only
budget
dashboard to the Airflow UI.

Names are imported lazily, so that ``airflow_local_settings.py`` can import
:mod:`dp_pipeline.airflow.policies`
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
    from dp_pipeline.airflow.costs import DPCost
    from dp_pipeline.airflow.declared import DagPlan
    from dp_pipeline.airflow.decorators import dp_task
    from dp_pipeline.airflow.exceptions import PrivacyBudgetExhausted, PrivacyBudgetSkipped, PrivacyCostError
    from dp_pipeline.airflow.guards import PrivacyBudgetGuard, attach_guard, dp_guard
    from dp_pipeline.airflow.hooks import PrivacyLedgerHook
    from dp_pipeline.airflow.operators import PrivacyBudgetOperator
    from dp_pipeline.airflow.planning import check_dag, plan_dag
    from dp_pipeline.airflow.runs import RunBudgetSetupOperator, RunBudgetTeardownOperator, run_budget

_EXPORTS: dict[str, str] = {
    "DPCost": "dp_pipeline.airflow.costs",
    "DagPlan": "dp_pipeline.airflow.declared",
    "PrivacyBudgetExhausted": "dp_pipeline.airflow.exceptions",
    "PrivacyBudgetGuard": "dp_pipeline.airflow.guards",
    "PrivacyBudgetOperator": "dp_pipeline.airflow.operators",
    "PrivacyBudgetSkipped": "dp_pipeline.airflow.exceptions",
    "PrivacyCostError": "dp_pipeline.airflow.exceptions",
    "PrivacyLedgerHook": "dp_pipeline.airflow.hooks",
    "RunBudgetSetupOperator": "dp_pipeline.airflow.runs",
    "RunBudgetTeardownOperator": "dp_pipeline.airflow.runs",
    "attach_guard": "dp_pipeline.airflow.guards",
    "check_dag": "dp_pipeline.airflow.planning",
    "dp_guard": "dp_pipeline.airflow.guards",
    "dp_task": "dp_pipeline.airflow.decorators",
    "plan_dag": "dp_pipeline.airflow.planning",
    "run_budget": "dp_pipeline.airflow.runs",
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
        raise AttributeError(f"module 'dp_pipeline.airflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
