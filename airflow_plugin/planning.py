"""DAG-level planning: compose a DAG's declared privacy costs per dataset, before anything runs.

Every DP task declares its cost when the DAG is defined, so one run of a DAG is a plan fixed in advance.
:func:`plan_dag` collects the costs without any I/O; :func:`check_dag` asks the accountant's one plan check
for each dataset: :meth:`PrivacyAccountant.plan_cost <dp_pipeline.PrivacyAccountant.plan_cost>` for the
tight total, and :meth:`~dp_pipeline.PrivacyAccountant.plan_fits` against the whole budget and against what
remains, as ``dp-pipeline plan check`` does. ``python -m airflow_plugin.check DAG_FOLDER`` runs the check
over a DAG folder, and :mod:`airflow_plugin.policies` can refuse such a DAG when it is parsed.

What a plan counts:

- every task on every branch (an upper bound: branches not taken are still counted);
- a mapped task once per map index when the mapped values are literal (known at parse time); a task mapped
  over an upstream result cannot be bounded before it runs and is reported as *unbounded*;
- one run of the DAG. Runs add up on the ledger, which is what the comparison with the remaining budget shows.

At run time each task is charged on its own as it starts, and the accountant composes those spends with a
rule that stays valid under adaptive choice; that total can be larger than the tight plan total. A plan that
exceeds the budget can never complete; one that fits the plan may still be stopped part-way at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_plugin.costs import DPCost
from airflow_plugin.declared import operator_cost, params_spec, spec_to_cost
from airflow_plugin.guards import iter_guards
from airflow_plugin.reports import dataset_budget, format_guarantee
from dp_pipeline.accounting.composition import group_plan
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import printable
from dp_pipeline.guarantees import Guarantee

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant

__all__ = [
    "DagPlan",
    "DatasetCheck",
    "PlannedTask",
    "check_dag",
    "declared_costs",
    "format_checks",
    "parse_time_map_count",
    "plan_dag",
]


@dataclass(frozen=True)
class PlannedTask:
    """One task's declared cost in a DAG plan.

    Attributes
    ----------
    task_id : str
        The task.
    cost : DPCost
        Its declared cost per run (per map index when mapped).
    count : int or None
        How many times one DAG run charges it: 1, the map length, or None when it is mapped over values
        known only at run time.
    source : str
        ``"operator"``, ``"guard"`` or ``"params"`` (declared in ``params["dp_cost"]``).
    enforced : bool
        False for a ``params`` declaration that no guard enforces (the cluster policy is not active).
    """

    task_id: str
    cost: DPCost
    count: int | None
    source: str
    enforced: bool = True


@dataclass(frozen=True)
class DagPlan:
    """The declared costs of one DAG run, per task.

    Attributes
    ----------
    dag_id : str
    tasks : list of PlannedTask
    """

    dag_id: str
    tasks: list[PlannedTask] = field(default_factory=list)

    def datasets(self) -> dict[str, list[PlannedTask]]:
        """The planned tasks grouped by dataset, in order of first appearance."""
        grouped: dict[str, list[PlannedTask]] = {}
        for planned in self.tasks:
            grouped.setdefault(planned.cost.dataset, []).append(planned)
        return grouped

    def for_accountant(self, dataset: str) -> tuple[list[PrivacyEvent], int]:
        """The plan's releases on ``dataset`` as the accountant's plan methods take them, ``(events,
        group_size)``, in the same form as ``dp-pipeline plan check`` (see
        :func:`~dp_pipeline.accounting.composition.group_plan`). Map lengths are repeated; unbounded
        mapped tasks are counted once, as the least they will cost."""
        releases = [
            (planned.cost.event, planned.cost.group_size)
            for planned in self.datasets().get(dataset, [])
            for _ in range(planned.count if planned.count is not None else 1)
        ]
        return group_plan(releases)


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
    fits_budget, fits_remaining : bool
        Whether one DAG run fits the whole budget, and what remains of it now.
    problems : list of str
        Why the plan does not fit: one run exceeds the budget, the dataset has no budget, or the plan cannot
        be composed.
    warnings : list of str
        What the check cannot vouch for: mapped tasks not bounded before they run, costs declared in params
        that no guard enforces.
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

    @property
    def ok(self) -> bool:
        """True when one run of the plan fits the dataset's whole budget."""
        return self.fits_budget and not self.problems


def parse_time_map_count(task: Any) -> int | None:
    """How many task instances one run creates for ``task``: 1 for a plain task, the product of the literal
    map lengths for a mapped task (and its mapped task groups), None when a length is known only at run
    time."""
    count = _expand_input_count(task) if _is_mapped(task) else 1
    group = getattr(task, "task_group", None)
    while group is not None and count is not None:
        if _is_mapped(group):
            inner = _expand_input_count(group)
            count = None if inner is None else count * inner
        group = getattr(group, "parent_group", None)
    return count


def _is_mapped(node: Any) -> bool:
    return bool(getattr(node, "is_mapped", False)) or hasattr(node, "_expand_input")


def _expand_input_count(node: Any) -> int | None:
    getter = getattr(node, "_get_specified_expand_input", None)
    expand_input = getter() if getter is not None else getattr(node, "_expand_input", None)
    value = getattr(expand_input, "value", None)
    if isinstance(value, Mapping):  # expand(**kwargs): the cross product of the lists
        count = 1
        for item in value.values():
            if not _is_literal_sequence(item):
                return None
            count *= len(item)
        return count
    if isinstance(value, Sequence) and _is_literal_sequence(value):  # expand_kwargs([...])
        return len(value)
    return None


def _is_literal_sequence(value: Any) -> bool:
    from airflow.sdk.definitions._internal.expandinput import MappedArgument
    from airflow.sdk.definitions.xcom_arg import XComArg

    if isinstance(value, (XComArg, MappedArgument, str, bytes)):
        return False
    if isinstance(value, Mapping):
        return True
    if isinstance(value, Sequence):
        return not any(isinstance(item, (XComArg, MappedArgument)) for item in value)
    return False


def declared_costs(task: Any, *, params_enforced: bool = False) -> list[tuple[DPCost, str, bool]]:
    """The costs a task declares, as ``(cost, source, enforced)``: its own (operator or decorator), its
    guards', and a ``params["dp_cost"]`` spec (enforced once a guard carries it, or when
    ``params_enforced`` says the cluster policy will attach one)."""
    found: list[tuple[DPCost, str, bool]] = []
    own = operator_cost(task)
    if own is not None:
        found.append((own, "operator", True))
    guards = list(iter_guards(task))
    found.extend((guard.cost, "guard", True) for guard in guards)
    spec = params_spec(task)
    if spec is not None:
        cost = spec_to_cost(spec)
        if not any(cost == guard.cost for guard in guards):
            found.append((cost, "params", params_enforced))
    return found


def plan_dag(dag: Any, *, params_enforced: bool = False) -> DagPlan:
    """Collect the declared costs of one run of ``dag``, without any I/O.

    Parameters
    ----------
    dag : airflow.sdk.DAG
    params_enforced : bool, default False
        Whether ``params["dp_cost"]`` declarations are enforced (the cluster policy is active) even where
        no guard is attached yet.

    Returns
    -------
    DagPlan
    """
    tasks = [
        PlannedTask(task.task_id, cost, parse_time_map_count(task), source, enforced)
        for task in dag.tasks
        for cost, source, enforced in declared_costs(task, params_enforced=params_enforced)
    ]
    return DagPlan(dag_id=dag.dag_id, tasks=tasks)


def check_dag(dag_or_plan: Any, accountant: PrivacyAccountant) -> list[DatasetCheck]:
    """Ask the accountant whether each dataset's part of the plan fits its budget and what remains of it.

    Parameters
    ----------
    dag_or_plan : DAG or DagPlan
        The DAG (or its plan from :func:`plan_dag`).
    accountant : PrivacyAccountant
        The ledger holding the budgets (only read).

    Returns
    -------
    list of DatasetCheck
        One per dataset the DAG charges.
    """
    plan = dag_or_plan if isinstance(dag_or_plan, DagPlan) else plan_dag(dag_or_plan)
    checks = []
    for dataset, tasks in plan.datasets().items():
        problems: list[str] = []
        warnings: list[str] = []
        unbounded = [t.task_id for t in tasks if t.count is None]
        if unbounded:
            warnings.append(
                f"mapped over run-time values, so not bounded before it runs: {', '.join(unbounded)} "
                "(counted once)"
            )
        unenforced = [t.task_id for t in tasks if not t.enforced]
        if unenforced:
            warnings.append(
                f"cost declared in params but not enforced (enable airflow_plugin.policies.task_policy): "
                f"{', '.join(unenforced)}"
            )
        budget = dataset_budget(accountant, dataset)
        total: Guarantee | None = None
        method = ""
        remaining: Guarantee | None = None
        fits_budget = fits_remaining = False
        relation = None if budget is None else accountant.relation(dataset)
        if budget is None:
            problems.append(f"dataset {dataset!r} has no budget on the ledger; every task would be refused")
        else:
            events, group_size = plan.for_accountant(dataset)
            remaining = accountant.remaining(dataset).guarantee
            try:
                # The accountant's one plan check, against the whole budget and against what remains.
                report = accountant.plan_cost(dataset, events, group_size, against="budget")
                total, method = report.guarantee, report.method
                fits_budget = accountant.plan_fits(dataset, events, group_size, against="budget")
                fits_remaining = accountant.plan_fits(dataset, events, group_size)
            except Exception as exc:
                problems.append(f"the plan cannot be composed: {type(exc).__name__}: {exc}")
        if total is not None and budget is not None and not fits_budget:
            needs, whole = format_guarantee(total), format_guarantee(budget)
            problems.append(f"one run needs {needs} but the whole budget is {whole}")
        checks.append(
            DatasetCheck(
                dag_id=plan.dag_id,
                dataset=dataset,
                tasks=tasks,
                total=total,
                method=method,
                budget=budget,
                remaining=remaining,
                fits_budget=fits_budget,
                fits_remaining=fits_remaining,
                relation=relation,
                problems=problems,
                warnings=warnings,
            )
        )
    return checks


def format_checks(checks: Iterable[DatasetCheck]) -> str:
    """A plain-text table of checks, one line per DAG and dataset, with the problems below."""
    rows = [("DAG", "dataset", "relation", "tasks", "plan total", "method", "budget", "remaining", "verdict")]
    notes: list[str] = []
    for check in checks:
        runs = sum(t.count if t.count is not None else 1 for t in check.tasks)
        if not check.ok:
            verdict = "EXCEEDS BUDGET" if check.total is not None else "REFUSED"
        else:
            verdict = "ok" if check.fits_remaining else "exceeds remaining"
        rows.append(
            (
                check.dag_id,
                check.dataset,
                check.relation or "-",
                str(runs),
                format_guarantee(check.total),
                check.method or "-",
                format_guarantee(check.budget),
                format_guarantee(check.remaining),
                verdict,
            )
        )
        notes.extend(f"  {check.dag_id} / {check.dataset}: {problem}" for problem in check.problems)
        notes.extend(f"  {check.dag_id} / {check.dataset}: warning: {note}" for note in check.warnings)
    shown = [[printable(cell) for cell in row] for row in rows]  # names and labels are user-written
    widths = [max(len(row[i]) for row in shown) for i in range(len(shown[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in shown]
    return "\n".join(lines + [printable(note) for note in notes])
