"""The names and idempotency keys of DP task attempts and run reservations, and the XComs they leave.

A leaf module (it imports nothing of the integration), so that the attempt, the run budget, the share
calibration and the reports name attempts and runs the same way without importing one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ATTEMPT_XCOM_KEY",
    "RUN_KEY_PREFIX",
    "SETTLED_XCOM_KEY",
    "attempt_key",
    "role_task",
    "run_key",
    "task_name",
]

ATTEMPT_XCOM_KEY = "dp_pipeline_attempt"
"""The XCom in which a DP task attempt of a run-budgeted DAG records its try number before its code starts."""

SETTLED_XCOM_KEY = "dp_pipeline_settled"
"""The XCom in which the teardown records that it settled the run's reservations."""

RUN_KEY_PREFIX = "run/"
"""How the keys of run reservations begin (task attempts' keys begin with their DAG id)."""


def attempt_key(context: Mapping[str, Any]) -> str:
    """The idempotency key of one task attempt: ``dag_id/task_id/run_id/map_index/try_number``.

    Every attempt has its own key, so a retry is charged again (it redraws noise), while a second
    delivery of the same attempt is refused (the key pays for one release). Mapped tasks are charged per
    map index.
    """
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.task_id}/{ti.run_id}/{ti.map_index}/{ti.try_number}"


def task_name(context: Mapping[str, Any]) -> str:
    """``dag_id.task_id`` (with ``[map_index]`` when mapped), for messages and default history labels."""
    ti = context["ti"]
    suffix = f"[{ti.map_index}]" if ti.map_index is not None and ti.map_index >= 0 else ""
    return f"{ti.dag_id}.{ti.task_id}{suffix}"


def run_key(dag_id: str, run_id: str, partition: str | None = None) -> str:
    """The idempotency key of a run's reservation on a dataset: ``run/<dag_id>/<run_id>`` for the releases
    that read the whole dataset, ``run/<dag_id>/<run_id>/<partition>`` for those on one of its partitions
    (Airflow's run ids hold no ``/``)."""
    whole = f"{RUN_KEY_PREFIX}{dag_id}/{run_id}"
    return whole if partition is None else f"{whole}/{partition}"


def role_task(dag: Any, role: str) -> Any:
    """The task of ``dag`` playing ``role`` in a run budget (``"setup"`` or ``"teardown"``), or None."""
    for task in getattr(dag, "tasks", ()):
        if getattr(task, "dp_run_budget_role", None) == role:
            return task
    return None
