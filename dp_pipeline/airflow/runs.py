"""Run-level reservation: a DAG run reserves the privacy plan of all its DP tasks before any task reads data.

Opt in per DAG with :func:`run_budget`::

    with DAG("weekly_report", schedule="@weekly", ...) as dag:
        ...                                   # DP tasks: PrivacyBudgetOperator, @dp_task, dp_guard
    run_budget(dag)                           # adds the setup and teardown tasks

The **setup task** (:class:`RunBudgetSetupOperator`, an Airflow 3 setup task upstream of every other task)
reserves, for each dataset and partition, the plan of every DP task of the run at its tight total
(``spend_plan``, one transaction per part), under the key ``run/<dag_id>/<run_id>`` (the whole dataset) or
``run/<dag_id>/<run_id>/<partition>``. The plan is the DAG check's plan for this run: every attempt a task's
retries allow, every map index up to its bound, templated dataset names rendered in the run's context and
located on the ledger (``visits/{{ ds }}`` on a dataset ``visits`` declared partitioned is the run's day
partition of ``visits``; see :mod:`dp_pipeline.airflow.planning`). If a part does not fit, the run fails
before
any task reads data and nothing is charged: every part is checked first (the parts of one dataset also
together, ``quote``), and a reservation made before another part was refused (a concurrent spend in
between, or a key the ledger cannot take: longer than 512 characters) is shrunk back to nothing.

Each **task attempt** then pays from the run's reservation instead of reserving on its own (see
:mod:`dp_pipeline.airflow.operators` and :mod:`dp_pipeline.airflow.guards`): when it starts it claims its
**share**,
its declared cost, keyed by the attempt (:meth:`~dp_pipeline.accounting._reservation.Reservation.claim`),
and a mechanism its declaration hands is paid within the share; its code's releases through ``dp`` are
paid within the share too, so that the sum of an attempt's releases never exceeds its declared cost and
no attempt pays with another's share (the ledger records each payment's share and cap, and ``verify()``
checks every share's sum). A share is claimed once: a second delivery of the attempt is refused. Before its
code starts, the attempt also records its try number (an XCom), which is how the teardown knows it started.

The **teardown task** (:class:`RunBudgetTeardownOperator`, downstream of every task, which Airflow runs
once they are all done, even when some failed) shrinks each part's reservation to the declared costs of the
attempts that started (``acct.shrink``): the share of a task that never started (an upstream failure, a
branch not taken) goes back to the budget; an attempt that started stays charged its whole declared cost,
even the part its code did not pay for, since it may have released data by other means. An attempt that
recorded its start keeps its share whatever its task instance's state; a task instance whose start was not
recorded keeps every attempt its retries allow unless it certainly never ran (upstream failed, removed, or
skipped before it started). When what was paid does not fit the shrunk plan, the whole reservation stays.

Retries: each attempt has its share, as outside a run (the setup reserves ``retries + 1`` attempts per task
instance, and the teardown keeps the attempts that started). An attempt beyond them (a task cleared by hand)
and any attempt after the teardown settled the run are refused: a new run reserves anew.

Budget share: ``run_budget(dag, share=...)`` gives each run a share of a dataset's budget (one guarantee for
every dataset, or one per dataset), and a DP task may then leave its noise free (a
:class:`~dp_pipeline.PlannedRelease` instead of a mechanism): the setup calibrates the free tasks
to the share and reserves that plan, and each receives its calibrated mechanism (see
:mod:`dp_pipeline.airflow.allocating`).

Every DP task of a run-budgeted DAG must use the run budget's ledger connection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

from dp_pipeline.airflow.allocating import RunPart, publish, published_plan, run_part
from dp_pipeline.airflow.attempt import plan_form, refusal
from dp_pipeline.airflow.declared import (
    DEFAULT_CONN_ID,
    DagPlan,
    OnExhausted,
    PlannedTask,
    Share,
    check_on_exhausted,
    check_share,
    iter_guards,
)
from dp_pipeline.airflow.exceptions import PrivacyCostError
from dp_pipeline.airflow.hooks import PrivacyLedgerHook
from dp_pipeline.airflow.keys import ATTEMPT_XCOM_KEY, SETTLED_XCOM_KEY, role_task, run_key, task_name
from dp_pipeline.airflow.partition_names import PARTITION_SEPARATOR
from dp_pipeline.airflow.planning import locate_plan, plan_dag
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    printable,
)

if TYPE_CHECKING:
    from dp_pipeline.accounting import PrivacyAccountant, Reservation

__all__ = ["RunBudgetSetupOperator", "RunBudgetTeardownOperator", "part_name", "run_budget", "run_plan"]


def run_plan(context: Mapping[str, Any], accountant: PrivacyAccountant) -> DagPlan:
    """The plan of the running DAG run, as its setup reserves it: the DP tasks whose costs a guard or the
    task itself enforces, with dataset names rendered in the run's context and located on the ledger
    (:func:`~dp_pipeline.airflow.planning.locate_plan`: a partition of a partitioned dataset, or a dataset).

    Raises
    ------
    PrivacyCostError
        A dataset name cannot be rendered for the run, or names a partition of a dataset that is not
        partitioned.
    """
    plan = plan_dag(context["dag"], context=context)
    unrendered = [t for t in plan.tasks if t.unrendered is not None]
    if unrendered:
        names = "; ".join(f"{t.task_id}: {t.cost.dataset!r} ({t.unrendered})" for t in unrendered)
        raise PrivacyCostError(f"the run's plan cannot be reserved: dataset names not rendered: {names}")
    plan = locate_plan(dataclasses.replace(plan, tasks=[t for t in plan.tasks if t.enforced]), accountant)
    unlocated = [t for t in plan.tasks if t.unlocated is not None]
    if unlocated:
        names = "; ".join(f"{t.task_id}: {t.unlocated}" for t in unlocated)
        raise PrivacyCostError(f"the run's plan cannot be reserved: {names}")
    return plan


def part_name(dataset: str, partition: str | None) -> str:
    """How a part of a run's plan is named in the setup's and teardown's XComs: the dataset, or
    ``<dataset>/<partition>``."""
    return dataset if partition is None else f"{dataset}{PARTITION_SEPARATOR}{partition}"


def _ledger_conn_ids(task: Any) -> set[str]:
    found = {guard.ledger_conn_id for guard in iter_guards(task)}
    kwargs = getattr(task, "partial_kwargs", None)
    own = kwargs.get("ledger_conn_id", DEFAULT_CONN_ID) if isinstance(kwargs, dict) else None
    own = getattr(task, "ledger_conn_id", own)
    if own is not None:
        found.add(str(own))
    return found


class _RunBudgetOperator(BaseOperator):
    """What the setup and the teardown share: the ledger connection, the plan and the key of their run."""

    ui_color: ClassVar[str] = "#d6c8ee"  # type: ignore[misc]
    dp_run_budget_role: ClassVar[str] = ""
    """``"setup"`` or ``"teardown"``: how the tasks find them
    (:func:`dp_pipeline.airflow.keys.role_task`)."""

    def __init__(
        self, *, ledger_conn_id: str = DEFAULT_CONN_ID, on_exhausted: OnExhausted = "fail", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.ledger_conn_id = ledger_conn_id
        self.on_exhausted = check_on_exhausted(on_exhausted)

    def get_accountant(self) -> PrivacyAccountant:
        """The accountant of ``ledger_conn_id`` (a subclass may reach its ledger another way)."""
        return PrivacyLedgerHook(self.ledger_conn_id).get_accountant()

    def _plan(self, context: Mapping[str, Any], accountant: PrivacyAccountant) -> DagPlan:
        plan = run_plan(context, accountant)
        for planned_id in {t.task_id for t in plan.tasks}:
            others = _ledger_conn_ids(context["dag"].get_task(planned_id)) - {self.ledger_conn_id}
            if others:
                raise PrivacyCostError(
                    f"task {planned_id!r} charges the ledger {sorted(others)[0]!r}, but the run reserves on "
                    f"{self.ledger_conn_id!r}: every DP task of a run-budgeted DAG uses the run's ledger"
                )
        return plan


class RunBudgetSetupOperator(_RunBudgetOperator):
    """Reserve the privacy plan of the whole DAG run, per dataset, before any task reads data.

    Added by :func:`run_budget` as the DAG's setup task (see the module docstring).

    Parameters
    ----------
    share : Guarantee or mapping, optional
        The run's budget share (see :func:`run_budget`), which calibrates the tasks that leave their
        noise free.
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The ledger the run reserves on (every DP task of the DAG must use it).
    on_exhausted : {"fail", "skip"}, default "fail"
        A run whose plan does not fit fails (no retry; every task ends ``upstream_failed``) or is skipped.
    **kwargs
        Operator arguments.

    Returns
    -------
    dict
        (XCom) dataset, or ``<dataset>/<partition>`` for a partition's part → the reserved total
        (``Guarantee.to_dict()``). The calibration of the free tasks is the XCom
        :data:`~dp_pipeline.airflow.allocating.CALIBRATED_XCOM_KEY`.
    """

    dp_run_budget_role = "setup"

    def __init__(self, *, share: Share | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.share = share

    def execute(self, context: Any) -> dict[str, Any]:
        """Calibrate the free tasks to the run's share, check every part of the run's plan (each dataset and
        partition, and the parts of one dataset together), then reserve each at its tight total and publish
        the calibration."""
        accountant = self.get_accountant()
        plan = self._plan(context, accountant)
        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        parts = {(d, p): run_part(plan, d, accountant, p) for d, p in plan.groups()}
        for part in parts.values():  # nothing is written while any part cannot fit
            self._check_fits(accountant, part, context)
        self._check_together(accountant, parts.values(), context)
        reserved: dict[tuple[str, str | None], Any] = {}
        for (dataset, partition), part in parts.items():
            key, where = run_key(dag_id, run_id, partition), part_name(dataset, partition)
            try:
                reservation = accountant.spend_plan(
                    dataset,
                    part.events,
                    key=key,
                    group_size=part.group_size,
                    delta=part.delta,
                    label=part.label(run_id),
                    partition=partition,
                )
            except KeyAlreadyUsedError:  # this setup already reserved (a retry or a second delivery)
                reservation = accountant.reservation(dataset, key)
            except BudgetExceededError as exc:  # another process spent in between
                self._undo(accountant, dag_id, run_id, reserved, f"the run's plan on {where!r} did not fit")
                raise refusal(exc, task_name(context), self.on_exhausted) from exc
            except (InvalidParameterError, LedgerError) as exc:  # e.g. a key beyond the ledger's length
                self._undo(accountant, dag_id, run_id, reserved, f"the run's plan on {where!r} was refused")
                raise PrivacyCostError(
                    f"the run's plan on {where!r} cannot be reserved: {printable(str(exc).rstrip('.'))}. "
                    "The run's reservations are given back; nothing was charged."
                ) from exc
            reserved[(dataset, partition)] = reservation.cost.to_dict()
            self.log.info(
                "reserved %s for the run on %r (key %s)",
                reservation.cost,
                where,
                printable(key),
            )
        publish(context, parts)
        return {part_name(*group): total for group, total in reserved.items()}

    def _check_fits(self, accountant: PrivacyAccountant, part: RunPart, context: Mapping[str, Any]) -> None:
        dataset, partition = part.dataset, part.partition
        try:
            if part.fits(accountant, "remaining"):
                return
            cost = part.cost(accountant, "remaining").guarantee
            spent, left = accountant.spent(dataset), accountant.remaining(dataset)
        except (InvalidParameterError, LedgerError, ValueError) as exc:  # no budget, wrong currency, ...
            raise PrivacyCostError(
                f"the run's plan on {part_name(dataset, partition)!r} cannot be reserved: "
                f"{str(exc).rstrip('.')}. Give the dataset "
                "a budget on the ledger or fix the declared costs."
            ) from exc
        on = "" if partition is None else f" on partition {partition!r}"
        error = BudgetExceededError(
            dataset,
            f"{cost}{on}",
            spent.guarantee,
            left.guarantee,
            accountant.budget(dataset).guarantee,
            detail=_share_note(part)
            + "The run's whole plan is reserved before any task reads data; nothing was charged.",
        )
        raise refusal(error, task_name(context), self.on_exhausted)

    def _check_together(
        self, accountant: PrivacyAccountant, parts: Iterable[RunPart], context: Mapping[str, Any]
    ) -> None:
        """Refuse the run when the parts of one dataset fit each on its own but not together."""
        by_dataset: dict[str, list[RunPart]] = {}
        for part in parts:
            by_dataset.setdefault(part.dataset, []).append(part)
        for dataset, together in by_dataset.items():
            if (
                len(together) < 2
                or accountant.quote(dataset, [part.planned.request for part in together]).fits
            ):
                continue
            named = ", ".join(
                "the whole dataset" if p.partition is None else repr(p.partition) for p in together
            )
            error = BudgetExceededError(
                dataset,
                f"the run's plans on {named}, together",
                accountant.spent(dataset).guarantee,
                accountant.remaining(dataset).guarantee,
                accountant.budget(dataset).guarantee,
                detail="Each fits on its own, not all of them; the run's whole plan is reserved before any "
                "task reads data; nothing was charged.",
            )
            raise refusal(error, task_name(context), self.on_exhausted)

    def _undo(
        self,
        accountant: PrivacyAccountant,
        dag_id: str,
        run_id: str,
        reserved: Mapping[tuple[str, str | None], Any],
        reason: str,
    ) -> None:
        for dataset, partition in reserved:  # nothing read data yet: each reservation goes back whole
            accountant.shrink(dataset, run_key(dag_id, run_id, partition), [], reason=reason)


def _share_note(part: RunPart) -> str:
    if part.share is None:
        return ""
    return f"The run's share is {part.share}; its plan, calibrated to it, costs the share or less. "


def _ran(context: Mapping[str, Any]) -> dict[tuple[str, int], bool]:
    """(task id, map index) → whether a try of it may have run, for the run's task instances.

    Only a task instance stopped by an upstream failure, removed, or skipped before it started (a branch
    not taken: no duration) certainly never ran. Any other state counts as run: succeeded or failed, and,
    to be safe, one not finished (running, queued, up for retry), which may still release data.
    """
    ti = context["ti"]
    found = {}
    for row in ti.get_task_breadcrumbs(ti.dag_id, ti.run_id):
        state, duration = str(row.get("state")), row.get("duration")
        never = state in ("upstream_failed", "removed") or (
            state == "skipped" and not (duration is not None and duration > 0)
        )
        found[(str(row["task_id"]), int(row["map_index"]))] = not never
    return found


class RunBudgetTeardownOperator(_RunBudgetOperator):
    """Shrink the run's reservations to the declared costs of the attempts that started.

    Added by :func:`run_budget` as the DAG's teardown task, which Airflow runs when the tasks are done,
    also after failures (see the module docstring).

    Returns
    -------
    dict
        (XCom) dataset, or ``<dataset>/<partition>`` for a partition's part → ``{"reserved", "kept",
        "attempts"}``: what the run reserved and keeps (as ``Guarantee.to_dict()``) and how many attempts
        started.
    """

    dp_run_budget_role = "teardown"

    def execute(self, context: Any) -> dict[str, Any]:
        """Count the attempts that started, shrink each part's reservation to them, then mark the run
        settled."""
        accountant = self.get_accountant()
        plan = published_plan(self._plan(context, accountant), context)
        dag_id, run_id = context["dag"].dag_id, context["run_id"]
        ran = _ran(context)
        settled: dict[str, Any] = {}
        for (dataset, partition), tasks in plan.groups().items():
            key = run_key(dag_id, run_id, partition)
            try:
                reservation = accountant.reservation(dataset, key)
            except LedgerError:  # the setup did not reserve it (it failed or was skipped)
                continue
            releases = [
                (t.cost.event, t.cost.group_size)
                for t in tasks
                for (task_id, index), has_run in sorted(ran.items())
                if task_id == t.task_id
                for _ in range(self._started_attempts(context, t, index, has_run))
            ]
            before = reservation.cost
            kept = reservation
            planned = sum(t.releases for t in tasks)
            if len(releases) < planned:
                kept = self._shrink(
                    accountant, dataset, key, releases, planned, reservation.group_size, context
                )
            settled[part_name(dataset, partition)] = {
                "reserved": before.to_dict(),
                "kept": kept.cost.to_dict(),
                "attempts": len(releases),
            }
        context["ti"].xcom_push(SETTLED_XCOM_KEY, True)
        return settled

    def _started_attempts(
        self, context: Mapping[str, Any], planned: PlannedTask, index: int, has_run: bool
    ) -> int:
        """How many attempts of a task instance may have started its code: the try number its last
        started attempt recorded, whatever its state, else every attempt its retries allow when a try of it
        may have run (an earlier attempt may have started before the last one failed early), else none."""
        recorded = context["ti"].xcom_pull(
            task_ids=planned.task_id, key=ATTEMPT_XCOM_KEY, map_indexes=index, default=None
        )
        if isinstance(recorded, int) and recorded > 0:
            return min(recorded, planned.attempts)
        return planned.attempts if has_run else 0

    def _shrink(
        self,
        accountant: PrivacyAccountant,
        dataset: str,
        key: str,
        releases: list[tuple[PrivacyEvent, int]],
        planned: int,
        group_size: int,
        context: Mapping[str, Any],
    ) -> Reservation:
        reason = (
            f"run {context['run_id']} settled: {len(releases)} of {planned} planned task attempts started; "
            "kept their declared costs"
        )
        try:
            return accountant.shrink(dataset, key, plan_form(releases, group_size), reason=reason)
        except (BudgetExceededError, InvalidParameterError) as exc:
            self.log.warning(
                "the run's reservation on %r stays whole: %s",
                dataset,
                printable(f"{type(exc).__name__}: {exc}"),
            )
            return accountant.reservation(dataset, key)


def run_budget(
    dag: Any,
    *,
    share: Share | None = None,
    ledger_conn_id: str = DEFAULT_CONN_ID,
    on_exhausted: OnExhausted = "fail",
    setup_task_id: str = "dp_reserve_run",
    teardown_task_id: str = "dp_settle_run",
) -> tuple[RunBudgetSetupOperator, RunBudgetTeardownOperator]:
    """Make every run of ``dag`` reserve its whole privacy plan before any task reads data.

    Call it once the DAG's tasks are defined (in the DAG file, after the ``with DAG(...)`` block or at its
    end). It adds a setup task upstream of every task without upstream and a teardown task downstream of
    every task, so that no task still runs when the teardown settles the run (see the module docstring).

    Parameters
    ----------
    dag : airflow.sdk.DAG
    share : Guarantee or mapping, optional
        The budget share of each run: one guarantee (PureDP, ApproxDP or GaussianDP, in the budget's
        currency) for every dataset the run charges, or a mapping of dataset names (as rendered, or the
        template a task declares) to guarantees. It caps what a run charges the dataset, and calibrates the
        DP tasks that leave their noise free (a :class:`~dp_pipeline.PlannedRelease` as their
        ``mechanism``): see :mod:`dp_pipeline.airflow.allocating`.
    ledger_conn_id : str, default ``"dp_ledger_default"``
        The ledger of the run's reservations; every DP task of the DAG must use it.
    on_exhausted : {"fail", "skip"}, default "fail"
        A run whose plan does not fit fails, or is skipped.
    setup_task_id, teardown_task_id : str
        The ids of the two tasks.

    Returns
    -------
    (RunBudgetSetupOperator, RunBudgetTeardownOperator)

    Raises
    ------
    InvalidParameterError
        The DAG already reserves per run, or has no task, or the share is not a guarantee or a mapping of
        dataset names to guarantees.
    """
    checked = check_share(share)
    if role_task(dag, "setup") is not None:
        raise InvalidParameterError(f"DAG {dag.dag_id!r} already reserves its plan per run", "dag")
    roots, tasks = list(dag.roots), list(dag.tasks)
    if not roots:
        raise InvalidParameterError(f"DAG {dag.dag_id!r} has no task to reserve for", "dag")
    options = {"ledger_conn_id": ledger_conn_id, "on_exhausted": on_exhausted, "dag": dag}
    setup = RunBudgetSetupOperator(task_id=setup_task_id, retries=0, share=checked, **options)
    teardown = RunBudgetTeardownOperator(task_id=teardown_task_id, retries=0, **options)
    setup >> roots
    tasks >> teardown  # every task, not just the leaves: none may still run when the run is settled
    setup.as_setup()
    teardown.as_teardown(setups=setup)
    return setup, teardown
