"""A weekly report of DP aggregates computed with pandas, under one run-level reservation.

Every Monday the report releases three aggregates of the ``patients`` table and assembles them:

- ``patients_by_region``: a DP histogram over the four regions (ε = 0.4);
- ``mean_age``: a DP mean of the age, clipped to [0, 100] (ε = 0.3);
- ``diabetic``: a DP count of diabetic patients (ε = 0.2);
- ``publish``: a plain task that puts the three into one report (it reads no data).

Each DP task declares the most it may release (a pure ε guarantee) and computes its aggregate with the pandas
functions, paying through ``dp``: the reservation that covers the task. ``run_budget(dag)`` adds a setup
task that reserves the run's whole plan (ε = 0.9 on ``patients``) before any task reads the data, so a week
whose report cannot be paid for in full is refused before it starts, and a teardown task that hands back the
share of any task that did not start. The dataset is charged once per run, what the plan says.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from airflow.sdk import dag, task

from dp_pipeline import PureDP
from dp_pipeline.airflow import dp_task, run_budget

DATASET = "patients"
DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "patients.csv"
REGIONS = ["north", "south", "east", "west"]


def load_patients() -> Any:
    """Read the patients table (one row per patient) as a pandas DataFrame."""
    import pandas as pd

    return pd.read_csv(DATA_FILE)


@dag(
    dag_id="dp_weekly_report",
    schedule="@weekly",
    start_date=dt.datetime(2026, 1, 5),
    catchup=False,
    tags=["dp-pipeline", "example"],
    doc_md=__doc__,
)
def dp_weekly_report() -> None:
    from dp_pipeline.frames import dp_count, dp_histogram, dp_mean

    @dp_task(dataset=DATASET, mechanism=PureDP(0.4))
    def patients_by_region(dp: Any) -> dict[str, float]:
        counts = load_patients().pipe(
            dp_histogram, "region", categories=REGIONS, epsilon=0.4, accountant=dp, dataset=DATASET
        )
        return {str(region): round(float(value), 1) for region, value in counts["value"].items()}

    @dp_task(dataset=DATASET, mechanism=PureDP(0.3))
    def mean_age(dp: Any) -> float:
        mean = load_patients().pipe(
            dp_mean, "age", lower=0, upper=100, epsilon=0.3, accountant=dp, dataset=DATASET
        )
        return round(float(mean["value"]), 1)

    @dp_task(dataset=DATASET, mechanism=PureDP(0.2))
    def diabetic(dp: Any) -> float:
        frame = load_patients()
        count = frame[frame["diabetic"] == 1].pipe(dp_count, epsilon=0.2, accountant=dp, dataset=DATASET)
        return round(float(count["value"]), 1)

    @task
    def publish(regions: dict[str, float], age: float, diabetic_count: float) -> dict[str, Any]:
        return {"patients_by_region": regions, "mean_age": age, "diabetic": diabetic_count}

    publish(patients_by_region(), mean_age(), diabetic())


run_budget(dp_weekly_report())
