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
from tests.statistical import assert_not_rejected

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

    def laplace_pvalue() -> float:  # a new release: the executors' generators are keyed from OS entropy
        released = dps.add_noise(sdf, "x", lower=0, upper=10, epsilon=2.0, **OPT_OUT).toPandas()
        return stats.kstest(released["x"].to_numpy() - 5.0, stats.laplace(scale=10 / 2.0).cdf).pvalue

    assert_not_rejected(laplace_pvalue)
    by_partition = noisy.withColumn("part", sf.spark_partition_id()).toPandas().groupby("part")["x"]
    heads = [tuple(values.to_numpy()[:20]) for _, values in by_partition]
    assert len(heads) == 4 and len(set(heads)) == 4  # no two partitions share their noise
    again = dps.add_noise(sdf, "x", lower=0, upper=10, epsilon=2.0, **OPT_OUT).orderBy("id").toPandas()
    assert np.mean(again["x"].to_numpy() == first["x"].to_numpy()) < 0.01  # a new call draws new noise


def test_k_randomized_response_reports_the_truth_with_probability_p(spark: Any) -> None:
    categories = ["a", "b", "c"]
    sdf = spark.range(3000).select(sf.lit("a").alias("answer"), "id")
    p = KRandomizedResponse(epsilon=1.0, categories=categories).p

    def truthful_pvalue() -> float:  # a new release: the executors' generators are keyed from OS entropy
        reports = dps.randomized_response(sdf, "answer", categories=categories, epsilon=1.0, **OPT_OUT)
        answers = reports.toPandas()["answer"]
        assert set(answers) <= set(categories)
        return stats.binomtest(int((answers == "a").sum()), len(answers), p).pvalue

    assert_not_rejected(truthful_pvalue)
