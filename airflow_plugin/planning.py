"""DAG-level planning: compose a DAG's declared privacy costs per dataset, before anything runs.

Every DP task declares its cost when the DAG is defined, so one run of a DAG is a plan fixed in advance.
:func:`plan_dag` collects the costs without any I/O; :func:`check_dag` asks the accountant's one plan check
for each dataset: :meth:`PrivacyAccountant.plan_cost <dp_pipeline.PrivacyAccountant.plan_cost>` for the
tight total, and :meth:`~dp_pipeline.PrivacyAccountant.plan_fits` against the whole budget and against what
remains, as ``dp-pipeline plan check`` does. ``python -m airflow_plugin.check DAG_FOLDER`` runs the check
over a DAG folder, and :mod:`airflow_plugin.policies` can refuse such a DAG when it is parsed.

What a plan counts, so that no run can cost more than the check says:

- every task on every branch (an upper bound: branches not taken are still counted);
- every attempt that can start the task's code: ``retries + 1`` per task (a refused attempt is not retried,
  and one that fails before its code runs is released, but each one that starts is charged);
- a mapped task once per map index: the literal map length when the mapped values are known when the DAG is
  parsed, else its declared ``max_map_length``, else Airflow's ``[core] max_map_length``. The task refuses
  a map index beyond its bound before it reads data (see :func:`airflow_plugin._runtime.check_map_index`);
- the dataset a run charges: a templated name (``dataset="visits/{{ ds }}"``) is rendered for the logical
  date given to the check (``check_dag(dag, acct, logical_date=...)``, ``--logical-date``). A name that
  cannot be rendered before the run exists (no date given, or it needs the run id, a Variable, ...) is
  reported per template and not checked against any budget;
- one run of the DAG. Runs add up on the ledger, which is what the comparison with the remaining budget shows.
  An attempt started by hand afterwards (a cleared task) is a new attempt beyond the plan.

At run time each task is charged on its own as it starts, and the accountant composes those spends with a
rule that stays valid under adaptive choice; that total can be larger than the tight plan total. A plan that
exceeds the budget can never complete; one that fits the plan may still be stopped part-way at run time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from airflow_plugin._runtime import airflow_max_map_length
from airflow_plugin.costs import DPCost
from airflow_plugin.declared import operator_cost, params_spec, spec_to_cost
from airflow_plugin.guards import iter_guards
from airflow_plugin.reports import dataset_budget, format_guarantee
from airflow_plugin.templating import (
    as_logical_date,
    is_template,
    render_dataset,
    render_for_plan,
    task_context,
)
from dp_pipeline.accounting.composition import group_plan
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError, printable
from dp_pipeline.guarantees import Guarantee

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant

LogicalDate = dt.datetime | dt.date | str
MapBound = Literal["unmapped", "literal", "declared", "airflow"]

__all__ = [
    "DagPlan",
    "DatasetCheck",
    "PlannedTask",
    "check_dag",
    "declared_costs",
    "format_checks",
    "map_bound",
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
        Its declared cost per attempt, on the dataset the planned run charges (the rendered name).
    count : int
        The most map indexes one DAG run charges: 1 for a task that is not mapped.
    source : str
        ``"operator"``, ``"guard"`` or ``"params"`` (declared in ``params["dp_cost"]``).
    enforced : bool
        False for a ``params`` declaration that no guard enforces (the cluster policy is not active).
    attempts : int
        The attempts of each task instance that can start its code: ``retries + 1``.
    bound : str
        Where ``count`` comes from: ``"unmapped"``, ``"literal"`` (mapped over values known when the DAG is
        parsed), ``"declared"`` (its ``max_map_length``) or ``"airflow"`` (Airflow's ``[core]
        max_map_length``).
    template : str or None
        The declared dataset name when it is a template.
    unrendered : str or None
        Why the template could not be rendered for the plan (then ``cost.dataset`` is the template itself).
    """

    task_id: str
    cost: DPCost
    count: int
    source: str
    enforced: bool = True
    attempts: int = 1
    bound: MapBound = "unmapped"
    template: str | None = None
    unrendered: str | None = None

    @property
    def releases(self) -> int:
        """How many times one run may charge the cost: map indexes × attempts."""
        return self.count * self.attempts


@dataclass(frozen=True)
class DagPlan:
    """The declared costs of one DAG run, per task.

    Attributes
    ----------
    dag_id : str
    tasks : list of PlannedTask
    logical_date : str or None
        The logical date templated dataset names were rendered for (ISO format), if one was given.
    """

    dag_id: str
    tasks: list[PlannedTask] = field(default_factory=list)
    logical_date: str | None = None

    def datasets(self) -> dict[str, list[PlannedTask]]:
        """The planned tasks grouped by dataset, in order of first appearance."""
        grouped: dict[str, list[PlannedTask]] = {}
        for planned in self.tasks:
            grouped.setdefault(planned.cost.dataset, []).append(planned)
        return grouped

    def for_accountant(self, dataset: str) -> tuple[list[PrivacyEvent], int]:
        """The plan's releases on ``dataset`` as the accountant's plan methods take them, ``(events,
        group_size)``, in the same form as ``dp-pipeline plan check`` (see
        :func:`~dp_pipeline.accounting.composition.group_plan`). Each task's cost is repeated once per
        map index and attempt (:attr:`PlannedTask.releases`)."""
        releases = [
            (planned.cost.event, planned.cost.group_size)
            for planned in self.datasets().get(dataset, [])
            for _ in range(planned.releases)
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

    @property
    def ok(self) -> bool:
        """True when one run of the plan was checked and fits the dataset's whole budget."""
        return self.checked and self.fits_budget and not self.problems


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


def _in_mapped_group(task: Any) -> bool:
    group = getattr(task, "task_group", None)
    while group is not None:
        if _is_mapped(group):
            return True
        group = getattr(group, "parent_group", None)
    return False


def map_bound(task: Any, cost: DPCost) -> tuple[int, MapBound]:
    """The most map indexes one run charges ``cost`` for on ``task``, and where that bound comes from.

    A task that is not mapped charges once. A mapped one (or one in a mapped task group) charges at most its
    literal map length, its declared ``max_map_length`` and, when neither is known, Airflow's ``[core]
    max_map_length``: the task refuses any map index beyond the declared or Airflow bound at run time.
    """
    if not (_is_mapped(task) or _in_mapped_group(task)):
        return 1, "unmapped"
    literal = parse_time_map_count(task)
    declared = cost.max_map_length
    if declared is not None and (literal is None or declared < literal):
        return declared, "declared"
    if literal is not None:
        return literal, "literal"
    return airflow_max_map_length(), "airflow"


def _attempts(task: Any) -> int:
    """Attempts of one task instance that can start its code: the first and each retry."""
    retries = getattr(task, "retries", 0) or 0
    return int(retries) + 1


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


Renderer = Callable[[Any, str], "str | None"]
"""Renders a task's templated dataset name for the plan, or returns None when it cannot be rendered yet."""


def _planned(
    task: Any, cost: DPCost, source: str, enforced: bool, render: Renderer, missing: str
) -> PlannedTask:
    count, bound = map_bound(task, cost)
    planned = PlannedTask(task.task_id, cost, count, source, enforced, _attempts(task), bound)
    try:
        if not is_template(task, cost.dataset):
            return planned
        name = render(task, cost.dataset)
    except Exception as exc:  # a template that does not parse or render: every run would fail on it too
        reason = f"it cannot be rendered: {type(exc).__name__}: {exc}"
        return dataclasses.replace(planned, template=cost.dataset, unrendered=reason)
    if name is None:
        return dataclasses.replace(planned, template=cost.dataset, unrendered=f"it needs {missing}")
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
        :mod:`airflow_plugin.templating`). Without it, names that need a date are reported per template.
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
    return DagPlan(dag_id=dag.dag_id, tasks=tasks, logical_date=None if date is None else date.isoformat())


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
        One per dataset the DAG charges (per template for names that could not be rendered).

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
    return [_check_dataset(plan, dataset, tasks, accountant) for dataset, tasks in plan.datasets().items()]


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
            f"cost declared in params but not enforced (enable airflow_plugin.policies.task_policy): "
            f"{', '.join(unenforced)}"
        )
    return notes


def _check_dataset(
    plan: DagPlan, dataset: str, tasks: list[PlannedTask], accountant: PrivacyAccountant
) -> DatasetCheck:
    warnings = _notes(tasks)
    unrendered = [t for t in tasks if t.unrendered is not None]
    if unrendered:
        reasons = sorted({f"{t.task_id}: {t.unrendered}" for t in unrendered})
        warnings.append(
            f"the dataset name is the template {dataset!r}, not checked against any budget ("
            f"{'; '.join(reasons)}); check a run's rendered names with a logical date "
            "(check_dag(..., logical_date=...), --logical-date)"
        )
        return DatasetCheck(
            plan.dag_id, dataset, tasks, None, "", None, None, False, False, warnings=warnings, checked=False
        )
    problems: list[str] = []
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
        except Exception as exc:
            problems.append(f"the plan cannot be composed: {type(exc).__name__}: {exc}")
        else:
            try:
                fits_remaining = accountant.plan_fits(dataset, events, group_size)
            except Exception as exc:  # e.g. no finite ε at the δ left: it cannot be charged now
                warnings.append(f"cannot be charged on what remains: {type(exc).__name__}: {exc}")
    if total is not None and budget is not None and not fits_budget:
        needs, whole = format_guarantee(total), format_guarantee(budget)
        problems.append(f"one run needs {needs} but the whole budget is {whole}")
    return DatasetCheck(
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


def format_checks(checks: Iterable[DatasetCheck]) -> str:
    """A plain-text table of checks, one line per DAG and dataset, with the problems below."""
    columns = ("DAG", "dataset", "relation", "releases", "plan total", "method", "budget", "remaining")
    rows = [(*columns, "verdict")]
    notes: list[str] = []
    for check in checks:
        runs = sum(t.releases for t in check.tasks)
        if not check.checked:
            verdict = "UNCHECKED (template)"
        elif not check.ok:
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
