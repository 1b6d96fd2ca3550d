"""A DP mean by group with contribution bounding on Spark: dp-pipeline beside plain Spark, PipelineDP on
Spark and the pandas layer, in the same run.

Rows are generated inside Spark (10 groups, 10 rows per person, values in [0, 1)), local[2]. Each size runs
in a fresh process, so that the driver's peak memory (the Python driver's maximum resident set) is that
size's own:

* plain Spark: the same bounded aggregation without privacy (a window keeps 5 random rows per person,
  then a grouped sum and count), collected;
* dp-pipeline on Spark: ``dp_mean`` by group with ``privacy_unit``/``max_contributions=5``, Laplace noise,
  charged to an in-memory ledger;
* PipelineDP 0.3.1 on Spark (``SparkRDDBackend``, the same bounds), in benchmarks/.venv-pipelinedp_spark,
  created on first use from requirements-pipelinedp_spark.txt (apart from the project's lock);
* the pandas layer (``dp_pipeline.frames.dp_mean``) on the same rows as a pandas DataFrame, where it fits.

Run: ``.venv/bin/python benchmarks/bench_spark.py [--rows 1e6 1e7] [--pipelinedp-max 1e6]`` (prints a
Markdown table). Each timing is the best of ``--repeat`` runs after a warm-up job.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _spark_data import GROUPS, MAX_CONTRIBUTIONS, ROWS_PER_PERSON, rows, session  # noqa: E402
from _worker_env import run_worker  # noqa: E402


def best(run: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def plain_spark(sdf: Any) -> list[Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    window = Window.partitionBy("person").orderBy(sf.rand(3))
    kept = sdf.withColumn("rn", sf.row_number().over(window)).where(sf.col("rn") <= MAX_CONTRIBUTIONS)
    rows_: list[Any] = kept.groupBy("grp").agg(sf.sum("x"), sf.count(sf.lit(1))).collect()
    return rows_


def spark_run(n: int, repeat: int) -> dict[str, float]:
    from dp_pipeline import PrivacyAccountant, PureDP
    from dp_pipeline.spark import dp_mean

    spark = session()
    plain_spark(rows(spark, 1000))  # start-up and JIT outside the timings
    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("bench", PureDP(1e9))
    sdf = rows(spark, n)

    def ours() -> None:
        dp_mean(
            sdf, "x", lower=0.0, upper=1.0, by="grp", keys=list(range(GROUPS)), privacy_unit="person",
            max_contributions=MAX_CONTRIBUTIONS, epsilon=1.0, accountant=accountant, dataset="bench",
        ).toPandas()

    ours()
    result = {"plain": best(lambda: plain_spark(sdf), repeat), "ours": best(ours, repeat)}
    result["driver_peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def pandas_run(n: int, repeat: int) -> dict[str, float]:
    import numpy as np
    import pandas as pd

    from dp_pipeline.frames import dp_mean

    person = np.arange(n) % max(n // ROWS_PER_PERSON, 1)
    df = pd.DataFrame({"person": person, "grp": person % GROUPS, "x": np.random.default_rng(7).random(n)})
    seconds = best(
        lambda: dp_mean(
            df, "x", lower=0.0, upper=1.0, by="grp", keys=list(range(GROUPS)), privacy_unit="person",
            max_contributions=MAX_CONTRIBUTIONS, epsilon=1.0, accountant="unaccounted",
        ),
        repeat,
    )
    return {"pandas": seconds, "pandas_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def pipelinedp_run(n: int) -> dict[str, float]:
    out = run_worker("pipelinedp_spark", [str(n)])
    return {"pipelinedp": json.loads(out.strip().splitlines()[-1])["seconds"]}


def in_process(mode: str, n: int, repeat: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--one", mode, str(n), str(repeat)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--pipelinedp-max", type=float, default=1e6)
    parser.add_argument("--pandas-max", type=float, default=1e7)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        mode, n, repeat = args.one[0], int(args.one[1]), int(args.one[2])
        print(json.dumps(spark_run(n, repeat) if mode == "spark" else pandas_run(n, repeat)))
        return
    print("| rows | plain Spark (s) | dp-pipeline on Spark (s) | ratio | PipelineDP on Spark (s) | speed-up "
          "| pandas layer (s) | Python driver peak (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.rows:
        n = int(size)
        result = in_process("spark", n, args.repeat)
        if n <= args.pipelinedp_max:
            result.update(pipelinedp_run(n))
        if n <= args.pandas_max:
            result.update(in_process("pandas", n, args.repeat))
        pdp = result.get("pipelinedp")
        cells = [
            f"{n:.0e}",
            f"{result['plain']:.2f}",
            f"{result['ours']:.2f}",
            f"{result['ours'] / result['plain']:.2f}×",
            f"{pdp:.1f}" if pdp else "–",
            f"{pdp / result['ours']:.0f}×" if pdp else "–",
            f"{result['pandas']:.2f}" if "pandas" in result else "–",
            f"{result['driver_peak_mib']:.0f}",
        ]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
