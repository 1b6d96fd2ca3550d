"""PrivacyBudgetOperator on real Airflow 3.3, without running DAGs: costs declared without I/O and
validated when the DAG is defined."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.airflow


def test_costs_are_declared_without_io_and_validated_at_definition(tmp_path, monkeypatch) -> None:
    from airflow.sdk import DAG

    from dp_pipeline.airflow import PrivacyBudgetOperator
    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Laplace

    # a connection that would fail if anything opened it while the DAG is defined
    monkeypatch.setenv("AIRFLOW_CONN_DP_LEDGER_DEFAULT", "mysql://nowhere/none")
    with DAG("defined_offline", schedule=None):
        op = PrivacyBudgetOperator(
            task_id="count",
            dataset="patients",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            python_callable=len,
        )
    assert op.dp_cost.dataset == "patients"
    assert op.dp_cost.guarantee.epsilon == 0.5
    with DAG("bad_costs", schedule=None), pytest.raises(InvalidParameterError, match="mechanism"):
        PrivacyBudgetOperator(task_id="bad", dataset="patients", mechanism=0.5, python_callable=len)
    with DAG("bad_group", schedule=None), pytest.raises(InvalidParameterError, match="group_size"):
        PrivacyBudgetOperator(
            task_id="bad",
            dataset="patients",
            mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
            group_size=0,
            python_callable=len,
        )
