"""What a task declares: its ledger connection, its own cost, and a cost spec in its params.

A leaf module (it imports no other module of the integration but :mod:`dp_pipeline.airflow.costs`, and
nothing of Airflow when it is imported), so that :mod:`dp_pipeline.airflow.planning`,
:mod:`dp_pipeline.airflow.policies` and the guards read a task's declarations the same way, and
``airflow_local_settings.py`` can import it while Airflow itself initialises.

It also holds what the plans are made of: the guards on a task's ``pre_execute`` (:func:`iter_guards`),
the costs each task declares (:func:`declared_costs`, counted per map index with :func:`map_bound`), a
run's budget share (:func:`dag_share`) and a DAG run's plan of them (:class:`DagPlan`, built by
:func:`dp_pipeline.airflow.planning.plan_dag`).

A task declares a cost in one of three places:

- its own: a :class:`~dp_pipeline.airflow.operators.PrivacyBudgetOperator` (or ``@dp_task``) holds it as
  ``dp_cost``; mapped, it holds the arguments in its partial kwargs (:func:`operator_cost`);
- a guard on its ``pre_execute`` (:mod:`dp_pipeline.airflow.guards`);
- ``params={"dp_cost": {...}}`` on any operator, which the cluster policy turns into a guard
  (:func:`params_spec`, :func:`spec_to_cost`).
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dp_pipeline.accounting import group_plan
from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.airflow.keys import role_task
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, PureDP

__all__ = [
    "COST_ARGUMENTS",
    "DEFAULT_CONN_ID",
    "GUARD_KEYS",
    "DagPlan",
    "DeclaredGuard",
    "GuardChain",
    "LogicalDate",
    "MapBound",
    "OnExhausted",
    "PlannedTask",
    "Share",
    "airflow_max_map_length",
    "check_guard_not_mapped",
    "check_on_exhausted",
    "check_share",
    "dag_share",
    "declared_costs",
    "expand_value",
    "iter_guards",
    "map_bound",
    "operator_cost",
    "params_spec",
    "parse_time_map_count",
    "pre_execute_hook",
    "spec_to_cost",
    "task_attempts",
]

DEFAULT_CONN_ID = "dp_ledger_default"
"""The Airflow Connection of the ledger when a task, a hook, the DAG check or the dashboard names none."""

GUARD_KEYS = ("ledger_conn_id", "on_exhausted")
"""Keys of a ``params["dp_cost"]`` spec that configure the guard rather than the cost."""

COST_ARGUMENTS = ("dataset", "mechanism", "group_size", "max_map_length")
"""The arguments of a DP operator that make its cost: a mapped one may not map over them."""


def airflow_max_map_length() -> int:
    """Airflow's ``[core] max_map_length``: the longest list a task may be mapped over (1024 by default), the
    map bound of a mapped task that declares none."""
    from airflow.sdk.configuration import conf

    return conf.getint("core", "max_map_length", fallback=1024)


def params_spec(task: Any) -> Mapping[str, Any] | None:
    """The ``params["dp_cost"]`` spec of a task, or None when it declares none (or its params cannot be
    read)."""
    params = getattr(task, "params", None)
    if params is None:
        return None
    try:
        spec = params.get("dp_cost") if hasattr(params, "get") else None
    except Exception:
        return None
    return spec if isinstance(spec, Mapping) else None


def spec_to_cost(spec: Mapping[str, Any]) -> DPCost:
    """The :class:`DPCost` of a ``params["dp_cost"]`` spec (guard options removed).

    Raises
    ------
    InvalidParameterError
        For an invalid spec (see :meth:`DPCost.from_spec <dp_pipeline.airflow.costs.DPCost.from_spec>`).
    """
    return DPCost.from_spec({key: value for key, value in spec.items() if key not in GUARD_KEYS})


def expand_value(node: Any) -> Any:
    """What a mapped task (or task group) maps over: the mapping of ``expand(**kwargs)``, the list (or
    XCom) of ``expand_kwargs(...)``; None for anything else."""
    getter = getattr(node, "_get_specified_expand_input", None)
    expand_input = getter() if getter is not None else getattr(node, "_expand_input", None)
    return getattr(expand_input, "value", None)


def _mapped_arguments(task: Any) -> set[str]:
    """The arguments a mapped task maps over, as far as they are known when the DAG is parsed (none for a
    list of argument mappings only known at run time)."""
    value = expand_value(task)
    if isinstance(value, Mapping):  # expand(**kwargs)
        return {str(name) for name in value}
    if isinstance(value, list):  # expand_kwargs([...]): the keys of its literal mappings
        return {str(name) for item in value if isinstance(item, Mapping) for name in item}
    return set()


def check_guard_not_mapped(task: Any) -> None:
    """InvalidParameterError when a mapped task maps over its ``pre_execute`` (where a privacy guard sits):
    each map index could carry another guard, or one the plan cannot see."""
    if "pre_execute" in _mapped_arguments(task):
        raise InvalidParameterError(
            f"task {getattr(task, 'task_id', '?')!r} maps over pre_execute, where its privacy guard sits, so "
            "no plan can count it: give the guard in .partial(pre_execute=dp_guard(...)) and map over "
            "the task's other arguments",
            "expand",
        )


def operator_cost(task: Any) -> DPCost | None:
    """The cost a task declares as its own, or None.

    A :class:`~dp_pipeline.airflow.operators.PrivacyBudgetOperator` (or ``@dp_task``) holds its cost as
    ``dp_cost``. Mapped (``.partial(...).expand(...)``), the operator is not built until it runs: its cost
    is read from the partial kwargs of an operator class that sets ``declares_dp_cost``.

    Raises
    ------
    InvalidParameterError
        A mapped DP operator whose cost is not in its partial kwargs: ``dataset`` or ``mechanism`` missing
        there, or one of :data:`COST_ARGUMENTS` among the arguments it maps over (so far as they are known
        when the DAG is parsed): its map indexes could each cost something else, which no plan counts.
    """
    cost = getattr(task, "dp_cost", None)
    if isinstance(cost, DPCost):
        return cost
    kwargs = getattr(task, "partial_kwargs", None)
    operator_class = getattr(task, "operator_class", None)
    if not (isinstance(kwargs, Mapping) and getattr(operator_class, "declares_dp_cost", False) is True):
        return None
    mapped = sorted(_mapped_arguments(task) & set(COST_ARGUMENTS))
    missing = [name for name in ("dataset", "mechanism") if name not in kwargs]
    if mapped or missing:
        raise InvalidParameterError(
            f"task {getattr(task, 'task_id', '?')!r} maps its privacy cost (over "
            f"{', '.join(mapped or missing)}), so no plan can count it: give dataset, mechanism, group_size "
            "and max_map_length in .partial() and map over the callable's arguments",
            "expand",
        )
    return DPCost(
        dataset=kwargs["dataset"],
        cost=kwargs["mechanism"],
        group_size=kwargs.get("group_size", 1),
        label=kwargs.get("label"),
        max_map_length=kwargs.get("max_map_length"),
    )


OnExhausted = Literal["fail", "skip"]


def check_on_exhausted(value: str) -> OnExhausted:
    """Validate ``on_exhausted`` at DAG-definition time."""
    if value not in ("fail", "skip"):
        raise InvalidParameterError(f"'on_exhausted' must be 'fail' or 'skip', got {value!r}", "on_exhausted")
    return value  # type: ignore[return-value]


Share = Guarantee | Mapping[str, Guarantee]
"""A run's budget share: one guarantee for every dataset the run charges, or one per dataset name (the
rendered name, or the template a task declares, e.g. ``"visits/{{ ds }}"``)."""


def check_share(share: Any) -> Share | None:
    """Validate a run's share at DAG-definition time: None, a guarantee, or a mapping of dataset names to
    guarantees.

    Raises
    ------
    InvalidParameterError
        Anything else (an empty name, a value that is not a guarantee).
    """
    guarantees = (PureDP, ApproxDP, GaussianDP)
    if share is None or isinstance(share, guarantees):
        return share
    if not isinstance(share, Mapping):
        raise InvalidParameterError(
            "'share' must be a guarantee (PureDP, ApproxDP, GaussianDP) or a mapping of dataset names to "
            f"guarantees, got {type(share).__name__}",
            "share",
        )
    for name, value in share.items():
        if not isinstance(name, str) or not name:
            raise InvalidParameterError(
                "'share' maps dataset names (non-empty strings) to guarantees", "share"
            )
        if not isinstance(value, guarantees):
            raise InvalidParameterError(
                f"the share of {name!r} must be a PureDP, ApproxDP or GaussianDP guarantee, got "
                f"{type(value).__name__}",
                "share",
            )
    return dict(share)


def dag_share(dag: Any) -> tuple[bool, Share | None]:
    """Whether ``dag`` reserves per run, and the share its runs have (None: no share)."""
    setup = role_task(dag, "setup")
    if setup is None:
        return False, None
    return True, check_share(getattr(setup, "share", None))


# ------------------------------------------------------------------------------------------------------
# guards: a cost declared on a task's pre_execute


PreExecuteHook = Callable[[Any], Any]


class DeclaredGuard(abc.ABC):
    """What a privacy guard declares: a task's cost, its ledger connection, and how a refusal ends the task.

    The guard itself (:class:`~dp_pipeline.airflow.guards.PrivacyBudgetGuard`) adds what it does when the
    task runs; the DAG check, the run budget and the cluster policy read only this.

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

    @abc.abstractmethod
    def __call__(self, context: Mapping[str, Any]) -> None:
        """Charge the attempt or refuse the task (:class:`~dp_pipeline.airflow.guards.PrivacyBudgetGuard`)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeclaredGuard):
            return NotImplemented
        return (self.cost, self.ledger_conn_id, self.on_exhausted) == (
            other.cost,
            other.ledger_conn_id,
            other.on_exhausted,
        )

    def __hash__(self) -> int:
        return hash((self.cost.dataset, self.ledger_conn_id, self.on_exhausted))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cost.describe()}, ledger_conn_id={self.ledger_conn_id!r})"


class GuardChain:
    """Run a privacy guard, then the ``pre_execute`` hook the task already had."""

    def __init__(self, guard: DeclaredGuard, then: PreExecuteHook | None) -> None:
        self.guard = guard
        self.then = then

    def __call__(self, context: Mapping[str, Any]) -> None:
        """The guard first: a refused task runs none of its own hooks."""
        self.guard(context)
        if self.then is not None:
            self.then(context)

    def __repr__(self) -> str:
        return f"GuardChain({self.guard!r}, then={self.then!r})"


def pre_execute_hook(task: Any) -> PreExecuteHook | None:
    """The hook on a task's ``pre_execute`` (in its partial kwargs when mapped), or None."""
    partial_kwargs = getattr(task, "partial_kwargs", None)
    if isinstance(partial_kwargs, dict):  # a mapped operator: its hooks live in the partial kwargs
        return partial_kwargs.get("pre_execute")
    return getattr(task, "_pre_execute_hook", None)


def iter_guards(task: Any) -> Iterator[DeclaredGuard]:
    """The privacy guards on a task (plain or mapped), in the order they run."""
    hook = pre_execute_hook(task)
    while hook is not None:
        if isinstance(hook, DeclaredGuard):
            yield hook
            return
        if isinstance(hook, GuardChain):
            yield hook.guard
            hook = hook.then
            continue
        return


# ------------------------------------------------------------------------------------------------------
# a DAG run's declared costs


LogicalDate = dt.datetime | dt.date | str
MapBound = Literal["unmapped", "literal", "declared", "airflow"]


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
        Why the template could not be rendered for the plan (then ``cost.dataset`` is the template itself,
        unless ``new_partition``).
    split : (str, str) or None
        For a template not rendered: its plain dataset part and its partition's template
        (:func:`~dp_pipeline.airflow.templating.template_partition`), when only the partition is templated.
    new_partition : bool
        Located on a partitioned dataset from ``split``: ``cost`` names its dataset and a partition that has
        spent nothing, standing for the partition the template renders to (see :func:`locate_plan`).
    unlocated : str or None
        Why the rendered name cannot be charged on the ledger (it names a partition of a dataset that is not
        partitioned); ``cost.dataset`` is then the rendered name.
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
    split: tuple[str, str] | None = None
    new_partition: bool = False
    unlocated: str | None = None

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
    run_budget : bool
        Whether the DAG reserves its plan per run (:func:`dp_pipeline.airflow.runs.run_budget`).
    share : Guarantee, mapping or None
        The budget share each run has, which calibrates the tasks that leave their noise free (see
        :mod:`dp_pipeline.airflow.allocating`).
    """

    dag_id: str
    tasks: list[PlannedTask] = field(default_factory=list)
    logical_date: str | None = None
    run_budget: bool = False
    share: Share | None = None

    def datasets(self) -> dict[str, list[PlannedTask]]:
        """The planned tasks grouped by dataset, in order of first appearance."""
        grouped: dict[str, list[PlannedTask]] = {}
        for planned in self.tasks:
            grouped.setdefault(planned.cost.dataset, []).append(planned)
        return grouped

    def groups(self) -> dict[tuple[str, str | None], list[PlannedTask]]:
        """The planned tasks grouped by dataset and partition (None: the whole dataset), in order of first
        appearance: what one run charges as one plan each (see :func:`locate_plan`)."""
        grouped: dict[tuple[str, str | None], list[PlannedTask]] = {}
        for planned in self.tasks:
            grouped.setdefault((planned.cost.dataset, planned.cost.partition), []).append(planned)
        return grouped

    def for_accountant(self, dataset: str, partition: str | None = None) -> tuple[list[PrivacyEvent], int]:
        """The plan's releases on ``dataset`` (on ``partition``, or those on the whole dataset) as the
        accountant's plan methods take them, ``(events, group_size)``, in the same form as ``dp-pipeline
        plan check`` (see :func:`~dp_pipeline.accounting.group_plan`). Each task's cost is
        repeated once per map index and attempt (:attr:`PlannedTask.releases`)."""
        releases = [
            (planned.cost.event, planned.cost.group_size)
            for planned in self.groups().get((dataset, partition), [])
            for _ in range(planned.releases)
        ]
        return group_plan(releases)


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


def task_attempts(task: Any) -> int:
    """Attempts of one task instance that can start its code: the first and each retry."""
    retries = getattr(task, "retries", 0) or 0
    return int(retries) + 1


def _is_mapped(node: Any) -> bool:
    return bool(getattr(node, "is_mapped", False)) or hasattr(node, "_expand_input")


def _expand_input_count(node: Any) -> int | None:
    value = expand_value(node)
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
    check_guard_not_mapped(task)
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
