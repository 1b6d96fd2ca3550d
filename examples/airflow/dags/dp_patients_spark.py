"""Mean age by region, computed by Spark, released under the task's reservation.

The task reserves its declared cost (ε = 0.5, a pure-ε release) on the ``patients`` budget before its
callable runs. The callable starts a Spark session (local here; ``DP_SPARK_MASTER`` points it at a
cluster), reads the patients table as a Spark DataFrame and releases the DP mean age per declared region
with :func:`dp_pipeline.spark.dp_mean`: Spark bounds, clips and sums, and only the four regions' sums and
counts reach the driver, which adds the noise. The function is told ``accountant="unaccounted"``: the
operator's reservation already pays for this release, at the same ε, so charging again would count it
twice. The return value (the noisy means with their standard errors and 95% intervals) goes to XCom.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

from airflow.sdk import dag

from dp_pipeline import PureDP
from dp_pipeline.airflow import PrivacyBudgetOperator

DATASET = "patients"
DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "patients.csv"
REGIONS = ["north", "south", "east", "west"]
EPSILON = 0.5
MAX_AGE = 120.0


def mean_age_by_region() -> list[dict[str, Any]]:
    """The DP mean age per region, released by Spark (the cost is the task's reservation)."""
    from pyspark.sql import SparkSession

    from dp_pipeline.spark import dp_mean

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers run this task's interpreter
    spark = (
        SparkSession.builder.master(os.environ.get("DP_SPARK_MASTER", "local[2]"))
        .appName("dp_patients_spark")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    patients = spark.read.csv(str(DATA_FILE), header=True, inferSchema=True)
    result = patients.transform(
        dp_mean,
        "age",
        lower=0.0,
        upper=MAX_AGE,
        by="region",
        keys=REGIONS,
        privacy_unit="patient_id",
        epsilon=EPSILON,
        accountant="unaccounted",  # paid by the operator's reservation
    )
    table = result.toPandas().round(2)
    return [{str(k): v for k, v in row.items()} for row in table.to_dict("records")]


@dag(
    dag_id="dp_patients_spark",
    schedule=None,
    start_date=dt.datetime(2026, 1, 1),
    catchup=False,
    tags=["dp-pipeline", "example", "spark"],
    doc_md=__doc__,
)
def dp_patients_spark() -> None:
    PrivacyBudgetOperator(
        task_id="mean_age_by_region",
        dataset=DATASET,
        mechanism=PureDP(EPSILON),
        python_callable=mean_age_by_region,
    )


dp_patients_spark()
