"""Weekly DP counts whose noise the run's budget share calibrates.

Every Monday the DAG releases three counts of the ``patients`` table with Laplace noise. No task picks its
ε: each declares a :class:`~dp_pipeline.PlannedRelease` (Laplace noise of sensitivity 1, and a
weight), and ``run_budget(dag, share=PureDP(0.5))`` gives each run ε = 0.5 of the dataset's budget. The
run's setup task calibrates the three together to the share and reserves them before any task reads data;
each task receives its calibrated ``mechanism`` and adds the noise with it:

- ``diabetic`` and ``over_65`` (weight 1): ε = 0.125 each, Laplace scale b = 8;
- ``patients`` (weight 4: four times the precision, half the noise standard deviation): ε = 0.25, b = 4.

Pure Laplace releases add up, so the three ε sum to the share: 0.125 + 0.125 + 0.25 = 0.5. Change a weight,
add a task or raise the share and every task's noise follows, without editing any ε.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from airflow.sdk import dag

from dp_pipeline import PlannedRelease, PureDP
from dp_pipeline.airflow import dp_task, run_budget

DATASET = "patients"
DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "patients.csv"
COUNT = PlannedRelease("laplace", sensitivity=1.0)  # one patient changes a count by at most 1


def load_patients() -> Any:
    """Read the patients table (one row per patient) as a pandas DataFrame."""
    import pandas as pd

    return pd.read_csv(DATA_FILE)


@dag(
    dag_id="dp_weekly_counts",
    schedule="@weekly",
    start_date=dt.datetime(2026, 1, 5),
    catchup=False,
    tags=["dp-pipeline", "example"],
    doc_md=__doc__,
)
def dp_weekly_counts() -> None:
    @dp_task(dataset=DATASET, mechanism=COUNT)
    def diabetic(mechanism: Any) -> float:
        frame = load_patients()
        return round(float(mechanism.randomize(float((frame["diabetic"] == 1).sum()))), 1)

    @dp_task(dataset=DATASET, mechanism=COUNT)
    def over_65(mechanism: Any) -> float:
        frame = load_patients()
        return round(float(mechanism.randomize(float((frame["age"] > 65).sum()))), 1)

    @dp_task(dataset=DATASET, mechanism=PlannedRelease("laplace", sensitivity=1.0, weight=4.0))
    def patients(mechanism: Any) -> float:
        return round(float(mechanism.randomize(float(len(load_patients())))), 1)

    diabetic()
    over_65()
    patients()


run_budget(dp_weekly_counts(), share={DATASET: PureDP(0.5)})
