"""Per-region counts (a mapped DP task) and an existing operator put under the budget with a guard.

- ``diabetic_in_region`` is mapped over the four regions; each map index is its own release and is
  charged on its own (ε = 0.2 each). The regions are literal, so the DAG plan counts all four.
- ``noisy_total`` is a plain PythonOperator from Airflow's standard provider; ``pre_execute=dp_guard(...)``
  reserves its cost before it runs and refuses it when the budget is spent. The same guard works on any
  operator (BashOperator, a SQL operator, ...); with the cluster policy enabled a task can instead declare
  ``params={"dp_cost": {"dataset": "patients", "epsilon": 0.2}}``.

One run plans ε = 4 × 0.2 + 0.2 = 1.0 on ``patients``.
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import dag

from dp_pipeline.airflow import dp_guard, dp_task
from dp_pipeline.mechanisms import Laplace

DATASET = "patients"
DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "patients.csv"
REGIONS = ["north", "south", "east", "west"]


def load_patients() -> list[dict[str, str]]:
    """Read the patients table."""
    with DATA_FILE.open(newline="") as handle:
        return list(csv.DictReader(handle))


def noisy_total() -> float:
    """An existing function that releases a noisy patient count on its own (Laplace, ε = 0.2)."""
    return round(float(Laplace(epsilon=0.2, sensitivity=1.0).randomize(float(len(load_patients())))), 2)


@dag(
    dag_id="dp_patients_by_region",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    tags=["dp-pipeline", "example"],
    doc_md=__doc__,
)
def dp_patients_by_region() -> None:
    @dp_task(dataset=DATASET, mechanism=Laplace(epsilon=0.2, sensitivity=1.0))
    def diabetic_in_region(region: str, mechanism: Laplace) -> dict[str, float]:
        true_count = sum(int(row["diabetic"]) for row in load_patients() if row["region"] == region)
        return {"region": region, "diabetic": round(float(mechanism.randomize(float(true_count))), 2)}

    counts = diabetic_in_region.expand(region=REGIONS)
    total = PythonOperator(
        task_id="noisy_total",
        python_callable=noisy_total,
        pre_execute=dp_guard(DATASET, Laplace(epsilon=0.2, sensitivity=1.0)),
    )
    counts >> total


dp_patients_by_region()
