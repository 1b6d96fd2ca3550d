"""A run's budget share calibrates the noise of its DP tasks (see
:func:`dp_pipeline.airflow.runs.run_budget`).

A DAG that reserves per run can give each run a **share** of a dataset's budget, and leave the noise of its
DP tasks **free**: a task declares a :class:`~dp_pipeline.PlannedRelease` (kind, sensitivity,
weight, group size) instead of a mechanism::

    with DAG("weekly_counts", ...) as dag:
        @dp_task(dataset="patients", mechanism=PlannedRelease("gaussian", sensitivity=1.0, weight=4))
        def total(mechanism):                       # receives its calibrated Gaussian
            return mechanism.randomize(exact_total())
        ...
    run_budget(dag, share={"patients": ApproxDP(1.0, 1e-6)})   # or one guarantee for every dataset

The setup task calibrates, per dataset with a share, the free tasks together with
:func:`dp_pipeline.planning.calibrate_share` (which calls :func:`dp_pipeline.allocate`): every attempt a
task's retries allow and every map index up to its bound is one release of the plan (each is charged), the
tasks with a fixed cost on the dataset are fixed releases of the same plan, and the target is the share,
priced under the dataset's own rule and neighbouring relation exactly as ``spend_plan`` prices it. So the free
tasks get what the share leaves after the fixed ones, and release i of weight wᵢ gets noise of standard
deviation t/√wᵢ for the least common scale t that fits. The setup then reserves that plan, read at the δ the
share was priced at (so the run is charged at most its share), in the transaction path of every run
reservation, and publishes the scale (an XCom). Each free task rebuilds its mechanism from the scale
(:meth:`PlannedRelease.at_scale <dp_pipeline._allocation.PlannedRelease.at_scale>`), checks that it is the one
reserved, receives it as ``mechanism`` and pays its event from the run's reservation when its code starts. The
DAG check (:func:`dp_pipeline.airflow.planning.check_dag`) calibrates the same way and reports each free
task's noise.

A share caps what the run charges each part of the run: the dataset, or each partition the run reads of a
partitioned dataset (a run reading two day partitions under L ≥ 2 may add up to two shares to the
dataset's composed total, which the dataset's own budget still bounds). It is not set aside for the run.
The run is refused before any task reads data (nothing charged) when the calibrated plan, which costs the
share or less, does not fit what remains of the budget, and when the fixed tasks alone exceed the share.
A free task outside a run budget (no :func:`~dp_pipeline.airflow.runs.run_budget`, or no share for its
dataset)
is refused by the DAG check and at run time, never calibrated against the whole budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dp_pipeline import AllocatedRelease, Allocation
from dp_pipeline.accounting import group_event
from dp_pipeline.airflow.declared import DagPlan, PlannedTask, Share
from dp_pipeline.airflow.exceptions import PrivacyCostError
from dp_pipeline.airflow.keys import role_task, task_name
from dp_pipeline.airflow.partition_names import PARTITION_SEPARATOR
from dp_pipeline.airflow.reports import format_guarantee
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError, LedgerError, printable
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP
from dp_pipeline.mechanisms import Mechanism
from dp_pipeline.planning import PlanPart, calibrate_share, describe_noise, share_terms

if TYPE_CHECKING:
    from dp_pipeline.accounting import BudgetReport, PrivacyAccountant
    from dp_pipeline.airflow.costs import DPCost

__all__ = [
    "CALIBRATED_XCOM_KEY",
    "RunPart",
    "calibrated_cost",
    "publish",
    "published_plan",
    "run_part",
]

CALIBRATED_XCOM_KEY = "dp_pipeline_calibrated"
"""The setup's XCom with each free task's calibration: task id → ``{"dataset", "scale", "event"}``."""

_MAX_LABEL = 2000  # the ledger's longest label


def _share_of(
    share: Share | None, dataset: str, partition: str | None, tasks: Sequence[PlannedTask]
) -> Guarantee | None:
    """The share of one part of a run (a dataset, or one of its partitions): the one guarantee, or the
    mapping's entry for the rendered name (the dataset, or ``visits/2026-11-24`` for a partition), the
    templates the tasks declare, or the dataset."""
    if share is None or isinstance(share, Guarantee):
        return share
    first = dataset if partition is None else f"{dataset}{PARTITION_SEPARATOR}{partition}"
    for name in (first, *(t.template for t in tasks if t.template), dataset):
        if name in share:
            return share[name]
    return None


# ------------------------------------------------------------------------------------------------------
# one dataset's part of a run's plan


@dataclass(frozen=True)
class RunPart:
    """One part of a DAG run's plan, on a dataset or on one of its partitions, as its setup reserves it.

    Attributes
    ----------
    dataset : str
    tasks : list of PlannedTask
        The tasks charging the dataset, each free task's cost replaced by its calibrated mechanism.
    events : list of PrivacyEvent
    group_size : int
        The plan as the accountant's plan methods take it (``spend_plan``, ``plan_cost``, ``quote``).
    delta : float or None
        The δ the plan is read at: the δ its share was priced at (None: the rule's default).
    share : Guarantee or None
        The run's share of the dataset.
    allocation : Allocation or None
        The calibration of the free tasks (one release per attempt and map index).
    calibrated : dict
        Task id → its calibrated release (:class:`~dp_pipeline.AllocatedRelease`).
    partition : str or None
        The partition of the dataset the part is on (None: the whole dataset).
    """

    dataset: str
    tasks: list[PlannedTask]
    events: list[PrivacyEvent]
    group_size: int
    delta: float | None = None
    share: Guarantee | None = None
    allocation: Allocation | None = None
    calibrated: dict[str, AllocatedRelease] = field(default_factory=dict)
    partition: str | None = None

    @property
    def planned(self) -> PlanPart:
        """The part as :mod:`dp_pipeline.planning` checks it: its releases composed as one plan."""
        return PlanPart(self.dataset, tuple(self.events), self.group_size, self.partition, self.delta)

    def cost(self, accountant: PrivacyAccountant, against: Literal["remaining", "budget"]) -> BudgetReport:
        """The plan's tight total (``plan_cost``), as its reservation will be charged."""
        return accountant.plan_cost(self.dataset, self.events, self.group_size, **self._options(against))

    def fits(self, accountant: PrivacyAccountant, against: Literal["remaining", "budget"]) -> bool:
        """Whether ``spend_plan`` would accept the plan (:meth:`~dp_pipeline.PrivacyAccountant.quote`)."""
        return accountant.quote(self.dataset, self.planned.request, against=against).fits

    def _options(self, against: Literal["remaining", "budget"]) -> dict[str, Any]:
        return {"delta": self.delta, "against": against, "partition": self.partition}

    def label(self, run_id: str) -> str:
        """The run reservation's ledger label: the run, and with a share the share and each free task's
        calibrated noise (cut to the ledger's 2000 characters)."""
        text = f"run {run_id}"
        if self.share is None:
            return text
        text += f" · share {format_guarantee(self.share)}"
        if self.calibrated:
            text += " · " + "; ".join(f"{task}: {describe_noise(a)}" for task, a in self.calibrated.items())
        return text if len(text) <= _MAX_LABEL else text[: _MAX_LABEL - 1] + "…"


def run_part(
    plan: DagPlan, dataset: str, accountant: PrivacyAccountant, partition: str | None = None
) -> RunPart:
    """The part of ``plan`` on ``dataset`` (on its ``partition``, or the whole dataset's), its free tasks
    calibrated to the run's share.

    A part without share nor free task is planned as before (:meth:`DagPlan.for_accountant`). With a
    share, the plan is calibrated and priced against the share under the dataset's rule and relation
    (:func:`~dp_pipeline.planning.calibrate_share`), and read at the δ it was priced at. On a partitioned
    dataset the share caps each part of the run (each partition it reads, and its releases on the whole
    dataset).

    Raises
    ------
    PrivacyCostError
        A free task outside a run budget or without a share for the dataset; a share in another currency
        than the budget; the fixed tasks alone exceed the share; the plan cannot be charged to the dataset
        at all; the dataset has no budget.
    """
    tasks = plan.groups()[(dataset, partition)]
    free = [t for t in tasks if t.cost.free is not None]
    share = _share_of(plan.share, dataset, partition, tasks)
    if share is None and not free:
        events, group_size = plan.for_accountant(dataset, partition)
        return RunPart(dataset, tasks, events, group_size, partition=partition)
    names = ", ".join(repr(t.task_id) for t in free)
    if free and not plan.run_budget:
        raise PrivacyCostError(
            f"DAG {plan.dag_id!r}: task(s) {names} leave their noise free on {dataset!r}, which only a run's "
            "budget share calibrates; add run_budget(dag, share=...) or declare a mechanism. Refused: "
            "nothing was charged."
        )
    if share is None:
        raise PrivacyCostError(
            f"DAG {plan.dag_id!r}: task(s) {names} leave their noise free on {dataset!r}, but the run has no "
            "share of that dataset: give one in run_budget(dag, share={...}). Refused: nothing was charged."
        )
    try:
        return _calibrate(plan, dataset, partition, tasks, free, share, accountant)
    except PrivacyCostError:
        raise
    except (BudgetExceededError, InvalidParameterError, LedgerError, ValueError) as exc:
        raise PrivacyCostError(
            f"DAG {plan.dag_id!r}: the run's share {format_guarantee(share)} of {dataset!r} cannot hold its "
            f"plan: {printable(str(exc).rstrip('.'))}. Raise the share, or lower the fixed tasks' costs. "
            "Refused: nothing was charged."
        ) from exc


def _calibrate(
    plan: DagPlan,
    dataset: str,
    partition: str | None,
    tasks: list[PlannedTask],
    free: list[PlannedTask],
    share: Guarantee,
    accountant: PrivacyAccountant,
) -> RunPart:
    """The part calibrated to its share (:func:`~dp_pipeline.planning.calibrate_share`): every attempt and
    map index of a task is one release of the plan."""
    assert isinstance(share, (PureDP, ApproxDP, GaussianDP))
    try:
        rule, relation = share_terms(accountant, dataset, share)
    except InvalidParameterError as exc:
        raise PrivacyCostError(str(exc)) from exc
    fixed = [
        group_event(t.cost.event, t.cost.group_size)
        for t in tasks
        if t.cost.free is None
        for _ in range(t.releases)
    ]
    releases = [release for t in free if (release := t.cost.free) for _ in range(t.releases)]
    calibration = calibrate_share(fixed, releases, share, rule, relation)
    if not calibration.fits:
        raise PrivacyCostError(
            f"DAG {plan.dag_id!r}: the tasks on {dataset!r} need {format_guarantee(calibration.cost)}, more "
            f"than the run's share {format_guarantee(share)}. Raise the share or lower their costs. Refused: "
            "nothing was charged."
        )
    calibrated: dict[str, AllocatedRelease] = {}
    if calibration.allocation is not None:
        start = 0
        for t in free:
            calibrated[t.task_id] = calibration.allocation[start]
            start += t.releases
    replaced = [
        dataclasses.replace(t, cost=_fixed_cost(t.cost, calibrated[t.task_id]))
        if t.task_id in calibrated
        else t
        for t in tasks
    ]
    events = list(calibration.events)
    return RunPart(
        dataset, replaced, events, 1, calibration.delta, share, calibration.allocation, calibrated, partition
    )


def _fixed_cost(cost: DPCost, allocated: AllocatedRelease) -> DPCost:
    """A free task's cost once calibrated: its mechanism (its event for a mechanism of another kind), for
    groups of the release's size."""
    mechanism = allocated.mechanism
    declared = mechanism if isinstance(mechanism, Mechanism) else mechanism.event
    return dataclasses.replace(cost, cost=declared, group_size=allocated.release.group_size)


# ------------------------------------------------------------------------------------------------------
# publishing the calibration and finding it again


def publish(context: Mapping[str, Any], parts: Mapping[Any, RunPart]) -> None:
    """Publish each free task's calibration (the common scale and the event reserved) as the setup's
    :data:`CALIBRATED_XCOM_KEY` XCom."""
    published = {
        task_id: {"dataset": part.dataset, "scale": part.allocation.scale, "event": allocated.event.to_dict()}
        for part in parts.values()
        if part.allocation is not None
        for task_id, allocated in part.calibrated.items()
    }
    context["ti"].xcom_push(CALIBRATED_XCOM_KEY, published)


def _published(context: Mapping[str, Any], setup: Any) -> Mapping[str, Any]:
    found = context["ti"].xcom_pull(task_ids=setup.task_id, key=CALIBRATED_XCOM_KEY, default=None)
    return found if isinstance(found, Mapping) else {}


def _rebuilt(cost: DPCost, entry: Any, task: str) -> tuple[DPCost, Any]:
    """A free cost rebuilt at its published scale, checked against the event its run reserved."""
    release = cost.free
    assert release is not None
    try:
        allocated = release.at_scale(float(entry["scale"]))
        same = entry["dataset"] == cost.dataset and allocated.event == PrivacyEvent.from_dict(entry["event"])
    except (KeyError, TypeError, ValueError) as exc:  # incl. InvalidParameterError: a malformed XCom
        raise PrivacyCostError(f"Task {task}: its run's published calibration cannot be read: {exc}") from exc
    if not same:
        raise PrivacyCostError(
            f"Task {task}: its noise, rebuilt from the run's calibration, is not the one its run reserved "
            f"on {cost.dataset!r} (the DAG changed since the run started?); it does not run. Trigger a new "
            "run."
        )
    return _fixed_cost(cost, allocated), allocated.mechanism


def calibrated_cost(cost: DPCost, context: Mapping[str, Any]) -> tuple[DPCost, Any]:
    """A task attempt's cost: as declared, or for a free task its calibrated mechanism's, with that
    mechanism (None for a fixed cost).

    Raises
    ------
    PrivacyCostError
        A free task outside a run budget, or one its run's setup did not calibrate (no share for its
        dataset), or whose calibration is not the one reserved; nothing is charged.
    """
    if cost.free is None:
        return cost, None
    name = task_name(context)
    setup = role_task(context["dag"], "setup")
    if setup is None:
        raise PrivacyCostError(
            f"Task {name} leaves its noise free ({cost.describe()}), which only a run's budget share "
            "calibrates: add run_budget(dag, share=...) or declare a mechanism. Refused: nothing was charged."
        )
    entry = _published(context, setup).get(context["ti"].task_id)
    if entry is None:
        raise PrivacyCostError(
            f"Task {name} leaves its noise free, but its run's setup {setup.task_id!r} calibrated none for "
            f"it (no share of {cost.dataset!r}?). Refused: nothing was charged."
        )
    return _rebuilt(cost, entry, name)


def published_plan(plan: DagPlan, context: Mapping[str, Any]) -> DagPlan:
    """``plan`` with each free task's cost replaced by the calibration its run published (a free task
    its setup did not calibrate stays free)."""
    setup = role_task(context["dag"], "setup")
    found = {} if setup is None else _published(context, setup)
    tasks = [
        dataclasses.replace(t, cost=_rebuilt(t.cost, found[t.task_id], t.task_id)[0])
        if t.cost.free is not None and t.task_id in found
        else t
        for t in plan.tasks
    ]
    return dataclasses.replace(plan, tasks=tasks)
