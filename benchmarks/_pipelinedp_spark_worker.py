"""Times PipelineDP's grouped DP mean on Spark (SparkRDDBackend); runs inside
benchmarks/.venv-pipelinedp_spark (pipeline-dp 0.3.1 and PySpark, apart from the project's lock). Prints one
JSON object: seconds."""

from __future__ import annotations

import json
import sys
import time

import pipeline_dp
from _spark_data import GROUPS, MAX_CONTRIBUTIONS, rows, session

if __name__ == "__main__":
    n = int(sys.argv[1])
    spark = session()
    rows(spark, 1000).count()  # start-up and JIT outside the timing
    rdd = rows(spark, n).rdd
    start = time.perf_counter()
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=1.0, total_delta=0.0)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.SparkRDDBackend(spark.sparkContext))
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        metrics=[pipeline_dp.Metrics.MEAN],
        max_partitions_contributed=1,  # each person's rows are in one group
        max_contributions_per_partition=MAX_CONTRIBUTIONS,
        min_value=0.0,
        max_value=1.0,
    )
    extractors = pipeline_dp.DataExtractors(
        partition_extractor=lambda row: row.grp,
        privacy_id_extractor=lambda row: row.person,
        value_extractor=lambda row: row.x,
    )
    result = engine.aggregate(rdd, params, extractors, public_partitions=list(range(GROUPS)))
    accountant.compute_budgets()
    released = result.collect()
    seconds = time.perf_counter() - start
    assert len(released) == GROUPS
    print(json.dumps({"seconds": seconds}))
