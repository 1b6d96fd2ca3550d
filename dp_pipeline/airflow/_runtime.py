"""What every DP task does at run time: build the attempt's key, reserve its cost, explain a refusal."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from dp_pipeline.accounting.partitions import locate_partition
from dp_pipeline.airflow.costs import DPCost
from dp_pipeline.airflow.declared import operator_cost
from dp_pipeline.airflow.exceptions import (
    AttemptAlreadyChargedError,
    PrivacyBudgetExhausted,
    PrivacyBudgetSkipped,
    PrivacyCostError,
)
from dp_pipeline.airflow.templating import render_dataset
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    ScopedSpendError,
    UnsupportedCompositionError,
    printable,
)

if TYPE_CHECKING:
    from dp_pipeline.accounting.accountant import PrivacyAccountant

__all__ = [
    "OnExhausted",
    "airflow_max_map_length",
    "attempt_key",
    "attempt_label",
    "charged_cost",
    "check_map_index",
    "check_mapped_cost",
    "check_on_exhausted",
    "refusal",
    "reserve_or_refuse",
    "resumption",
    "task_name",
]

log = logging.getLogger(__name__)

OnExhausted = Literal["fail", "skip"]


def attempt_key(context: Mapping[str, Any]) -> str:
    """The idempotency key of one task attempt: ``dag_id/task_id/run_id/map_index/try_number``.

    Every attempt has its own key, so a retry is charged again (it redraws noise), while a second
    delivery of the same attempt is refused (the key pays for one release). Mapped tasks are charged per
    map index.
    """
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{ti.map_index}/{ti.try_number}"


def attempt_label(cost: DPCost, context: Mapping[str, Any]) -> str:
    """The history label: the declared label, or ``dag_id.task_id`` with ``[map_index]`` when mapped."""
    if cost.label:
        return cost.label
    ti = context["ti"]
    suffix = f"[{ti.map_index}]" if ti.map_index is not None and ti.map_index >= 0 else ""
    return f"{ti.dag_id}.{ti.task_id}{suffix}"


def task_name(context: Mapping[str, Any]) -> str:
    """``dag_id.task_id`` (with the map index) for messages."""
    ti = context["ti"]
    suffix = f"[{ti.map_index}]" if ti.map_index is not None and ti.map_index >= 0 else ""
    return f"{ti.dag_id}.{ti.task_id}{suffix}"


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
    :func:`~dp_pipeline.accounting.partitions.locate_partition`).

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


def airflow_max_map_length() -> int:
    """Airflow's ``[core] max_map_length``: the longest list a task may be mapped over (1024 by default)."""
    from airflow.sdk.configuration import conf

    return conf.getint("core", "max_map_length", fallback=1024)


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
        declared.dataset, declared.cost, declared.group_size, declared.max_map_length
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
    except ScopedSpendError:  # run inside another task's code that pays from its reservation: say so
        raise
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


def check_on_exhausted(value: str) -> OnExhausted:
    """Validate ``on_exhausted`` at DAG-definition time."""
    if value not in ("fail", "skip"):
        raise InvalidParameterError(f"'on_exhausted' must be 'fail' or 'skip', got {value!r}", "on_exhausted")
    return value  # type: ignore[return-value]
