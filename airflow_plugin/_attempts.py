"""What a DP task attempt does inside a run-budgeted DAG: find the run's reservation, record that it starts,
pay its declared cost when its code cannot pay for itself (see :mod:`airflow_plugin.runs`).

Kept apart from :mod:`airflow_plugin.runs` (which plans with :mod:`airflow_plugin.planning`, which
reads the guards) so that the operators and the guards can use it without an import cycle.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_plugin._runtime import OnExhausted, attempt_label, check_map_index, refusal, task_name
from airflow_plugin.costs import DPCost
from airflow_plugin.exceptions import PrivacyCostError
from dp_pipeline.accounting.composition import group_event
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError, LedgerError, printable

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant
    from dp_pipeline.accounting.reservation import Reservation

__all__ = [
    "ATTEMPT_XCOM_KEY",
    "RUN_KEY_PREFIX",
    "SETTLED_XCOM_KEY",
    "pay_share",
    "pays_for_itself",
    "plan_form",
    "role_task",
    "run_key",
    "run_reservation",
    "start_attempt",
    "takes_dp",
]

ATTEMPT_XCOM_KEY = "dp_pipeline_attempt"
"""The XCom in which a DP task attempt of a run-budgeted DAG records its try number before its code starts."""

SETTLED_XCOM_KEY = "dp_pipeline_settled"
"""The XCom in which the teardown records that it settled the run's reservations."""


RUN_KEY_PREFIX = "run/"
"""How the keys of run reservations begin (task attempts' keys begin with their DAG id)."""


def run_key(dag_id: str, run_id: str, partition: str | None = None) -> str:
    """The idempotency key of a run's reservation on a dataset: ``run/<dag_id>/<run_id>`` for the releases
    that read the whole dataset, ``run/<dag_id>/<run_id>/<partition>`` for those on one of its partitions
    (Airflow's run ids hold no ``/``)."""
    whole = f"{RUN_KEY_PREFIX}{dag_id}/{run_id}"
    return whole if partition is None else f"{whole}/{partition}"


def role_task(dag: Any, role: str) -> Any:
    """The task of ``dag`` playing ``role`` in a run budget (``"setup"`` or ``"teardown"``), or None."""
    for task in getattr(dag, "tasks", ()):
        if getattr(task, "dp_run_budget_role", None) == role:
            return task
    return None


def _receives(python_callable: Callable[..., Any] | None) -> tuple[set[str], bool]:
    """The names a task's callable takes, and whether it takes ``**kwargs`` (which receives every name);
    nothing for a builtin without a signature, which receives nothing by name."""
    if python_callable is None:
        return set(), False
    try:
        parameters = inspect.signature(python_callable).parameters.values()
    except (TypeError, ValueError):
        return set(), False
    return {p.name for p in parameters}, any(p.kind is p.VAR_KEYWORD for p in parameters)


def takes_dp(python_callable: Callable[..., Any] | None) -> bool:
    """Whether a task's callable receives ``dp`` (by name, or through ``**kwargs``)."""
    names, keywords = _receives(python_callable)
    return "dp" in names or keywords


def pays_for_itself(python_callable: Callable[..., Any] | None) -> bool:
    """Whether a DP operator's callable pays for all it releases through ``dp``: it takes ``dp`` by name and
    cannot receive the ``mechanism`` the operator hands it (no parameter of that name, no ``**kwargs``).
    A callable that can receive both could release through the mechanism, unseen by the ledger, and pay
    its whole declared cost again through ``dp``: its declared cost is paid before it starts instead."""
    names, keywords = _receives(python_callable)
    return "dp" in names and "mechanism" not in names and not keywords


def plan_form(releases: list[tuple[PrivacyEvent, int]], group_size: int) -> list[PrivacyEvent]:
    """Releases as a reservation made with ``group_size`` declared them (see
    :func:`~dp_pipeline.accounting.composition.group_plan`): as given under one group size above 1, else
    each grouped on its own."""
    if group_size > 1:
        return [event for event, _ in releases]
    return [group_event(event, size) for event, size in releases]


def pay_share(reservation: Reservation, cost: DPCost, label: str) -> Any:
    """Pay one declared release from a run's reservation (on the cost's partition), in the form the
    reservation declared it."""
    event, size = cost.event, cost.group_size
    if reservation.group_size == 1:  # the plan declared each release grouped on its own
        (event,), size = plan_form([(event, size)], 1), 1
    return reservation.spend(
        reservation.dataset, event, group_size=size, label=label, partition=cost.partition
    )


def run_reservation(
    accountant: PrivacyAccountant, cost: DPCost, context: Mapping[str, Any], ledger_conn_id: str
) -> Reservation | None:
    """The run's reservation this attempt pays from (the one on its cost's dataset and partition), or None
    when its DAG does not reserve per run.

    Raises
    ------
    PrivacyCostError
        The attempt is outside what the run reserved: the task uses another ledger, the attempt is beyond
        ``retries + 1`` (a task cleared by hand), the run is already settled, the map index is beyond the
        task's bound, or the run holds no reservation on the dataset.
    """
    dag = context["dag"]
    setup = role_task(dag, "setup")
    if setup is None:
        return None
    ti, name = context["ti"], task_name(context)
    if ledger_conn_id != setup.ledger_conn_id:
        raise PrivacyCostError(
            f"Task {name} charges the ledger {ledger_conn_id!r}, but its run reserves on "
            f"{setup.ledger_conn_id!r}: every DP task of a run-budgeted DAG uses the run's ledger."
        )
    allowed = (getattr(context["task"], "retries", 0) or 0) + 1
    if ti.try_number > allowed:
        raise PrivacyCostError(
            f"Task {name}: attempt {ti.try_number} is beyond the {allowed} attempt(s) its run reserved (a "
            "task cleared by hand); it does not run. Trigger a new run, which reserves anew."
        )
    teardown = role_task(dag, "teardown")
    if teardown is not None and ti.xcom_pull(task_ids=teardown.task_id, key=SETTLED_XCOM_KEY, default=None):
        raise PrivacyCostError(
            f"Task {name}: its run's reservations were settled by {teardown.task_id!r}; it does not run. "
            "Trigger a new run, which reserves anew."
        )
    check_map_index(cost, context)
    where = repr(cost.dataset) + ("" if cost.partition is None else f", partition {cost.partition!r}")
    try:
        return accountant.reservation(cost.dataset, run_key(dag.dag_id, ti.run_id, cost.partition))
    except (LedgerError, InvalidParameterError) as exc:  # incl. a dataset without a budget
        raise PrivacyCostError(
            f"Task {name}: its run holds no reservation on {where} (did the setup {setup.task_id!r} "
            f"run?): {printable(str(exc))}"
        ) from exc


def start_attempt(
    run: Reservation,
    cost: DPCost,
    context: Mapping[str, Any],
    *,
    pays: bool,
    on_exhausted: OnExhausted,
) -> None:
    """Before an attempt's code starts in a run: pay its declared cost from the run's reservation when its
    code cannot pay for itself (``pays``), then record its try number for the teardown.

    Raises
    ------
    PrivacyBudgetExhausted, PrivacyBudgetSkipped
        The run's reservation cannot pay the declared cost; nothing was paid.
    """
    ti = context["ti"]
    if pays:
        label = f"{attempt_label(cost, context)} (try {ti.try_number})"
        try:
            pay_share(run, cost, label)
        except BudgetExceededError as exc:
            raise refusal(exc, task_name(context), on_exhausted) from exc
    ti.xcom_push(ATTEMPT_XCOM_KEY, ti.try_number)
