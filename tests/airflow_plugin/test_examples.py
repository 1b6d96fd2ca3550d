"""The Airflow demo runs end to end as a user runs it, and prints the refusal and the budget table."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.airflow_plugin.conftest import REPO

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]


def test_airflow_demo_prints_the_refusal_and_the_budget_table() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DP_PIPELINE_TEST"))}
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "airflow_demo.py")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=280,
    )
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    check_row = r"dp_patients_report\s+patients\s+replace_one\s+3\s+ε=1\.5\s+basic\s+ε=1\s+ε=1\s+EXCEEDS"
    assert re.search(check_row, out)
    assert re.search(r"sum_of_ages[\s│]+failed", out)  # a Rich table, or plain columns without Rich
    assert "Refused: sum_of_ages raised PrivacyBudgetExhausted (not retried)" in out
    assert re.search(r"patients[\s│]+ε=1[\s│]+ε=1[\s│]+ε=0[\s│]+basic[\s│]+2", out)
    assert "Outcome as expected: two releases committed, the third refused." in out


@pytest.mark.spark
def test_spark_example_dag_releases_once_under_its_reservation(ledger) -> None:
    pytest.importorskip("pyspark")
    from airflow.dag_processing.dagbag import DagBag

    from dp_pipeline import PureDP
    from tests.airflow_plugin._helpers import charges, run_dag, states
    from tests.airflow_plugin.conftest import EXAMPLE_DAGS

    ledger.set_budget("patients", PureDP(1.0))
    bag = DagBag(dag_folder=str(EXAMPLE_DAGS / "dp_patients_spark.py"))
    assert not bag.import_errors
    dag_run = run_dag(bag.dags["dp_patients_spark"])
    assert states(dag_run) == {"mean_age_by_region": "success"}
    assert [status for _, status in charges(ledger, "patients")] == ["committed"]  # the reservation alone
    assert ledger.spent("patients").epsilon == pytest.approx(0.5)
    (ti,) = dag_run.get_task_instances()
    released = ti.xcom_pull(task_ids="mean_age_by_region")
    assert [row["region"] for row in released] == ["north", "south", "east", "west"]
    assert all(0.0 <= row["value"] <= 120.0 for row in released)
