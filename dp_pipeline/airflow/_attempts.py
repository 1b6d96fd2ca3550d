"""What a DP task attempt does inside a run-budgeted DAG: find the run's reservation, claim its share of it
(its declared cost), pay the mechanism it is handed within that share, and record that it starts (see
:mod:`dp_pipeline.airflow.runs`).

Kept apart from :mod:`dp_pipeline.airflow.runs` (which plans with :mod:`dp_pipeline.airflow.planning`, which
reads the guards) so that the operators and the guards can use it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting.composition import group_event
from dp_pipeline.airflow._runtime import (
    OnExhausted,
    attempt_key,
    attempt_label,
    check_map_index,
    refusal,
    task_name,
)
from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.airflow.exceptions import AttemptAlreadyChargedError, PrivacyCostError
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    printable,
)
from dp_pipeline.mechanisms import Mechanism

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant
    from dp_pipeline.accounting.reservation import AttemptShare, Reservation

__all__ = [
    "ATTEMPT_XCOM_KEY",
    "RUN_KEY_PREFIX",
    "SETTLED_XCOM_KEY",
    "handed_mechanism",
    "pay_share",
    "plan_form",
    "role_task",
    "run_key",
    "run_reservation",
    "start_attempt",
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


def handed_mechanism(cost: DPCost, calibrated: Mechanism | None) -> Mechanism | None:
    """The mechanism an attempt is handed, as its declaration says: the one its run's share calibrated, else
    the declared cost when it is a :class:`~dp_pipeline.mechanisms.Mechanism`; None when the declaration
    is an event or a guarantee (nothing that can draw noise is handed: the task's code pays through
    ``dp``). Never read from the callable's parameters."""
    if calibrated is not None:
        return calibrated
    return cost.cost if isinstance(cost.cost, Mechanism) else None


def plan_form(releases: list[tuple[PrivacyEvent, int]], group_size: int) -> list[PrivacyEvent]:
    """Releases as a reservation made with ``group_size`` declared them (see
    :func:`~dp_pipeline.accounting.composition.group_plan`): as given under one group size above 1, else
    each grouped on its own."""
    if group_size > 1:
        return [event for event, _ in releases]
    return [group_event(event, size) for event, size in releases]


def pay_share(reservation: Reservation, cost: DPCost, label: str) -> Any:
    """Pay one declared release from a reservation (on the cost's partition), in the form the
    reservation declared it."""
    event, size = _declared_form(reservation, cost)
    return reservation.spend(
        reservation.dataset, event, group_size=size, label=label, partition=cost.partition
    )


def _declared_form(reservation: Reservation, cost: DPCost) -> tuple[Any, int]:
    """A declared release in the form a reservation declared it: grouped on its own when the plan declared
    each release so (group size 1), else as declared."""
    if reservation.group_size == 1:
        (event,) = plan_form([(cost.event, cost.group_size)], 1)
        return event, 1
    return cost.event, cost.group_size


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
    hands_mechanism: bool,
    on_exhausted: OnExhausted,
) -> AttemptShare:
    """Before an attempt's code starts in a run: claim its share of the run's reservation (its declared
    cost, keyed by the attempt), pay the mechanism it is handed within that share, and record its try
    number for the teardown. Returns the share, which pays the code's releases (``dp``).

    What is paid here follows from the declaration alone: the declared cost always (the share), and the
    handed mechanism when the declaration hands one. A handed mechanism is one-shot, so its one draw is
    the release paid for; ``dp`` pays only what the share holds beyond it.

    Raises
    ------
    PrivacyBudgetExhausted, PrivacyBudgetSkipped
        The run's reservation cannot pay the declared cost; nothing was paid.
    AttemptAlreadyChargedError
        The attempt's share was already claimed (a second delivery of the attempt); nothing was paid.
    """
    ti = context["ti"]
    label = f"{attempt_label(cost, context)} (try {ti.try_number})"
    event, size = _declared_form(run, cost)
    try:
        share = run.claim(attempt_key(context), event, group_size=size, label=label, partition=cost.partition)
    except BudgetExceededError as exc:
        raise refusal(exc, task_name(context), on_exhausted) from exc
    except KeyAlreadyUsedError as exc:
        raise AttemptAlreadyChargedError.from_error(exc, task=task_name(context)) from exc
    if hands_mechanism:
        pay_share(share, cost, f"{label}: the mechanism handed to the task")
    ti.xcom_push(ATTEMPT_XCOM_KEY, ti.try_number)
    return share
