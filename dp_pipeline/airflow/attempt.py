"""One DP task attempt, from its reservation to its end: what it pays before its code runs, what its code
pays from (``dp``), and whether it stays charged.

:class:`Attempt` is the one object the operator and the guard build for an attempt:

1. :meth:`Attempt.open` renders and locates the declared cost (``"visits/{{ ds }}"`` is split here, once,
   into dataset and partition), calibrates a free cost from the run's share, then either finds the run's
   reservation (a run-budgeted DAG, see :mod:`dp_pipeline.airflow.runs`) or reserves the attempt's own,
   keyed by :func:`~dp_pipeline.airflow.keys.attempt_key`. A refusal charges nothing.
2. :meth:`Attempt.start`, just before the code runs, pays what the declaration says is paid up front: in a
   run, the attempt's share of the run's reservation (its declared cost); and the handed mechanism's one
   draw, when the declaration is a :class:`~dp_pipeline.mechanisms.Mechanism` (``dp`` then pays only beyond
   it). It returns the spender the code pays from (``dp``). The callable's parameter names decide nothing.
3. :meth:`Attempt.finish` ends the attempt's own reservation: committed once the code started (whether it
   returned or raised: it may have read data, and a retry redraws noise), released with the reason when the
   attempt failed before its code ran. A run's reservation is settled by the run's teardown instead.

The code gets no writable accountant of the dataset from the attempt: the operator hands it a read-only one
(:meth:`~dp_pipeline.airflow.operators.PrivacyBudgetOperator.get_reader`), so every release it makes
through what it is given is paid from ``dp``, and the task cannot charge the dataset a second time by that
route.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting import group_event
from dp_pipeline.airflow.allocating import calibrated_cost
from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.airflow.declared import OnExhausted, airflow_max_map_length, operator_cost
from dp_pipeline.airflow.exceptions import (
    AttemptAlreadyChargedError,
    PrivacyBudgetExhausted,
    PrivacyBudgetSkipped,
    PrivacyCostError,
)
from dp_pipeline.airflow.keys import (
    ATTEMPT_XCOM_KEY,
    SETTLED_XCOM_KEY,
    attempt_key,
    role_task,
    run_key,
    task_name,
)
from dp_pipeline.airflow.partition_names import locate_partition
from dp_pipeline.airflow.templating import render_dataset
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    UnsupportedCompositionError,
    printable,
)
from dp_pipeline.mechanisms import Mechanism, OneShot

if TYPE_CHECKING:
    from dp_pipeline.accounting import AttemptShare, PrivacyAccountant, Reservation

__all__ = [
    "Attempt",
    "attempt_label",
    "charged_cost",
    "check_map_index",
    "check_mapped_cost",
    "handed_mechanism",
    "pay_share",
    "plan_form",
    "refusal",
    "reserve_or_refuse",
    "resumption",
    "run_reservation",
    "start_attempt",
]

log = logging.getLogger(__name__)


@dataclass
class Attempt:
    """One DP task attempt: the cost it is charged, the reservation it pays from, what it is handed.

    Build it with :meth:`open`; call :meth:`start` just before the task's code runs and :meth:`finish`
    when the attempt ends (see the module docstring for the retry policy this gives).

    Attributes
    ----------
    cost : DPCost
        The cost as this attempt is charged: its dataset rendered and located (dataset and partition),
        a free cost calibrated by the run's share.
    context : mapping
        The Airflow task context.
    reservation : Reservation
        The attempt's own reservation, or the run's (``in_run``).
    in_run : bool
        Whether the DAG reserves per run: the attempt then claims a share of ``reservation`` when it starts.
    handed : Mechanism or None
        The mechanism the declaration hands the code (its draw is paid at :meth:`start`), else None.
    on_exhausted : {"fail", "skip"}
        How a refusal ends the task.
    resumed : bool
        The attempt resumes (after a deferral or a reschedule) one that already paid: nothing more is paid.
    started : bool
        Whether :meth:`start` ran (the code may have read data).
    """

    cost: DPCost
    context: Mapping[str, Any]
    reservation: Reservation
    in_run: bool
    handed: Mechanism | None
    on_exhausted: OnExhausted
    resumed: bool = False
    started: bool = False

    @classmethod
    def open(
        cls,
        accountant: PrivacyAccountant,
        declared: DPCost,
        context: Mapping[str, Any],
        *,
        ledger_conn_id: str,
        on_exhausted: OnExhausted,
        rendered: str | None = None,
        resumable: bool = False,
    ) -> Attempt:
        """Charge the attempt's cost before anything reads data: find the run's reservation, or reserve the
        attempt's own.

        Parameters
        ----------
        accountant : PrivacyAccountant
            The ledger's (writable) accountant.
        declared : DPCost
            The task's declared cost (its dataset may be a template).
        context : mapping
            The Airflow task context.
        ledger_conn_id : str
            The task's ledger connection (a run-budgeted DAG's tasks must use the run's).
        on_exhausted : {"fail", "skip"}
            How a refusal ends the task.
        rendered : str, optional
            The dataset name Airflow already rendered (an operator's template field).
        resumable : bool, default False
            A guard: an attempt that resumes (:func:`resumption`) continues under what it already paid.

        Raises
        ------
        PrivacyBudgetExhausted, PrivacyBudgetSkipped, AttemptAlreadyChargedError, PrivacyCostError
            See :func:`reserve_or_refuse` and :func:`run_reservation`; nothing was charged.
        """
        cost, calibrated = calibrated_cost(charged_cost(accountant, declared, context, rendered), context)
        handed = handed_mechanism(cost, calibrated)
        resumed = resumable and resumption(context) is not None
        run = run_reservation(accountant, cost, context, ledger_conn_id)
        if run is not None:
            return cls(cost, context, run, True, handed, on_exhausted, resumed=resumed)
        try:
            own = reserve_or_refuse(accountant, cost, context, on_exhausted=on_exhausted)
        except AttemptAlreadyChargedError as refused:
            if refused.status != "committed" or not resumed:
                raise
            log.info(
                "%s %s: it continues under its committed reservation (key %s), charged once",
                task_name(context),
                resumption(context),
                attempt_key(context),
            )
            own = accountant.reservation(cost.dataset, attempt_key(context))
            return cls(cost, context, own, False, handed, on_exhausted, resumed=True)
        return cls(cost, context, own, False, handed, on_exhausted)

    @property
    def spender(self) -> Reservation:
        """What the code pays from (``dp``): the attempt's share of the run's reservation, else its own."""
        return self.reservation.share(attempt_key(self.context)) if self.in_run else self.reservation

    def mechanism(self) -> OneShot | None:
        """The handed mechanism as the code receives it: one-shot (a charge covers one draw), or None."""
        return None if self.handed is None else self.handed.one_shot()

    def start(self) -> Reservation:
        """Pay what the declaration says is paid before the code runs, mark the attempt started and return
        the spender (``dp``).

        In a run: claim the attempt's share of the run's reservation (:func:`start_attempt`), paying the
        handed mechanism within it. On the attempt's own reservation: pay the handed mechanism's draw from
        it. A resumed attempt pays nothing more.

        Raises
        ------
        PrivacyBudgetExhausted, PrivacyBudgetSkipped, AttemptAlreadyChargedError
            The run's reservation cannot pay the share, or the share was already claimed; nothing was paid.
        """
        spender = self.spender
        if not self.resumed:
            if self.in_run:
                spender = start_attempt(
                    self.reservation,
                    self.cost,
                    self.context,
                    hands_mechanism=self.handed is not None,
                    on_exhausted=self.on_exhausted,
                )
            elif self.handed is not None:  # dp pays only beyond the mechanism's one draw
                label = f"{attempt_label(self.cost, self.context)}: the mechanism handed to the task"
                pay_share(spender, self.cost, label)
        self.started = True
        return spender

    def finish(self, error: BaseException | None = None) -> None:
        """End the attempt's own reservation: commit it when the attempt succeeded or its code started,
        release it (with the reason) when it failed before its code ran. Nothing for a run's reservation,
        which the run's teardown settles. A failure to commit or release is logged: the reservation stays
        open, and the ledger keeps counting it (fail closed)."""
        if self.in_run:
            return
        name = task_name(self.context)
        if error is None or self.started:
            try:
                self.reservation.commit()
            except Exception:
                if error is None:
                    raise
                log.exception("could not commit the reservation of %s; it stays open and counted", name)
                return
            if error is not None:
                log.warning(
                    "%s failed after its code started (%s); the attempt stays charged, since it may have "
                    "read data and a retry redraws noise",
                    name,
                    type(error).__name__,
                )
            return
        reason = f"attempt failed before its callable ran: {type(error).__name__}: {error}"
        try:
            self.reservation.cancel(reason=reason[:500])
        except Exception:
            log.exception("could not release the reservation of %s; the ledger keeps counting it", name)
            return
        log.warning("%s failed before its callable ran; its reservation was released", name)


def attempt_label(cost: DPCost, context: Mapping[str, Any]) -> str:
    """The history label: the declared label, or ``dag_id.task_id`` with ``[map_index]`` when mapped."""
    return cost.label or task_name(context)


def resumption(context: Mapping[str, Any]) -> str | None:
    """How this run resumes an attempt that already ran its ``pre_execute``, or None for a first run.

    Airflow 3 runs ``pre_execute`` again, with the same try number, when an attempt comes back:

    - from a deferral: the run context carries the ``next_method`` the trigger resumes;
    - from a reschedule (a sensor in ``mode="reschedule"``, or ``AirflowRescheduleException``): the
      context's ``task_reschedule_count`` counts this try's reschedules (Airflow deletes them when a new
      try starts, so a retry counts from zero again).

    A first run has neither, so a second delivery of it is not a resumption.
    """
    ti = context["ti"]
    # the Task SDK keeps the server's run context (with next_method) on the runtime task instance only
    server = getattr(ti, "_ti_context_from_server", None)
    next_method = getattr(server, "next_method", None)
    if next_method:
        return f"resumes from a deferral into {next_method}()"
    reschedules = context.get("task_reschedule_count") or 0
    if reschedules > 0:
        return f"resumes after reschedule {reschedules}"
    return None


def charged_cost(
    accountant: PrivacyAccountant, cost: DPCost, context: Mapping[str, Any], rendered: Any = None
) -> DPCost:
    """The declared cost on the dataset (and partition) this run charges: the declared name rendered in the
    run's context, then located on the ledger.

    A rendered name that is itself a dataset is charged whole; ``"visits/2026-11-24"`` charges partition
    ``"2026-11-24"`` of ``visits`` when ``visits`` is partitioned (see
    :func:`~dp_pipeline.airflow.partition_names.locate_partition`).

    Parameters
    ----------
    accountant : PrivacyAccountant
        The ledger's accountant (read for a name with a ``/``).
    cost : DPCost
        The declared cost (its dataset may be a template).
    context : mapping
        The Airflow task context.
    rendered : str, optional
        The name Airflow already rendered (an operator's ``dataset`` template field); rendered here with the
        task's Jinja environment when not given (a guard).

    Raises
    ------
    PrivacyCostError
        The name does not render to a valid dataset name, or it names a partition of a dataset whose budget
        is not partitioned (never charged as a dataset of its own); nothing is charged.
    """
    try:
        name = render_dataset(context["task"], cost.dataset, context) if rendered is None else rendered
        dataset, partition = locate_partition(name, accountant)
        if (dataset, partition) == (cost.dataset, cost.partition):
            return cost
        return dataclasses.replace(cost, dataset=dataset, partition=partition)
    except InvalidParameterError as exc:
        raise PrivacyCostError(
            f"Task {task_name(context)}: its dataset {cost.dataset!r} cannot be charged: {exc}"
        ) from exc


def check_map_index(cost: DPCost, context: Mapping[str, Any]) -> None:
    """Refuse a map index beyond the task's map bound, before anything is reserved.

    The bound is the declared ``max_map_length``, else Airflow's ``[core] max_map_length``: the DAG check
    counts a mapped task that many times, so no run may charge more map indexes than it counted.

    Raises
    ------
    PrivacyCostError
        The map index is at or beyond the bound.
    """
    index = context["ti"].map_index
    if index is None or index < 0:
        return
    bound = cost.max_map_length or airflow_max_map_length()
    if index >= bound:
        where = "its declared max_map_length" if cost.max_map_length else "Airflow's [core] max_map_length"
        raise PrivacyCostError(
            f"Task {task_name(context)}: map index {index} is beyond {where} ({bound}), the number of map "
            "indexes the DAG's privacy plan counts; it is refused before it reads data. Raise the bound "
            "(and check the plan again) to map over more values."
        )


def check_mapped_cost(cost: DPCost, context: Mapping[str, Any]) -> None:
    """Refuse a map index whose own cost is not the cost its mapped task declares, before anything is
    reserved.

    The DAG check reads a mapped DP operator's cost from its ``.partial()`` arguments. A mapping known only at
    run time (``expand_kwargs`` over an upstream result) could still set ``group_size`` or, with
    ``strict=False``, override ``dataset``, ``mechanism`` or ``max_map_length``: that map index would cost
    what no plan counted. ``cost`` is the operator's declared cost before its dataset is rendered.

    Raises
    ------
    PrivacyCostError
        The map index's dataset, cost, group size or map bound differs from its ``.partial()`` arguments,
        or these do not declare a cost a plan can count.
    """
    ti = context["ti"]
    if ti.map_index is None or ti.map_index < 0:
        return
    task = getattr(context.get("dag"), "task_dict", {}).get(ti.task_id)
    if task is None or not hasattr(task, "partial_kwargs"):  # in a mapped task group: one definition
        return
    name = task_name(context)
    try:
        declared = operator_cost(task)
    except InvalidParameterError as exc:
        raise PrivacyCostError(f"Task {name}: {exc}; it is refused before it reads data.") from exc
    own = (cost.dataset, cost.cost, cost.group_size, cost.max_map_length)
    if declared is None or own != (
        declared.dataset,
        declared.cost,
        declared.group_size,
        declared.max_map_length,
    ):
        planned = "no cost" if declared is None else declared.describe()
        raise PrivacyCostError(
            f"Task {name} costs {cost.describe()}, but its .partial() arguments declare {planned}, the cost "
            "the DAG's privacy plan counts for each map index: an upstream result mapped over dataset, "
            "mechanism, group_size or max_map_length. It is refused before it reads data; give them in "
            ".partial() and map over the callable's arguments only."
        )


def reserve_or_refuse(
    accountant: PrivacyAccountant,
    cost: DPCost,
    context: Mapping[str, Any],
    *,
    on_exhausted: OnExhausted = "fail",
) -> Any:
    """Atomically reserve the attempt's cost, or refuse the task.

    Parameters
    ----------
    accountant : PrivacyAccountant
        The ledger's accountant.
    cost : DPCost
        The task's declared cost.
    context : mapping
        The Airflow task context (``ti`` gives the key).
    on_exhausted : {"fail", "skip"}
        Whether a refusal fails the task (no retry) or skips it.

    Returns
    -------
    Reservation
        The open reservation; the caller commits or releases it.

    Raises
    ------
    PrivacyBudgetExhausted, PrivacyBudgetSkipped
        The cost does not fit; nothing was charged.
    AttemptAlreadyChargedError
        This attempt's key already has a reservation (open: another delivery of the attempt is running
        or died; committed or released: the attempt already ran). Its ``status`` names the state.
    PrivacyCostError
        The cost cannot be charged to this dataset at all (no budget, wrong currency), or the map index is
        beyond the task's map bound (:func:`check_map_index`).
    """
    check_map_index(cost, context)
    key = attempt_key(context)
    name = task_name(context)
    try:
        reservation = accountant.reserve(
            cost.dataset,
            cost.cost,
            key=key,
            group_size=cost.group_size,
            label=attempt_label(cost, context),
            partition=cost.partition,
        )
    except BudgetExceededError as exc:
        raise refusal(exc, name, on_exhausted) from exc
    except KeyAlreadyUsedError as exc:
        raise AttemptAlreadyChargedError.from_error(exc, task=name) from exc
    except (UnsupportedCompositionError, InvalidParameterError) as exc:  # incl. a dataset without budget
        raise PrivacyCostError(
            f"Task {name}: its cost {cost.describe()} cannot be charged: {str(exc).rstrip('.')}. Retrying "
            "cannot help; give the dataset a budget on the ledger ('dp-pipeline budget set') or fix the "
            "declared cost."
        ) from exc
    log.info("reserved %s for %s (key %s)", cost.describe(), printable(name), printable(key))
    return reservation


def refusal(
    error: BudgetExceededError, task: str, on_exhausted: OnExhausted
) -> PrivacyBudgetExhausted | PrivacyBudgetSkipped:
    """The task's refusal for the accountant's ``error`` (logged): fail without retry, or skip."""
    kind = PrivacyBudgetSkipped if on_exhausted == "skip" else PrivacyBudgetExhausted
    refused: PrivacyBudgetExhausted | PrivacyBudgetSkipped = kind.from_error(error, task=task)
    log.error("privacy budget refused %s: %s", printable(task), printable(refused))
    return refused


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
    :func:`~dp_pipeline.accounting.group_plan`): as given under one group size above 1, else
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
