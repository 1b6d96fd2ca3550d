"""Three DP releases about one patients table, on a budget that pays for two.

The ledger gives dataset ``patients`` a budget of ε = 1 (``acct.set_budget("patients", PureDP(1.0))``;
examples/airflow_demo.py does it on a temporary ledger). Each task releases one statistic with Laplace noise
at ε = 0.5 and declares that cost here, when the DAG is defined. The first two tasks reserve and spend the
whole budget; the third is refused before it reads the data and fails without retry
(``PrivacyBudgetExhausted``), and the ledger shows two commits.

The three tasks show two ways to declare a cost: the operator and the TaskFlow decorator (the guard for any
operator is in dp_patients_by_region.py).
``python -m dp_pipeline.airflow.check examples/airflow/dags`` reports this DAG's plan (ε = 1.5 against a
budget of 1) before anything runs.
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from airflow.sdk import dag

from dp_pipeline.airflow import PrivacyBudgetOperator, dp_task
from dp_pipeline.mechanisms import Laplace

DATASET = "patients"
DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "patients.csv"
MAX_AGE = 120.0  # ages are clipped to [0, MAX_AGE], so one patient changes a sum of ages by at most MAX_AGE


def load_patients() -> list[dict[str, str]]:
    """Read the patients table (this is the moment a task touches the data)."""
    with DATA_FILE.open(newline="") as handle:
        return list(csv.DictReader(handle))


def count_diabetic(mechanism: Laplace) -> float:
    """Noisy number of diabetic patients (a count: sensitivity 1)."""
    true_count = sum(int(row["diabetic"]) for row in load_patients())
    return round(float(mechanism.randomize(float(true_count))), 2)


@dag(
    dag_id="dp_patients_report",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    tags=["dp-pipeline", "example"],
    doc_md=__doc__,
)
def dp_patients_report() -> None:
    count = PrivacyBudgetOperator(
        task_id="count_diabetic",
        dataset=DATASET,
        mechanism=Laplace(epsilon=0.5, sensitivity=1.0),
        python_callable=count_diabetic,
    )

    @dp_task(dataset=DATASET, mechanism=Laplace(epsilon=0.5, sensitivity=1.0))
    def count_over_65(mechanism: Laplace) -> float:
        true_count = sum(int(row["age"]) > 65 for row in load_patients())
        return round(float(mechanism.randomize(float(true_count))), 2)

    @dp_task(dataset=DATASET, mechanism=Laplace(epsilon=0.5, sensitivity=MAX_AGE))
    def sum_of_ages(mechanism: Laplace) -> float:
        ages = [min(max(float(row["age"]), 0.0), MAX_AGE) for row in load_patients()]
        return round(float(mechanism.randomize(sum(ages))), 1)

    count >> count_over_65() >> sum_of_ages()


dp_patients_report()
