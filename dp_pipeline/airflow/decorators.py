"""``@dp_task``: the TaskFlow form of :class:`~dp_pipeline.airflow.operators.PrivacyBudgetOperator`.

Examples
--------
>>> @dp_task(dataset="patients", mechanism=Laplace(epsilon=0.5, sensitivity=1.0))   # doctest: +SKIP
... def count_patients(mechanism):
...     return mechanism.randomize(len(load_patients()))

Once dp-pipeline is installed its provider info also registers the decorator as ``@task.dp(...)``.
The function may declare ``mechanism``, ``accountant`` and ``dataset`` (injected at run time, like Airflow's
context keys) besides its own arguments; declare them after the arguments passed at call time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from dp_pipeline.airflow.operators import INJECTED_ARGUMENTS, PrivacyBudgetOperator

__all__ = ["dp_task"]


def _placeholders(
    python_callable: Callable[..., Any], op_args: Collection[Any], op_kwargs: Mapping[str, Any]
) -> dict[str, None]:
    """Injected arguments the call does not provide, so that the definition-time signature check passes."""
    try:
        parameters = list(inspect.signature(python_callable).parameters.values())
    except (TypeError, ValueError):
        return {}
    positional = [
        p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ][: len(op_args)]
    return {
        p.name: None
        for p in parameters
        if p.name in INJECTED_ARGUMENTS
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in op_kwargs
        and p.name not in positional
    }


class _DPDecoratedOperator(DecoratedOperator, PrivacyBudgetOperator):
    """The operator behind ``@dp_task``: a decorated :class:`PrivacyBudgetOperator`."""

    template_fields: Sequence[str] = ("dataset", "templates_dict", "op_args", "op_kwargs")
    template_fields_renderers = {"templates_dict": "json", "op_args": "py", "op_kwargs": "py"}  # noqa: RUF012
    custom_operator_name: str = "@dp_task"

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        op_args = op_args or ()
        placeholders = _placeholders(python_callable, op_args, op_kwargs or {})
        op_kwargs = {**(op_kwargs or {}), **placeholders}
        super().__init__(
            kwargs_to_upstream={
                "python_callable": python_callable,
                "op_args": op_args,
                "op_kwargs": op_kwargs,
            },
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            **kwargs,
        )
        if placeholders:
            self.op_kwargs = {key: value for key, value in self.op_kwargs.items() if key not in placeholders}


def dp_task(
    python_callable: Callable[..., Any] | None = None, multiple_outputs: bool | None = None, **kwargs: Any
) -> TaskDecorator:
    """Turn a function into a DP task that reserves its privacy cost before it runs.

    Parameters
    ----------
    python_callable : callable, optional
        The function (when used as ``@dp_task(...)`` it is filled in by the decoration).
    multiple_outputs : bool, optional
        Unroll a returned dict into several XComs.
    **kwargs
        ``dataset`` (a template field) and ``mechanism`` (required), ``group_size``, ``label``,
        ``max_map_length``, ``ledger_conn_id``, ``on_exhausted``, and any operator argument (``retries``,
        ``task_id``, ...); see :class:`~dp_pipeline.airflow.operators.PrivacyBudgetOperator`.

    Returns
    -------
    TaskDecorator
        Call it in a DAG like any ``@task`` function; ``.partial(...).expand(...)`` maps it, and every map
        index is charged on its own.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_DPDecoratedOperator,
        **kwargs,
    )
