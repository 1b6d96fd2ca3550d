"""A ``pre_execute`` guard that puts any operator under a privacy budget.

``pre_execute`` is one of the few places that can stop an Airflow 3 task before it runs (``execute``,
``pre_execute`` and the ``pre_execute=`` argument; ``on_execute_callback`` and listeners cannot: Airflow logs
and swallows their exceptions). The guard reserves the task's cost and refuses the task when it does not fit.

Retry policy for guarded operators: Airflow offers no reliable point between ``pre_execute`` and the
operator's ``execute``, so the guard commits its reservation as soon as it holds it. Every attempt that
passes the guard is charged (the operator is about to read data, and a retry redraws noise); an attempt
refused by the guard is charged nothing. Keys are ``dag_id/task_id/run_id/map_index/try_number``.

Resumed attempts: Airflow runs ``pre_execute`` again, with the same try number, when a deferrable
operator resumes after its trigger fires and when a sensor in ``mode="reschedule"`` pokes again. Such a
run (``next_method`` set in its run context, or ``task_reschedule_count > 0``; see
:func:`dp_pipeline.airflow.attempt.resumption`) continues under the attempt's *committed* reservation and is
charged nothing more: one attempt, one charge. Any other run that finds the key already used (a second
delivery of a first run, while it runs or after it ran) is refused with
:class:`~dp_pipeline.airflow.exceptions.AttemptAlreadyChargedError` and runs nothing. Airflow's Execution API
starts a task instance only from the queued state, so it does not deliver one resumption twice.

The guarded task's code pays from the attempt's reservation: the guard puts it in the context as ``dp``, so
that a Python callable that declares ``dp`` (a ``PythonOperator``, an ``@task``) receives it and passes it
as ``accountant=dp`` (see :mod:`dp_pipeline.airflow.operators`). The guard hands the code no accountant of
the ledger.

What is paid before the task's code runs follows from the declaration, never from the callable's
parameters: outside a run, the declared cost (reserved and committed); when the declared cost is a
:class:`~dp_pipeline.mechanisms.Mechanism`, that mechanism is handed to the code as ``mechanism``, one-shot
(:meth:`~dp_pipeline.mechanisms.Mechanism.one_shot`: a charge covers one draw), and its draw is paid from
the reservation at once, so ``dp`` pays only beyond it. Declare an event or a guarantee
(``Laplace(...).event``, ``PureDP(0.5)``) for code that pays its releases through ``dp``.

In a DAG that reserves per run (:func:`dp_pipeline.airflow.runs.run_budget`) the guard reserves nothing: the
attempt claims its share of the run's reservation (its declared cost, see
:meth:`~dp_pipeline.accounting._reservation.Reservation.claim`) when it starts, the handed mechanism's draw is
paid within that share, and ``dp`` is the share: the code's releases are capped at the attempt's declared
cost, never paid from another task's share. There the guard's cost may leave the noise free (a
:class:`~dp_pipeline.PlannedRelease`, calibrated by the run's budget share, see
:mod:`dp_pipeline.airflow.allocating`): the calibrated mechanism is the one handed.

Examples
--------
>>> BashOperator(task_id="export", bash_command="./export.sh",               # doctest: +SKIP
...              pre_execute=dp_guard("patients", Laplace(epsilon=0.5, sensitivity=1.0)))
>>> attach_guard(existing_operator, dp_guard("patients", PureDP(0.2)))       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dp_pipeline.airflow.attempt import Attempt
from dp_pipeline.airflow.costs import CostLike, as_cost
from dp_pipeline.airflow.declared import (
    DEFAULT_CONN_ID,
    DeclaredGuard,
    GuardChain,
    OnExhausted,
    iter_guards,
    operator_cost,
    pre_execute_hook,
)
from dp_pipeline.airflow.exceptions import PrivacyCostError
from dp_pipeline.airflow.hooks import PrivacyLedgerHook
from dp_pipeline.airflow.keys import task_name
from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["GuardChain", "PrivacyBudgetGuard", "attach_guard", "dp_guard", "iter_guards"]


class PrivacyBudgetGuard(DeclaredGuard):
    """A ``pre_execute`` callable that reserves and commits a declared cost, or refuses the task.

    Parameters
    ----------
    cost : DPCost
        The task's declared cost.
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The Airflow Connection of the ledger.
    on_exhausted : {"fail", "skip"}, default "fail"
        Fail without retry, or skip, when the cost does not fit.
    """

    def __call__(self, context: Mapping[str, Any]) -> None:
        """Reserve the attempt's cost and commit it; raise the refusal when it does not fit.

        A run that resumes the attempt (after a deferral or a reschedule) continues under the attempt's
        committed reservation; any other second run of the attempt is refused.
        """
        if operator_cost(context.get("task")) is not None:
            raise PrivacyCostError(
                f"Task {task_name(context)} declares its own cost and also carries a privacy guard; "
                "remove one of them so that the attempt is charged exactly once."
            )
        attempt = Attempt.open(
            PrivacyLedgerHook(self.ledger_conn_id).get_accountant(),
            self.cost,
            context,
            ledger_conn_id=self.ledger_conn_id,
            on_exhausted=self.on_exhausted,
            resumable=True,
        )
        try:  # no point between pre_execute and the operator's execute: the attempt starts here
            dp = attempt.start()
        finally:
            attempt.finish()  # committed at once (fail closed: a started attempt stays charged)
        context["dp"] = dp  # type: ignore[index]
        handed = attempt.mechanism()
        if handed is not None:
            context["mechanism"] = handed  # type: ignore[index]


def dp_guard(
    dataset: str,
    mechanism: CostLike,
    *,
    group_size: int = 1,
    label: str | None = None,
    max_map_length: int | None = None,
    ledger_conn_id: str = DEFAULT_CONN_ID,
    on_exhausted: OnExhausted = "fail",
) -> PrivacyBudgetGuard:
    """A guard to pass as ``pre_execute=`` to any operator (or ``@task(pre_execute=...)``).

    Parameters
    ----------
    dataset : str
        The ledger dataset the cost is charged to; may be a Jinja template, rendered with the task's
        context when the guard runs (see :mod:`dp_pipeline.airflow.templating`).
    mechanism : Mechanism, PrivacyEvent, Guarantee or PlannedRelease
        What one run of the task releases. A PlannedRelease leaves the noise free for the run's budget
        share to calibrate (only in a DAG with ``run_budget(dag, share=...)``).
    group_size : int, default 1
        Records one individual may contribute.
    label : str, optional
        The ledger history label (default ``dag_id.task_id``).
    max_map_length : int, optional
        On a mapped operator: the most map indexes one run charges (see
        :class:`~dp_pipeline.airflow.costs.DPCost`).
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The Airflow Connection of the ledger.
    on_exhausted : {"fail", "skip"}, default "fail"
        Fail without retry, or skip, when the cost does not fit.

    Returns
    -------
    PrivacyBudgetGuard
    """
    return PrivacyBudgetGuard(
        as_cost(dataset, mechanism, group_size, label, max_map_length),
        ledger_conn_id=ledger_conn_id,
        on_exhausted=on_exhausted,
    )


def attach_guard(task: Any, guard: PrivacyBudgetGuard) -> Any:
    """Put an existing operator (plain or mapped) under a privacy guard, before its own ``pre_execute``.

    Parameters
    ----------
    task : BaseOperator or MappedOperator
        The task to guard.
    guard : PrivacyBudgetGuard
        From :func:`dp_guard`.

    Returns
    -------
    task
        The same task, for chaining.

    Raises
    ------
    InvalidParameterError
        If the task already declares a cost (its own or another guard's): one attempt is charged once.
    """
    if not isinstance(guard, PrivacyBudgetGuard):
        raise InvalidParameterError(f"attach_guard needs a PrivacyBudgetGuard, got {guard!r}", "guard")
    if operator_cost(task) is not None or next(iter_guards(task), None) is not None:
        raise InvalidParameterError(
            f"task {task.task_id!r} already declares a privacy cost; a task is charged for one cost", "task"
        )
    chained = GuardChain(guard, pre_execute_hook(task))
    partial_kwargs = getattr(task, "partial_kwargs", None)
    if isinstance(partial_kwargs, dict):
        partial_kwargs["pre_execute"] = chained
    else:
        task._pre_execute_hook = chained
    return task
