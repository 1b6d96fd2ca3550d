"""Spark's grid bucket of a value equals numpy's search of the same grid, at and around every edge case."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pyspark.sql import functions as sf

from dp_pipeline._quantile import grid as _grid
from dp_pipeline.spark._grid import bucket

pytestmark = pytest.mark.spark

RANGES = [(0.0, 1.0), (-1.0, 3.0), (0.1, 0.3), (-1e9, 7.5), (1e-300, 3e-300), (-1e300, 1e300), (5, 5 + 1e-9)]


def test_the_bucket_is_the_number_of_grid_points_at_or_below_the_value(spark: Any) -> None:
    rng = np.random.default_rng(16)
    rows = []
    for case, (low, high) in enumerate(RANGES):
        grid = _grid(low, high)
        picked = grid[rng.integers(0, grid.size, 300)]
        values = np.concatenate(
            [
                picked,  # exactly on grid points
                np.nextafter(picked, -np.inf),  # just below
                np.nextafter(picked, np.inf),  # just above
                rng.uniform(low, high, 300),
                [low, high],
            ]
        )
        values = np.clip(values, low, high)  # the engine buckets clipped values
        rows += [(case, float(v)) for v in values]
    sdf = spark.createDataFrame(rows, "case int, x double")
    cells = {
        case: sdf.where(sf.col("case") == case)
        .select("x", bucket(sf.col("x"), low, high, 2**16 + 1).alias("b"))
        .toPandas()
        for case, (low, high) in enumerate(RANGES)
    }
    for case, (low, high) in enumerate(RANGES):
        frame = cells[case]
        expected = np.searchsorted(_grid(low, high), frame["x"].to_numpy(), side="right")
        np.testing.assert_array_equal(frame["b"].to_numpy(), expected, err_msg=str((low, high)))
