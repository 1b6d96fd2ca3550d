"""add_noise and randomized_response on Spark: Spark frames whose rows the executors randomised, each
partition from its own secure generator, read the same at every action."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pyspark.sql import functions as sf
from scipy import stats

from dp_pipeline import spark as dps
from dp_pipeline.mechanisms import KRandomizedResponse

pytestmark = pytest.mark.spark

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}


def test_noise_is_laplace_fresh_per_partition_and_fixed_once_released(spark: Any) -> None:
    rows = spark.range(4000).select(sf.lit(5.0).alias("x"), sf.lit("k").alias("tag"), "id")
    sdf = rows.repartition(4, "id")
    noisy = dps.add_noise(sdf, "x", lower=0, upper=10, epsilon=2.0, **OPT_OUT)
    assert noisy.schema["tag"].dataType.simpleString() == "string" and noisy.columns == sdf.columns
    first = noisy.orderBy("id").toPandas()
    second = noisy.orderBy("id").toPandas()
    np.testing.assert_array_equal(first["x"], second["x"])  # every action reads the released rows
    noise = first["x"].to_numpy() - 5.0
    assert stats.kstest(noise, stats.laplace(scale=10 / 2.0).cdf).pvalue > 1e-3
    by_partition = noisy.withColumn("part", sf.spark_partition_id()).toPandas().groupby("part")["x"]
    heads = [tuple(values.to_numpy()[:20]) for _, values in by_partition]
    assert len(heads) == 4 and len(set(heads)) == 4  # no two partitions share their noise
    again = dps.add_noise(sdf, "x", lower=0, upper=10, epsilon=2.0, **OPT_OUT).orderBy("id").toPandas()
    assert np.mean(again["x"].to_numpy() == first["x"].to_numpy()) < 0.01  # a new call draws new noise


def test_k_randomized_response_reports_the_truth_with_probability_p(spark: Any) -> None:
    categories = ["a", "b", "c"]
    sdf = spark.range(3000).select(sf.lit("a").alias("answer"), "id")
    reports = dps.randomized_response(sdf, "answer", categories=categories, epsilon=1.0, **OPT_OUT).toPandas()
    p = KRandomizedResponse(epsilon=1.0, categories=categories).p
    truthful = int((reports["answer"] == "a").sum())
    assert set(reports["answer"]) <= set(categories)
    assert stats.binomtest(truthful, len(reports), p).pvalue > 1e-3
