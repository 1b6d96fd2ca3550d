"""What a task declares: its ledger connection, its own cost, and a cost spec in its params.

A leaf module (it imports no other module of the integration but :mod:`dp_pipeline.airflow.costs`, and nothing
of Airflow), so that :mod:`dp_pipeline.airflow.planning`, :mod:`dp_pipeline.airflow.policies` and the guards
read a
task's declarations the same way, and ``airflow_local_settings.py`` can import it while Airflow itself
initialises.

A task declares a cost in one of three places:

- its own: a :class:`~dp_pipeline.airflow.operators.PrivacyBudgetOperator` (or ``@dp_task``) holds it as
  ``dp_cost``; mapped, it holds the arguments in its partial kwargs (:func:`operator_cost`);
- a guard on its ``pre_execute`` (:mod:`dp_pipeline.airflow.guards`);
- ``params={"dp_cost": {...}}`` on any operator, which the cluster policy turns into a guard
  (:func:`params_spec`, :func:`spec_to_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.exceptions import InvalidParameterError

__all__ = [
    "COST_ARGUMENTS",
    "DEFAULT_CONN_ID",
    "GUARD_KEYS",
    "check_guard_not_mapped",
    "expand_value",
    "operator_cost",
    "params_spec",
    "spec_to_cost",
]

DEFAULT_CONN_ID = "dp_ledger_default"
"""The Airflow Connection of the ledger when a task, a hook, the DAG check or the dashboard names none."""

GUARD_KEYS = ("ledger_conn_id", "on_exhausted")
"""Keys of a ``params["dp_cost"]`` spec that configure the guard rather than the cost."""

COST_ARGUMENTS = ("dataset", "mechanism", "group_size", "max_map_length")
"""The arguments of a DP operator that make its cost: a mapped one may not map over them."""


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
