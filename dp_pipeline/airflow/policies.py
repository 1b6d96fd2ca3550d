"""Opt-in Airflow cluster policies: enforce declared costs on any operator, refuse over-budget DAGs.

Enable them in ``$AIRFLOW_HOME/config/airflow_local_settings.py`` (they are not installed automatically,
since installing a package should not change how a cluster runs)::

    from dp_pipeline.airflow.policies import dag_policy, task_policy   # refuse DAGs whose plan exceeds a
    budget
    # or, to only log over-budget DAGs and read another ledger connection:
    # from dp_pipeline.airflow.policies import make_dag_policy, task_policy
    # dag_policy = make_dag_policy(mode="warn", ledger_conn_id="dp_ledger_prod")

``task_policy`` attaches a :class:`~dp_pipeline.airflow.guards.PrivacyBudgetGuard` to every task that declares
a cost in its params, so that any operator can be budgeted without code changes::

    BashOperator(task_id="export", bash_command="./export.sh",
                 params={"dp_cost": {"dataset": "patients", "epsilon": 0.5}})

The spec keys are those of :meth:`DPCost.from_spec <dp_pipeline.airflow.costs.DPCost.from_spec>` plus optional
``ledger_conn_id`` and ``on_exhausted``. The guard captures the spec when the DAG file is parsed, so a
``dag_run.conf`` that overrides params at trigger time cannot change what a task is charged.

``dag_policy`` composes the DAG's declared costs per dataset (:func:`dp_pipeline.airflow.planning.check_dag`)
and raises ``AirflowClusterPolicyViolation`` (the DAG shows as an import error and does not run) when one
run cannot fit a dataset's whole budget, when a charged dataset has no budget, or when the ledger cannot be
read. It compares with the whole budget, not with what remains: Airflow re-parses the DAG in the worker for
every task, and a DAG must not disappear half-way through a run as its own tasks spend the budget. A plan
that exceeds only the remainder is logged. A parsed DAG has no logical date: a dataset name templated on the
date is logged as not checked (check it with ``--logical-date``).

``airflow_local_settings.py`` is imported while Airflow itself initialises, so the modules that reach
Airflow's task SDK (guards, hooks, planning) are imported inside the functions; what a task declares is
read through :mod:`dp_pipeline.airflow.declared`, which needs none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from airflow.policies import hookimpl

from dp_pipeline.accounting.ledger import redact_text
from dp_pipeline.airflow.declared import DEFAULT_CONN_ID, operator_cost, params_spec, spec_to_cost
from dp_pipeline.exceptions import InvalidParameterError, printable

if TYPE_CHECKING:
    from dp_pipeline.airflow.planning import DatasetCheck

__all__ = ["dag_policy", "make_dag_policy", "spec_to_cost", "task_policy", "task_policy_active"]

log = logging.getLogger(__name__)


@hookimpl
def task_policy(task: Any) -> None:
    """Attach a privacy guard to a task that declares ``params["dp_cost"]`` (idempotent).

    Raises
    ------
    AirflowClusterPolicyViolation
        For an invalid spec, or a task that declares a cost twice (its own and in params).
    """
    from airflow.exceptions import AirflowClusterPolicyViolation

    from dp_pipeline.airflow.declared import iter_guards
    from dp_pipeline.airflow.guards import PrivacyBudgetGuard, attach_guard

    spec = params_spec(task)
    if spec is None:
        return
    try:
        cost = spec_to_cost(spec)
        guard = PrivacyBudgetGuard(
            cost,
            ledger_conn_id=str(spec.get("ledger_conn_id", DEFAULT_CONN_ID)),
            on_exhausted=spec.get("on_exhausted", "fail"),
        )
    except (ValueError, TypeError) as exc:
        raise AirflowClusterPolicyViolation(
            f"task {task.task_id!r}: invalid params['dp_cost']: {exc}"
        ) from exc
    if any(existing == guard for existing in iter_guards(task)):
        return
    if operator_cost(task) is not None or next(iter_guards(task), None) is not None:
        raise AirflowClusterPolicyViolation(
            f"task {task.task_id!r} declares a privacy cost twice (its own and params['dp_cost']); "
            "one attempt is charged for one cost"
        )
    attach_guard(task, guard)


def task_policy_active() -> bool:
    """Whether :func:`task_policy` is registered with Airflow's cluster-policy manager."""
    from airflow.settings import get_policy_plugin_manager

    implementations = get_policy_plugin_manager().hook.task_policy.get_hookimpls()
    return any(implementation.function is task_policy for implementation in implementations)


def _describe(checks: list[DatasetCheck]) -> str:
    return "; ".join(f"{check.where}: {' / '.join(check.problems)}" for check in checks)


def make_dag_policy(
    *, mode: Literal["refuse", "warn"] = "refuse", ledger_conn_id: str = DEFAULT_CONN_ID
) -> Callable[[Any], None]:
    """A ``dag_policy`` that checks each DAG's privacy plan when it is parsed.

    Parameters
    ----------
    mode : {"refuse", "warn"}, default "refuse"
        Raise ``AirflowClusterPolicyViolation`` for a DAG whose plan does not fit, or only log it.
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The Airflow Connection of the ledger holding the budgets.

    Returns
    -------
    callable
        A pluggy ``dag_policy`` hook implementation, for ``airflow_local_settings.py``.
    """
    if mode not in ("refuse", "warn"):
        raise ValueError(f"mode must be 'refuse' or 'warn', got {mode!r}")

    @hookimpl
    def dag_policy(dag: Any) -> None:
        from airflow.exceptions import AirflowClusterPolicyViolation

        from dp_pipeline.airflow.hooks import PrivacyLedgerHook
        from dp_pipeline.airflow.planning import check_dag, plan_dag

        # Airflow runs the DAG policy before the task policies, so params costs carry no guard yet
        try:
            plan = plan_dag(dag, params_enforced=task_policy_active())
        except InvalidParameterError as exc:  # a task whose cost cannot be planned (mapped over it)
            message = printable(f"DAG {dag.dag_id!r}: its privacy plan cannot be made: {exc}")
            if mode == "refuse":
                raise AirflowClusterPolicyViolation(message) from exc
            log.warning(message)
            return
        if not plan.tasks:
            return
        try:
            with PrivacyLedgerHook(ledger_conn_id).get_accountant() as accountant:
                checks = check_dag(plan, accountant)
        except Exception as exc:
            message = printable(
                f"DAG {dag.dag_id!r}: cannot check its privacy plan, the ledger {ledger_conn_id!r} is "
                f"unavailable: {redact_text(f'{type(exc).__name__}: {exc}')}"
            )
            if mode == "refuse":
                raise AirflowClusterPolicyViolation(message) from exc
            log.warning(message)
            return
        for check in checks:
            for warning in check.warnings:
                log.warning("DAG %r, dataset %r: %s", dag.dag_id, check.where, printable(warning))
            if check.ok and not check.fits_remaining:
                log.warning(
                    "DAG %r: one run of its plan on %r exceeds what remains of the budget; tasks will be "
                    "refused part-way",
                    dag.dag_id,
                    check.where,
                )
        failing = [check for check in checks if check.checked and not check.ok]
        if failing:
            message = printable(f"DAG {dag.dag_id!r} exceeds its privacy budget: {_describe(failing)}")
            if mode == "refuse":
                raise AirflowClusterPolicyViolation(message)
            log.warning(message)

    dag_policy.__name__ = "dag_policy"
    return dag_policy


dag_policy = make_dag_policy()
"""Refuse, at parse time, a DAG whose privacy plan does not fit a dataset's budget (ledger
``dp_ledger_default``)."""
