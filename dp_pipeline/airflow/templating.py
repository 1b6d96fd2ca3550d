"""Dataset names written as Jinja templates (``dataset="visits/{{ ds }}"``).

A run charges the name rendered in its own context: the operators render ``dataset`` as one of their
``template_fields``, a guard renders its cost's dataset with :func:`render_dataset`. Both use the DAG's
Jinja environment, so a name renders to the same text in a task and in the DAG check.

The DAG check has no run: :func:`render_for_plan` renders a name for a given logical date, from what is known
before the run exists (the date keys ``logical_date``, ``ds``, ``ds_nodash``, ``ts``, ``ts_nodash`` and
``ts_nodash_with_tz``, ``params`` at their defaults, ``macros``, ``dag`` and ``task``). A name that needs
anything else (the run id, the data interval, a Variable, the task instance) is reported per template.

On a dataset declared partitioned, ``visits/{{ ds }}`` names partition ``{{ ds }}`` of dataset ``visits``
(:func:`template_partition`): the DAG check without a logical date checks it as a partition that has spent
nothing (what a new day costs), and a run charges the partition its name renders to (see
:func:`~dp_pipeline.airflow.partition_names.locate_partition`).

A name rendered from ``params`` can be changed when a run is triggered (``dag_run.conf`` overrides params by
default), and then charges the budget of whatever dataset the trigger names: keep dataset templates to the
logical date.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from dp_pipeline.airflow.partition_names import PARTITION_SEPARATOR
from dp_pipeline.exceptions import InvalidParameterError

__all__ = [
    "DATE_KEYS",
    "as_logical_date",
    "is_template",
    "plan_context",
    "render_dataset",
    "render_for_plan",
    "task_context",
    "template_partition",
]

_INSTANCE_KEYS = frozenset({"ti", "task_instance", "task_instance_key_str", "map_index_template"})

DATE_KEYS = ("logical_date", "ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz")
"""The context keys the check renders from a logical date, computed as Airflow's task runner does."""


def _environment(task: Any) -> Any:
    return task.get_template_env()


def is_template(task: Any, text: str) -> bool:
    """Whether ``text`` holds Jinja syntax in the task's template environment (anything but plain text)."""
    from jinja2 import nodes

    body = _environment(task).parse(text).body
    return not all(
        isinstance(node, nodes.Output) and all(isinstance(part, nodes.TemplateData) for part in node.nodes)
        for node in body
    )


def template_partition(task: Any, text: str) -> tuple[str, str] | None:
    """A templated dataset name whose dataset part is plain text, split into that dataset and its
    partition's template: ``"visits/{{ ds }}"`` → ``("visits", "{{ ds }}")``.

    The split is at the last ``/`` before the first Jinja syntax, as the rendered name is split at its last
    ``/``. None when there is no such ``/`` (the dataset part is itself templated, e.g.
    ``"{{ params.name }}/{{ ds }}"``) or when plain text after it holds a ``/`` (``"visits/{{ ds }}/x"``,
    which renders to another dataset's partition). A partition template whose Jinja renders a ``/`` is not
    detected here: its runs charge another name, which then needs a budget of its own.
    """
    tokens = list(_environment(task).lex(text))
    if not tokens or tokens[0][1] != "data":
        return None
    prefix = tokens[0][2]
    cut = prefix.rfind(PARTITION_SEPARATOR)
    if cut <= 0 or any(kind == "data" and PARTITION_SEPARATOR in value for _, kind, value in tokens[1:]):
        return None
    return prefix[:cut], text[cut + 1 :]


def render_dataset(task: Any, text: str, context: Mapping[str, Any]) -> str:
    """The dataset name ``text`` rendered in ``context`` with the task's (its DAG's) Jinja environment.

    Raises
    ------
    InvalidParameterError
        The template cannot be rendered, or renders to something that is not a non-empty string.
    """
    if not is_template(task, text):
        return text
    from jinja2 import TemplateError

    try:
        rendered = _environment(task).from_string(text).render(**context)
    except Exception as exc:  # jinja2 errors, and whatever a filter or macro raises
        # Jinja's own errors are about the template; another error's message may quote a value the
        # template read (a Variable, a parameter), so only its type is shown.
        hidden = " (its message is not shown: it may quote a value)"
        detail = f": {exc}" if isinstance(exc, TemplateError) else hidden
        raise InvalidParameterError(
            f"the dataset name template {text!r} cannot be rendered: {type(exc).__name__}{detail}", "dataset"
        ) from exc
    if not isinstance(rendered, str) or not rendered:
        raise InvalidParameterError(
            f"the dataset name template {text!r} must render to a non-empty string", "dataset"
        )
    return rendered


def as_logical_date(value: dt.datetime | dt.date | str) -> Any:
    """A logical date in UTC, as a run holds it: a naive datetime or a date is read as UTC, a string is
    parsed as Airflow parses dates (``2026-03-02``, ``2026-03-02T06:00:00+01:00``).

    Raises
    ------
    InvalidParameterError
        For a string that is not a date, or a value of another type.
    """
    from airflow.sdk import timezone

    if isinstance(value, str):
        try:
            return timezone.convert_to_utc(timezone.parse(value))
        except Exception as exc:  # pendulum's ParserError, ValueError
            raise InvalidParameterError(
                f"the logical date {value!r} is not a date (e.g. 2026-03-02 or 2026-03-02T06:00:00+00:00)",
                "logical_date",
            ) from exc
    if isinstance(value, dt.datetime):
        return timezone.convert_to_utc(timezone.coerce_datetime(value))
    if isinstance(value, dt.date):
        return timezone.coerce_datetime(dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC))
    raise InvalidParameterError(
        f"the logical date must be a datetime, a date or a string, got {type(value).__name__}", "logical_date"
    )


def plan_context(task: Any, logical_date: dt.datetime | dt.date | str | None) -> dict[str, Any]:
    """The part of a task's template context known before its run exists.

    Parameters
    ----------
    task : operator
        The task (plain or mapped).
    logical_date : datetime, date, str or None
        The run's logical date (a naive one is read as UTC; a string is parsed as Airflow parses dates); no
        date keys without it.
    """
    from airflow.sdk.definitions.param import process_params
    from airflow.sdk.execution_time.context import MacrosAccessor

    context: dict[str, Any] = {
        "dag": task.dag,
        "task": task,
        "params": process_params(task.dag, task, None, suppress_exception=True),
        "macros": MacrosAccessor(),
    }
    if logical_date is not None:
        date = as_logical_date(logical_date)
        ds = date.strftime("%Y-%m-%d")
        ts = date.isoformat()
        context.update(
            {
                "logical_date": date,
                "ds": ds,
                "ds_nodash": ds.replace("-", ""),
                "ts": ts,
                "ts_nodash": date.strftime("%Y%m%dT%H%M%S"),
                "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
            }
        )
    return context


def task_context(task: Any, run_context: Mapping[str, Any]) -> dict[str, Any]:
    """The template context ``task`` would render in, built from another task's context in the same run:
    the same run (date, run id, conf), with the task and its params (the run's ``conf`` applied as Airflow
    applies it), and without the other task's instance (a name that needs its own cannot be rendered).
    """
    from airflow.sdk.definitions.param import process_params

    dag_run = run_context.get("dag_run")
    conf = getattr(dag_run, "conf", None) or None
    params = process_params(task.dag, task, conf, suppress_exception=True)
    shared = {key: value for key, value in run_context.items() if key not in _INSTANCE_KEYS}
    return {**shared, "task": task, "params": params}


def render_for_plan(task: Any, text: str, logical_date: dt.datetime | dt.date | str | None) -> str | None:
    """The dataset name a run with ``logical_date`` charges, or None when it needs what only a run knows.

    Raises
    ------
    InvalidParameterError
        The template uses only known keys but cannot be rendered (or renders to an empty name), or
        renders to different names when rendered twice.
    """
    from jinja2 import meta

    if not is_template(task, text):
        return text
    context = plan_context(task, logical_date)
    environment = _environment(task)
    needed = meta.find_undeclared_variables(environment.parse(text)) - set(environment.globals)
    if not needed <= set(context):
        return None
    name = render_dataset(task, text, context)
    if render_dataset(task, text, context) != name:  # e.g. a random filter: the run renders its own
        raise InvalidParameterError(
            f"the dataset template {text!r} renders to a different name each time, so no check can know "
            "which dataset a run charges; make the name depend only on the run (its dates, params)",
            "dataset",
        )
    return name
