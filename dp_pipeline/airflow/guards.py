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
:func:`dp_pipeline.airflow._runtime.resumption`) continues under the attempt's *committed* reservation and is
charged nothing more: one attempt, one charge. Any other run that finds the key already used (a second
delivery of a first run, while it runs or after it ran) is refused with
:class:`~dp_pipeline.airflow.exceptions.AttemptAlreadyChargedError` and runs nothing. Airflow's Execution API
starts a task instance only from the queued state, so it does not deliver one resumption twice.

The guarded task's code pays from the attempt's reservation: the guard puts it in the context as ``dp``, so
that a Python callable that declares ``dp`` (a ``PythonOperator``, an ``@task``) receives it, and runs that
callable inside :func:`~dp_pipeline.accounting.scope.paying_from` (see :mod:`dp_pipeline.airflow.operators`).

What is paid before the task's code runs follows from the declaration, never from the callable's
parameters: outside a run, the declared cost (reserved and committed); when the declared cost is a
:class:`~dp_pipeline.mechanisms.Mechanism`, that mechanism is handed to the code as ``mechanism``, one-shot
(:meth:`~dp_pipeline.mechanisms.Mechanism.one_shot`: a charge covers one draw), and its draw is paid from
the reservation at once, so ``dp`` pays only beyond it. Declare an event or a guarantee
(``Laplace(...).event``, ``PureDP(0.5)``) for code that pays its releases through ``dp``.

In a DAG that reserves per run (:func:`dp_pipeline.airflow.runs.run_budget`) the guard reserves nothing: the
attempt claims its share of the run's reservation (its declared cost, see
:meth:`~dp_pipeline.accounting.reservation.Reservation.claim`) when it starts, the handed mechanism's draw is
paid within that share, and ``dp`` is the share: the code's releases are capped at the attempt's declared
cost, never paid from another task's share. There the guard's cost may leave the noise free (a
:class:`~dp_pipeline.allocation.PlannedRelease`, calibrated by the run's budget share, see
:mod:`dp_pipeline.airflow.allocating`): the calibrated mechanism is the one handed.

Examples
--------
>>> BashOperator(task_id="export", bash_command="./export.sh",               # doctest: +SKIP
...              pre_execute=dp_guard("patients", Laplace(epsilon=0.5, sensitivity=1.0)))
>>> attach_guard(existing_operator, dp_guard("patients", PureDP(0.2)))       # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting.scope import paying_from
from dp_pipeline.airflow._attempts import handed_mechanism, pay_share, run_reservation, start_attempt
from dp_pipeline.airflow._runtime import (
    OnExhausted,
    attempt_key,
    attempt_label,
    charged_cost,
    check_on_exhausted,
    reserve_or_refuse,
    resumption,
    task_name,
)
from dp_pipeline.airflow.allocating import calibrated_cost
from dp_pipeline.airflow.costs import CostLike, DPCost, as_cost
from dp_pipeline.airflow.declared import DEFAULT_CONN_ID, operator_cost
from dp_pipeline.airflow.exceptions import AttemptAlreadyChargedError, PrivacyCostError
from dp_pipeline.airflow.hooks import PrivacyLedgerHook
from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["GuardChain", "PrivacyBudgetGuard", "attach_guard", "dp_guard", "iter_guards"]

log = logging.getLogger(__name__)

PreExecuteHook = Callable[[Any], Any]

if TYPE_CHECKING:
    from dp_pipeline.accounting.reservation import Reservation
    from dp_pipeline.mechanisms import Mechanism


class PrivacyBudgetGuard:
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

    def __init__(
        self, cost: DPCost, *, ledger_conn_id: str = DEFAULT_CONN_ID, on_exhausted: OnExhausted = "fail"
    ) -> None:
        if not isinstance(cost, DPCost):
            raise InvalidParameterError(f"a guard needs a DPCost, got {type(cost).__name__}", "cost")
        self.cost = cost
        self.ledger_conn_id = ledger_conn_id
        self.on_exhausted = check_on_exhausted(on_exhausted)

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
        accountant = PrivacyLedgerHook(self.ledger_conn_id).get_accountant()
        cost, calibrated = calibrated_cost(charged_cost(accountant, self.cost, context), context)
        task = context["task"]
        handed = handed_mechanism(cost, calibrated)
        run = run_reservation(accountant, cost, context, self.ledger_conn_id)
        if run is not None:
            if resumption(context) is None:
                spender = start_attempt(
                    run, cost, context, hands_mechanism=handed is not None, on_exhausted=self.on_exhausted
                )
            else:  # a resumed attempt continues within the share it claimed
                spender = run.share(attempt_key(context))
            _hand_over(task, spender, handed, context)
            return
        resumed = False
        try:
            reservation = reserve_or_refuse(accountant, cost, context, on_exhausted=self.on_exhausted)
        except AttemptAlreadyChargedError as refused:
            resumed_by = resumption(context)
            if refused.status != "committed" or resumed_by is None:
                raise
            log.info(
                "%s %s: it continues under its committed reservation (key %s), charged once",
                task_name(context),
                resumed_by,
                attempt_key(context),
            )
            reservation, resumed = accountant.reservation(cost.dataset, attempt_key(context)), True
        reservation.commit()
        if handed is not None and not resumed:  # dp pays only beyond the mechanism's one draw
            pay_share(reservation, cost, f"{attempt_label(cost, context)}: the mechanism handed to the task")
        _hand_over(task, reservation, handed, context)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrivacyBudgetGuard):
            return NotImplemented
        return (self.cost, self.ledger_conn_id, self.on_exhausted) == (
            other.cost,
            other.ledger_conn_id,
            other.on_exhausted,
        )

    def __hash__(self) -> int:
        return hash((self.cost.dataset, self.ledger_conn_id, self.on_exhausted))

    def __repr__(self) -> str:
        return f"PrivacyBudgetGuard({self.cost.describe()}, ledger_conn_id={self.ledger_conn_id!r})"


class _PayingCall:
    """A task's ``execute_callable`` run inside :func:`paying_from` (set on the task for one attempt)."""

    def __init__(self, task: Any, spender: Reservation) -> None:
        self.task = task
        self.spender = spender

    def __call__(self) -> Any:
        try:
            with paying_from(self.spender):
                return type(self.task).execute_callable(self.task)
        finally:
            vars(self.task).pop("execute_callable", None)


class _PayingAsyncCall(_PayingCall):
    """A task's ``aexecute_callable`` (an async callable) run inside :func:`paying_from`."""

    async def __call__(self) -> Any:
        try:
            with paying_from(self.spender):
                return await type(self.task).aexecute_callable(self.task)
        finally:
            vars(self.task).pop("aexecute_callable", None)


def _hand_over(
    task: Any, spender: Reservation, handed: Mechanism | None, context: Mapping[str, Any]
) -> None:
    """Give the guarded task's code the spender and the mechanism its declaration hands: as ``dp`` and
    ``mechanism`` (one-shot, its draw paid) in its context (a Python callable that declares them, or
    ``**context``, receives them) and, for an operator that runs a Python callable (plain or async), the
    spender as the scope of that call."""
    context["dp"] = spender  # type: ignore[index]
    if handed is not None:
        context["mechanism"] = handed.one_shot()  # type: ignore[index]
    if getattr(task, "is_async", False) is True and callable(getattr(type(task), "aexecute_callable", None)):
        object.__setattr__(task, "aexecute_callable", _PayingAsyncCall(task, spender))
    elif callable(getattr(type(task), "execute_callable", None)):
        object.__setattr__(task, "execute_callable", _PayingCall(task, spender))


class GuardChain:
    """Run a privacy guard, then the ``pre_execute`` hook the task already had."""

    def __init__(self, guard: PrivacyBudgetGuard, then: PreExecuteHook | None) -> None:
        self.guard = guard
        self.then = then

    def __call__(self, context: Mapping[str, Any]) -> None:
        """The guard first: a refused task runs none of its own hooks."""
        self.guard(context)
        if self.then is not None:
            self.then(context)

    def __repr__(self) -> str:
        return f"GuardChain({self.guard!r}, then={self.then!r})"


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


def _current_hook(task: Any) -> PreExecuteHook | None:
    partial_kwargs = getattr(task, "partial_kwargs", None)
    if isinstance(partial_kwargs, dict):  # a mapped operator: its hooks live in the partial kwargs
        return partial_kwargs.get("pre_execute")
    return getattr(task, "_pre_execute_hook", None)


def iter_guards(task: Any) -> Iterator[PrivacyBudgetGuard]:
    """The privacy guards on a task (plain or mapped), in the order they run."""
    hook = _current_hook(task)
    while hook is not None:
        if isinstance(hook, PrivacyBudgetGuard):
            yield hook
            return
        if isinstance(hook, GuardChain):
            yield hook.guard
            hook = hook.then
            continue
        return


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
    chained = GuardChain(guard, _current_hook(task))
    partial_kwargs = getattr(task, "partial_kwargs", None)
    if isinstance(partial_kwargs, dict):
        partial_kwargs["pre_execute"] = chained
    else:
        task._pre_execute_hook = chained
    return task
