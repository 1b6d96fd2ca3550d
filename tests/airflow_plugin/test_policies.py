"""The cluster task policy: a guard for every task declaring ``params["dp_cost"]``, attached once."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_task_policy_attaches_a_guard_once_and_rejects_double_declarations() -> None:
    from airflow.exceptions import AirflowClusterPolicyViolation
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.airflow.guards import iter_guards
    from dp_pipeline.airflow.policies import task_policy
    from dp_pipeline.mechanisms import Laplace

    spec = {"dataset": "d", "epsilon": 0.3, "ledger_conn_id": "other_ledger"}
    with DAG("policy", schedule=None):
        declared = BashOperator(task_id="declared", bash_command="true", params={"dp_cost": spec})
        plain = BashOperator(task_id="plain", bash_command="true")
        twice = PrivacyBudgetOperator(
            task_id="twice",
            dataset="d",
            mechanism=Laplace(epsilon=0.1, sensitivity=1.0),
            python_callable=len,
            params={"dp_cost": {"dataset": "d", "epsilon": 0.1}},
        )
        bad = BashOperator(task_id="bad", bash_command="true", params={"dp_cost": {"dataset": "d"}})
    task_policy(declared)
    task_policy(declared)  # the worker parses the DAG again: still one guard
    (guard,) = iter_guards(declared)
    assert (guard.cost.dataset, guard.cost.cost, guard.ledger_conn_id) == ("d", PureDP(0.3), "other_ledger")
    task_policy(plain)
    assert list(iter_guards(plain)) == []
    with pytest.raises(AirflowClusterPolicyViolation, match="twice"):
        task_policy(twice)
    with pytest.raises(AirflowClusterPolicyViolation, match="invalid params"):
        task_policy(bad)
