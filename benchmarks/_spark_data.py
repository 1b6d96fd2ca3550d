"""The benchmark's rows, generated inside Spark: n rows, 10 per person, each person in one of 10 groups,
values uniform in [0, 1). Shared by bench_spark.py and the PipelineDP worker (which runs in its own venv)."""

from __future__ import annotations

import os
import sys
from typing import Any

GROUPS = 10
ROWS_PER_PERSON = 10
MAX_CONTRIBUTIONS = 5


def session() -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "6g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows(spark: Any, n: int) -> Any:
    from pyspark.sql import functions as sf

    persons = max(n // ROWS_PER_PERSON, 1)
    unit = sf.col("id") % persons
    return spark.range(n).select(
        unit.alias("person"), (unit % GROUPS).alias("grp"), sf.rand(7).alias("x")
    )
