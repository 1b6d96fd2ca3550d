"""The Airflow demo runs end to end as a user runs it, and prints the refusal and the budget table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest

from tests.airflow_plugin.conftest import REPO

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]


@pytest.mark.processes
def test_airflow_demo_prints_the_refusal_and_the_budget_table() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DP_PIPELINE_TEST"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))  # this tree's code
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


def _example_dag(dag_id: str) -> Any:
    """The example DAG ``examples/airflow/dags/<dag_id>.py``, imported without errors."""
    from airflow.dag_processing.dagbag import DagBag

    from tests.airflow_plugin.conftest import EXAMPLE_DAGS

    bag = DagBag(dag_folder=str(EXAMPLE_DAGS / f"{dag_id}.py"))
    assert not bag.import_errors
    return bag.dags[dag_id]


def test_weekly_report_pays_its_pandas_aggregates_from_one_run_reservation(any_ledger) -> None:
    """The weekly report (examples/airflow/dags/dp_weekly_report.py) reserves its plan, ε = 0.4 + 0.3 + 0.2
    (pure guarantees add up), before its tasks read the data; its three aggregates are paid from the run's
    reservation and the dataset is charged the plan once. A second run in the same week finds ε = 0.1 left
    and is refused before any task reads the data."""

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import check_dag
    from tests.airflow_plugin._helpers import run_dag, states

    ledger = any_ledger
    ledger.set_budget("patients", PureDP(1.0))
    dag = _example_dag("dp_weekly_report")
    (check,) = check_dag(dag, ledger)
    assert check.total.epsilon == pytest.approx(0.4 + 0.3 + 0.2) and check.ok

    dag_run = run_dag(dag)

    assert set(states(dag_run).values()) == {"success"}
    report = dag_run.get_task_instance("publish").xcom_pull(task_ids="publish")
    assert set(report) == {"patients_by_region", "mean_age", "diabetic"}
    assert set(report["patients_by_region"]) == {"north", "south", "east", "west"}
    history = ledger.history("patients")
    (run,) = [entry for entry in history if entry.paid_from is None]
    assert run.key == f"run/dp_weekly_report/{dag_run.run_id}"
    # the attempts' shares (the aggregates paid within them record their share's cap)
    within = {r.seq for r in ledger.store.records("patients") if r.kind == "pay" and "cap" in r.body}
    paid = [entry for entry in history if entry.paid_from == run.key and entry.seq not in within]
    assert sum(entry.cost.epsilon for entry in paid) == pytest.approx(0.9)
    assert ledger.spent("patients").epsilon == pytest.approx(0.9)

    second = run_dag(dag)

    assert states(second)["dp_reserve_run"] == "failed"
    assert {states(second)[t] for t in ("patients_by_region", "mean_age", "diabetic")} == {"upstream_failed"}
    assert ledger.spent("patients").epsilon == pytest.approx(0.9)


def test_weekly_counts_get_their_noise_from_the_run_share(any_ledger) -> None:
    """The weekly counts (examples/airflow/dags/dp_weekly_counts.py) leave their noise free; the run's share
    ε = 0.5 calibrates them: Laplace scales b with Σ 1/bᵢ = 0.5 (pure releases add up) and the weight-4
    count at half the scale of the others, i.e. b = 8, 8, 4 (solved here), each paid from the run."""

    from dp_pipeline import PureDP
    from dp_pipeline.airflow import check_dag
    from tests.airflow_plugin._helpers import run_dag, states

    ledger = any_ledger
    ledger.set_budget("patients", PureDP(1.0))
    dag = _example_dag("dp_weekly_counts")
    (check,) = check_dag(dag, ledger)
    assert check.ok and check.share == PureDP(0.5)
    scales = {task: release.mechanism.scale for task, release in check.calibrated.items()}
    # b₁ = b₂ = 2·b₃ and 1/b₁ + 1/b₂ + 1/b₃ = 0.5 give b₁ = 8: the least noise that fits, never less
    for task, exact in {"diabetic": 8.0, "over_65": 8.0, "patients": 4.0}.items():
        assert exact <= scales[task] <= exact * (1 + 1e-5)

    dag_run = run_dag(dag)

    assert set(states(dag_run).values()) == {"success"}
    for task in ("diabetic", "over_65", "patients"):
        assert isinstance(dag_run.get_task_instance(task).xcom_pull(task_ids=task), (int, float))
    history = ledger.history("patients")
    (run,) = [entry for entry in history if entry.paid_from is None]
    paid = {entry.events[0].parameters["scale"] for entry in history if entry.paid_from == run.key}
    assert paid == set(scales.values())
    assert run.cost.epsilon <= 0.5 and ledger.spent("patients").epsilon <= 0.5


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
