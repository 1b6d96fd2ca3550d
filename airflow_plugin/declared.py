"""What a task declares: its ledger connection, its own cost, and a cost spec in its params.

A leaf module (it imports no other module of the integration but :mod:`airflow_plugin.costs`, and nothing
of Airflow), so that :mod:`airflow_plugin.planning`, :mod:`airflow_plugin.policies` and the guards read a
task's declarations the same way, and ``airflow_local_settings.py`` can import it while Airflow itself
initialises.

A task declares a cost in one of three places:

- its own: a :class:`~airflow_plugin.operators.PrivacyBudgetOperator` (or ``@dp_task``) holds it as
  ``dp_cost``; mapped, it holds the arguments in its partial kwargs (:func:`operator_cost`);
- a guard on its ``pre_execute`` (:mod:`airflow_plugin.guards`);
- ``params={"dp_cost": {...}}`` on any operator, which the cluster policy turns into a guard
  (:func:`params_spec`, :func:`spec_to_cost`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_plugin.costs import DPCost

__all__ = ["DEFAULT_CONN_ID", "GUARD_KEYS", "operator_cost", "params_spec", "spec_to_cost"]

DEFAULT_CONN_ID = "dp_ledger_default"
"""The Airflow Connection of the ledger when a task, a hook, the DAG check or the dashboard names none."""

GUARD_KEYS = ("ledger_conn_id", "on_exhausted")
"""Keys of a ``params["dp_cost"]`` spec that configure the guard rather than the cost."""


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
        For an invalid spec (see :meth:`DPCost.from_spec <airflow_plugin.costs.DPCost.from_spec>`).
    """
    return DPCost.from_spec({key: value for key, value in spec.items() if key not in GUARD_KEYS})


def operator_cost(task: Any) -> DPCost | None:
    """The cost a task declares as its own, or None.

    A :class:`~airflow_plugin.operators.PrivacyBudgetOperator` (or ``@dp_task``) holds its cost as
    ``dp_cost``. Mapped (``.partial(...).expand(...)``), the operator is not built until it runs: its cost
    is read from the partial kwargs of an operator class that sets ``declares_dp_cost`` (when ``dataset``
    and ``mechanism`` are among them).
    """
    cost = getattr(task, "dp_cost", None)
    if isinstance(cost, DPCost):
        return cost
    kwargs = getattr(task, "partial_kwargs", None)
    operator_class = getattr(task, "operator_class", None)
    if not (isinstance(kwargs, Mapping) and getattr(operator_class, "declares_dp_cost", False) is True):
        return None
    if "dataset" not in kwargs or "mechanism" not in kwargs:
        return None
    return DPCost(
        dataset=kwargs["dataset"],
        cost=kwargs["mechanism"],
        group_size=kwargs.get("group_size", 1),
        label=kwargs.get("label"),
        max_map_length=kwargs.get("max_map_length"),
    )
