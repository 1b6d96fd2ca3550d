"""The ``pre_execute`` guard on existing operators (plain and mapped), without running DAGs."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_attach_guard_chains_hooks_and_refuses_a_second_cost() -> None:
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator, attach_guard, dp_guard
    from dp_pipeline.airflow.guards import GuardChain, iter_guards
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    def own_hook(context: object) -> None:
        return None

    with DAG("guards", schedule=None):
        plain = BashOperator(task_id="plain", bash_command="true", pre_execute=own_hook)
        mapped = BashOperator.partial(task_id="mapped").expand(bash_command=["true", "false"])
        dp_op = PrivacyBudgetOperator(
            task_id="dp", dataset="d", mechanism=Laplace(epsilon=0.1, sensitivity=1.0), python_callable=len
        )
    guard = dp_guard("d", PureDP(0.1))
    attach_guard(plain, guard)
    assert isinstance(plain._pre_execute_hook, GuardChain)
    assert plain._pre_execute_hook.then is own_hook  # the task's own hook still runs, after the guard
    assert list(iter_guards(plain)) == [guard]
    with pytest.raises(InvalidParameterError, match="already declares"):
        attach_guard(plain, dp_guard("d", PureDP(0.2)))
    with pytest.raises(InvalidParameterError, match="already declares"):
        attach_guard(dp_op, dp_guard("d", PureDP(0.2)))
    attach_guard(mapped, guard)  # a mapped operator keeps its hooks in its partial kwargs
    assert list(iter_guards(mapped)) == [guard]
    assert isinstance(mapped.partial_kwargs["pre_execute"], GuardChain)
