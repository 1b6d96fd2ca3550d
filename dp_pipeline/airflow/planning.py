"""DAG-level planning: compose a DAG's declared privacy costs per dataset, before anything runs.

Every DP task declares its cost when the DAG is defined, so one run of a DAG is a plan fixed in advance.
:func:`plan_dag` collects the costs without any I/O; :func:`check_dag` asks the accountant's one plan check
for each dataset: :meth:`PrivacyAccountant.plan_cost <dp_pipeline.PrivacyAccountant.plan_cost>` for the
tight total, and :meth:`~dp_pipeline.PrivacyAccountant.quote` against the whole budget and against what
remains, as ``dp-pipeline plan check`` does. ``python -m dp_pipeline.airflow.check DAG_FOLDER`` runs the check
over a DAG folder, and :mod:`dp_pipeline.airflow.policies` can refuse such a DAG when it is parsed.

What a plan counts, so that no run can cost more than the check says:

- every task on every branch (an upper bound: branches not taken are still counted);
- every attempt that can start the task's code: ``retries + 1`` per task (a refused attempt is not retried,
  and one that fails before its code runs is released, but each one that starts is charged);
- a mapped task once per map index: the literal map length when the mapped values are known when the DAG is
  parsed, else its declared ``max_map_length``, else Airflow's ``[core] max_map_length``. The task refuses
  a map index beyond its bound before it reads data (see
  :func:`dp_pipeline.airflow.attempt.check_map_index`);
- the dataset a run charges: a templated name (``dataset="visits/{{ ds }}"``) is rendered for the logical
  date given to the check (``check_dag(dag, acct, logical_date=...)``, ``--logical-date``). A name that
  cannot be rendered before the run exists (no date given, or it needs the run id, a Variable, ...) is
  reported per template and not checked against any budget;
- the partition a run charges: on a dataset declared partitioned (``set_budget("visits", ...,
  relation="add_remove", partitions=L)``) a rendered name ``visits/2026-11-24`` is partition ``2026-11-24``
  of ``visits``
  (:func:`locate_plan`), checked with ``quote``; the parts of one run on one dataset
  (its partitions, the whole dataset) are also checked together (``quote``), as the run charges them.
  Without a logical date, ``visits/{{ ds }}`` is checked as a partition that has spent nothing (what a new
  day costs: the plan on it composed, under the dataset's rule, with the largest existing partitions), one
  per template; a rendered name that names a partition of a dataset that is not partitioned is a problem
  (a run would be refused);
- one run of the DAG. Runs add up on the ledger, which is what the comparison with the remaining budget shows.
  An attempt started by hand afterwards (a cleared task) is a new attempt beyond the plan;
- the noise of tasks that leave it free, calibrated to the run's budget share of their dataset as the run's
  setup calibrates it (:mod:`dp_pipeline.airflow.allocating`); each check reports the calibrated mechanisms.

At run time each task is charged on its own as it starts, and the accountant composes those spends with a
rule that stays valid under adaptive choice; that total can be larger than the tight plan total. A plan that
exceeds the budget can never complete; one that fits the plan may still be stopped part-way at run time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dp_pipeline.accounting import partition_spending
from dp_pipeline.airflow.allocating import run_part
from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.airflow.declared import (
    DagPlan,
    LogicalDate,
    PlannedTask,
    dag_share,
    declared_costs,
    map_bound,
    task_attempts,
)
from dp_pipeline.airflow.exceptions import PrivacyCostError
from dp_pipeline.airflow.partition_names import locate_partition
from dp_pipeline.airflow.reports import dataset_budget, format_guarantee
from dp_pipeline.airflow.templating import (
    as_logical_date,
    is_template,
    render_dataset,
    render_for_plan,
    task_context,
    template_partition,
)
from dp_pipeline.exceptions import InvalidParameterError, printable
from dp_pipeline.planning import PlanCheck, check_plan, check_together, describe_noise

if TYPE_CHECKING:
    from dp_pipeline import AllocatedRelease
    from dp_pipeline.accounting import PrivacyAccountant
    from dp_pipeline.guarantees import Guarantee

__all__ = [
    "DatasetCheck",
    "check_dag",
    "format_checks",
    "hands_mechanism",
    "locate_plan",
    "plan_dag",
]


@dataclass(frozen=True)
class DatasetCheck:
    """The check of one dataset's part of a DAG plan against its budget.

    Attributes
    ----------
    dag_id, dataset : str
    tasks : list of PlannedTask
    total : Guarantee or None
        The tight total of the plan (None when it could not be composed).
    method : str
        The composition method that produced ``total``.
    budget, remaining : Guarantee or None
        The dataset's budget and what remains of it (None when the dataset has no budget).
    relation : str or None
        The dataset's neighbouring relation (``"replace_one"`` or ``"add_remove"``), which the total is
        read under; None when the dataset has no budget.
    partition : str or None
        The partition of ``dataset`` this part of the plan charges (None: the whole dataset).
    new_partition : bool
        ``partition`` stands for the partition a template renders to (no logical date was given): it was
        checked as a partition that has spent nothing.
    share : Guarantee or None
        The run's budget share of the dataset (or of this partition), which caps the plan's total.
    calibrated : dict
        Task id → the calibrated release (:class:`~dp_pipeline.AllocatedRelease`) of each task
        that leaves its noise free; the ``tasks`` then carry the calibrated costs.
    fits_budget, fits_remaining : bool
        Whether one DAG run fits the whole budget, and what remains of it now.
    problems : list of str
        Why the plan does not fit: one run exceeds the budget, the dataset has no budget, or the plan cannot
        be composed.
    warnings : list of str
        What the check cannot vouch for or should point out: mapped tasks bounded only by Airflow's
        ``[core] max_map_length``, costs declared in params that no guard enforces, dataset templates that
        could not be rendered.
    checked : bool
        False when the dataset is a template that could not be rendered for the plan: then it was compared
        with no budget (``total``, ``budget`` and ``remaining`` are None).
    """

    dag_id: str
    dataset: str
    tasks: list[PlannedTask]
    total: Guarantee | None
    method: str
    budget: Guarantee | None
    remaining: Guarantee | None
    fits_budget: bool
    fits_remaining: bool
    relation: str | None = None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: bool = True
    partition: str | None = None
    new_partition: bool = False
    share: Guarantee | None = None
    calibrated: dict[str, AllocatedRelease] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The dataset, and the partition when the check names one (``visits, partition 2026-11-24``)."""
        return self.dataset if self.partition is None else f"{self.dataset}, partition {self.partition}"

    @property
    def ok(self) -> bool:
        """True when one run of the plan was checked and fits the dataset's whole budget."""
        return self.checked and self.fits_budget and not self.problems


Renderer = Callable[[Any, str], "str | None"]
"""Renders a task's templated dataset name for the plan, or returns None when it cannot be rendered yet."""


def _planned(
    task: Any, cost: DPCost, source: str, enforced: bool, render: Renderer, missing: str
) -> PlannedTask:
    count, bound = map_bound(task, cost)
    planned = PlannedTask(task.task_id, cost, count, source, enforced, task_attempts(task), bound)
    try:
        if not is_template(task, cost.dataset):
            return planned
        name = render(task, cost.dataset)
    except Exception as exc:  # a template that does not parse or render: every run would fail on it too
        reason = f"it cannot be rendered: {type(exc).__name__}: {exc}"
        return dataclasses.replace(planned, template=cost.dataset, unrendered=reason)
    if name is None:
        reason = f"it needs {missing}"
        split = template_partition(task, cost.dataset)
        return dataclasses.replace(planned, template=cost.dataset, unrendered=reason, split=split)
    try:
        rendered = dataclasses.replace(cost, dataset=name)
    except InvalidParameterError as exc:
        return dataclasses.replace(planned, template=cost.dataset, unrendered=f"it renders to {exc}")
    return dataclasses.replace(planned, cost=rendered, template=cost.dataset)


def plan_dag(
    dag: Any,
    *,
    logical_date: LogicalDate | None = None,
    context: Mapping[str, Any] | None = None,
    params_enforced: bool = False,
) -> DagPlan:
    """Collect the declared costs of one run of ``dag``, without any I/O.

    Parameters
    ----------
    dag : airflow.sdk.DAG
    logical_date : datetime, date or str, optional
        The logical date of the run to plan: templated dataset names are rendered for it (see
        :mod:`dp_pipeline.airflow.templating`). Without it, names that need a date are reported per template.
    context : mapping, optional
        Instead of a date: the template context of a task of the running DAG run (a run-level
        reservation plans its own run), in which every task's names are rendered as that task renders them.
    params_enforced : bool, default False
        Whether ``params["dp_cost"]`` declarations are enforced (the cluster policy is active) even where
        no guard is attached yet.

    Returns
    -------
    DagPlan

    Raises
    ------
    InvalidParameterError
        Both a date and a context, or a date that is not one.
    """
    if logical_date is not None and context is not None:
        raise InvalidParameterError("plan a run from a logical date or from its context, not both", "context")
    render: Renderer
    if context is not None:
        run_context = context

        def render(task: Any, text: str) -> str:
            return render_dataset(task, text, task_context(task, run_context))

        date = run_context.get("logical_date")
        missing = "what its task instance only knows"
    else:
        date = None if logical_date is None else as_logical_date(logical_date)

        def render(task: Any, text: str) -> str | None:
            return render_for_plan(task, text, date)

        needs = "a logical date or " if date is None else ""
        missing = f"{needs}what only a run knows (the run id, the data interval, a Variable, ...)"
    tasks = [
        _planned(task, cost, source, enforced, render, missing)
        for task in dag.tasks
        for cost, source, enforced in declared_costs(task, params_enforced=params_enforced)
    ]
    per_run, share = dag_share(dag)
    when = None if date is None else date.isoformat()
    return DagPlan(dag.dag_id, tasks, when, per_run, share)


def locate_plan(plan: DagPlan, accountant: PrivacyAccountant) -> DagPlan:
    """The plan with each task's dataset name located on the ledger's budgets (only read).

    - A rendered name is mapped by :func:`~dp_pipeline.airflow.partition_names.locate_partition`: a name that
      is itself a dataset stays whole; ``visits/2026-11-24`` on a dataset ``visits`` declared partitioned
      becomes partition ``2026-11-24`` of ``visits`` (``cost.partition``). A name that names a partition of
      a dataset that is not partitioned keeps its name, with :attr:`PlannedTask.unlocated` saying why.
    - A template not rendered (no logical date) whose dataset part is a partitioned dataset
      (``visits/{{ ds }}``) is planned on a partition that has spent nothing, one per partition template,
      named by its template (:attr:`PlannedTask.new_partition`): what the run of a new day costs.
    - Other templates not rendered stay as they are (reported per template, unchecked).

    Tasks already located are kept as they are.
    """
    datasets = set(accountant.datasets())
    located: list[PlannedTask] = []
    for planned in plan.tasks:
        if planned.cost.partition is not None or planned.unrendered is not None:
            located.append(planned)
            continue
        try:
            dataset, partition = locate_partition(planned.cost.dataset, accountant)
        except InvalidParameterError as exc:
            located.append(dataclasses.replace(planned, unlocated=str(exc)))
            continue
        cost = dataclasses.replace(planned.cost, dataset=dataset, partition=partition)
        located.append(dataclasses.replace(planned, cost=cost))
    taken = {(t.cost.dataset, t.cost.partition) for t in located}
    fresh: dict[tuple[str, str], str] = {}
    for index, planned in enumerate(located):
        if planned.split is None or planned.cost.partition is not None:
            continue
        dataset, template = planned.split
        if dataset not in datasets or accountant.budget(dataset).partitions is None:
            continue
        if (dataset, template) not in fresh:
            spent = set(partition_spending(accountant.store, dataset))
            name = template
            while name in spent or (dataset, name) in taken:  # a name no partition has: nothing spent on it
                name += "'"
            fresh[(dataset, template)] = name
            taken.add((dataset, name))
        cost = dataclasses.replace(planned.cost, dataset=dataset, partition=fresh[(dataset, template)])
        located[index] = dataclasses.replace(planned, cost=cost, new_partition=True)
    return dataclasses.replace(plan, tasks=located)


def check_dag(
    dag_or_plan: Any, accountant: PrivacyAccountant, *, logical_date: LogicalDate | None = None
) -> list[DatasetCheck]:
    """Ask the accountant whether each dataset's part of the plan fits its budget and what remains of it.

    Parameters
    ----------
    dag_or_plan : DAG or DagPlan
        The DAG (or its plan from :func:`plan_dag`).
    accountant : PrivacyAccountant
        The ledger holding the budgets (only read).
    logical_date : datetime, date or str, optional
        With a DAG: the logical date of the run to check, for templated dataset names (see
        :func:`plan_dag`). A plan was rendered when it was made, so it takes none.

    Returns
    -------
    list of DatasetCheck
        One per dataset and partition the DAG charges (:meth:`DagPlan.groups` of the plan located on the
        ledger, :func:`locate_plan`; per template for names that could not be rendered). The parts of one
        dataset are also checked together: a part that fits alone but not with the others fails too.

    Raises
    ------
    InvalidParameterError
        A logical date with a plan, or one that is not a date.
    """
    if isinstance(dag_or_plan, DagPlan):
        if logical_date is not None:
            raise InvalidParameterError(
                "a DagPlan is already rendered for its logical date: pass logical_date to plan_dag instead",
                "logical_date",
            )
        plan = dag_or_plan
    else:
        plan = plan_dag(dag_or_plan, logical_date=logical_date)
    plan = locate_plan(plan, accountant)
    checked = [
        _check_group(plan, dataset, partition, tasks, accountant)
        for (dataset, partition), tasks in plan.groups().items()
    ]
    return _check_together(checked, accountant)


def _notes(tasks: list[PlannedTask]) -> list[str]:
    notes = []
    by_airflow = [t for t in tasks if t.bound == "airflow"]
    if by_airflow:
        notes.append(
            f"mapped over values known only at run time, so counted at Airflow's [core] max_map_length "
            f"({by_airflow[0].count}): {', '.join(t.task_id for t in by_airflow)}; declare max_map_length=N "
            "on the task to count (and allow) at most N map indexes"
        )
    unenforced = [t.task_id for t in tasks if not t.enforced]
    if unenforced:
        notes.append(
            f"cost declared in params but not enforced (enable dp_pipeline.airflow.policies.task_policy): "
            f"{', '.join(unenforced)}"
        )
    new = sorted({t.template for t in tasks if t.new_partition and t.template is not None})
    if new:
        notes.append(
            f"no logical date: {' and '.join(repr(name) for name in new)} checked on a partition that has "
            "spent nothing (what a new day costs); a name that renders to a partition already charged (the "
            "day before, say) can cost more: check a given run with a logical date"
        )
    return notes


def _check_group(
    plan: DagPlan,
    dataset: str,
    partition: str | None,
    tasks: list[PlannedTask],
    accountant: PrivacyAccountant,
) -> tuple[DatasetCheck, PlanCheck | None]:
    """The check of one part of the plan (a dataset, or one of its partitions), and the plan check of the
    part as the run's setup would reserve it (None when it could not be priced)."""
    warnings = _notes(tasks)
    new = any(t.new_partition for t in tasks)
    unrendered = [t for t in tasks if t.unrendered is not None and not t.new_partition]
    if unrendered:
        reasons = sorted({f"{t.task_id}: {t.unrendered}" for t in unrendered})
        warnings.append(
            f"the dataset name is the template {dataset!r}, not checked against any budget ("
            f"{'; '.join(reasons)}); check a run's rendered names with a logical date "
            "(check_dag(..., logical_date=...), --logical-date)"
        )
        unchecked = DatasetCheck(
            plan.dag_id, dataset, tasks, None, "", None, None, False, False, warnings=warnings, checked=False
        )
        return unchecked, None
    problems = sorted({t.unlocated for t in tasks if t.unlocated is not None})
    budget = None if problems else dataset_budget(accountant, dataset)
    if budget is None and not problems:
        problems.append(f"dataset {dataset!r} has no budget on the ledger; every task would be refused")
    base = DatasetCheck(
        plan.dag_id,
        dataset,
        tasks,
        None,
        "",
        budget,
        None,
        False,
        False,
        problems=problems,
        warnings=warnings,
        partition=partition,
        new_partition=new,
    )
    if budget is None:
        return base, None
    base = dataclasses.replace(
        base, relation=accountant.budget(dataset).relation, remaining=accountant.remaining(dataset).guarantee
    )
    try:
        part = run_part(plan, dataset, accountant, partition)  # free tasks calibrated to the run's share
        # the accountant's one plan check, against the whole budget and against what remains
        verdict = check_plan(accountant, part.planned)
    except PrivacyCostError as exc:
        return dataclasses.replace(base, problems=[*problems, str(exc)]), None
    except Exception as exc:
        reason = f"the plan cannot be composed: {type(exc).__name__}: {exc}"
        return dataclasses.replace(base, problems=[*problems, reason]), None
    checked = dataclasses.replace(base, tasks=part.tasks, share=part.share, calibrated=part.calibrated)
    return _with_verdict(checked, verdict), verdict


def _with_verdict(check: DatasetCheck, verdict: PlanCheck) -> DatasetCheck:
    """A part's check with the plan check's verdict (and, when one run exceeds the whole budget, why)."""
    problems = [*check.problems, *verdict.problems]
    if not verdict.fits_budget and not verdict.problems:
        needs, whole = format_guarantee(verdict.total), format_guarantee(check.budget)
        problems.append(f"one run needs {needs} but the whole budget is {whole}")
    return dataclasses.replace(
        check,
        total=verdict.total,
        method=verdict.method,
        fits_budget=verdict.fits_budget,
        fits_remaining=verdict.fits_remaining,
        problems=problems,
        warnings=[*check.warnings, *verdict.warnings],
    )


def _check_together(
    checked: list[tuple[DatasetCheck, PlanCheck | None]], accountant: PrivacyAccountant
) -> list[DatasetCheck]:
    """The checks, where one run charges a dataset in several parts (partitions, the whole dataset), with
    the parts also checked together (:func:`~dp_pipeline.planning.check_together`, as the run's reservations
    or attempts charge them one after another): a part that fits alone fails when they do not fit
    together."""
    priced = [(check, verdict) for check, verdict in checked if verdict is not None]
    joint = check_together(accountant, [verdict for _, verdict in priced])
    updated = {
        id(check): dataclasses.replace(
            check,
            fits_budget=after.fits_budget,
            fits_remaining=after.fits_remaining,
            problems=[*check.problems, *after.problems[len(before.problems) :]],
            warnings=[*check.warnings, *after.warnings[len(before.warnings) :]],
        )
        for (check, before), after in zip(priced, joint, strict=True)
    }
    return [updated.get(id(check), check) for check, _ in checked]


def hands_mechanism(check: DatasetCheck, task: PlannedTask) -> bool:
    """Whether ``task`` is handed a mechanism whose draw is paid before its code runs (its declared cost is a
    mechanism, or noise the run's share calibrated), rather than a budget its code pays through ``dp``."""
    return task.task_id in check.calibrated or task.cost.hands_mechanism


def _up_front(check: DatasetCheck) -> str:
    """What each task of a check pays before its code runs: ``count: a handed mechanism, its draw paid;
    report: its declared cost, paid through dp``."""
    return "; ".join(
        f"{t.task_id}: "
        + (
            "a handed mechanism, its draw paid"
            if hands_mechanism(check, t)
            else "its declared cost, paid through dp"
        )
        for t in check.tasks
    )


def format_checks(checks: Iterable[DatasetCheck]) -> str:
    """A plain-text table of checks, one line per DAG and dataset (and partition: a ``partition`` column
    when a check names one, ``(new)`` for a partition checked as one that has spent nothing), with below it
    what each task pays before its code runs (:func:`hands_mechanism`) and the problems."""
    checks = list(checks)
    named = any(check.partition is not None for check in checks)
    columns = ["DAG", "dataset", *(["partition"] if named else [])]
    columns += ["relation", "releases", "plan total", "method", "budget", "remaining", "verdict"]
    rows = [columns]
    notes: list[str] = []
    for check in checks:
        runs = sum(t.releases for t in check.tasks)
        if not check.checked:
            verdict = "UNCHECKED (template)"
        elif not check.ok:
            verdict = "EXCEEDS BUDGET" if check.total is not None else "REFUSED"
        else:
            verdict = "ok" if check.fits_remaining else "exceeds remaining"
        partition = "-" if check.partition is None else check.partition
        rows.append(
            [
                check.dag_id,
                check.dataset,
                *([f"{partition} (new)" if check.new_partition else partition] if named else []),
                check.relation or "-",
                str(runs),
                format_guarantee(check.total),
                check.method or "-",
                format_guarantee(check.budget),
                format_guarantee(check.remaining),
                verdict,
            ]
        )
        if check.share is not None:
            noise = "; ".join(f"{task}: {describe_noise(a)}" for task, a in check.calibrated.items())
            calibrated = f", calibrating {noise}" if noise else ""
            share = format_guarantee(check.share)
            notes.append(f"  {check.dag_id} / {check.where}: run share {share}{calibrated}")
        if check.tasks:
            notes.append(f"  {check.dag_id} / {check.where}: before the code runs: {_up_front(check)}")
        notes.extend(f"  {check.dag_id} / {check.where}: {problem}" for problem in check.problems)
        notes.extend(f"  {check.dag_id} / {check.where}: warning: {note}" for note in check.warnings)
    shown = [[printable(cell) for cell in row] for row in rows]  # names and labels are user-written
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in shown]
    return "\n".join(lines + [printable(note) for note in notes])
