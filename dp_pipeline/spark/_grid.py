"""The position of a value among the grid points of the quantile functions, computed by Spark.

The grid is :func:`dp_pipeline._quantile.grid`: cⱼ = low + (high − low)·(j/K), j = 0 … K, as
doubles. Spark evaluates the same three IEEE operations in the same order, so its cⱼ are the same doubles.
A value's bucket is b(x) = #{j : cⱼ ≤ x} (numpy's ``searchsorted(grid, x, side="right")``): then
#{x < cₖ} = #{b(x) ≤ k}, the rank the exponential mechanism needs, is a running sum of the bucket counts.
"""

from __future__ import annotations

from pyspark.sql import Column

from dp_pipeline.spark._api import functions_of

__all__ = ["bucket"]

_REACH = 2
"""The estimate t = ⌊(x − low)/(high − low)·K⌋ is within one of the true bucket's index; every grid point
within this many of t is compared exactly, and those below are counted without comparing."""


def bucket(x: Column, low: float, high: float, points: int) -> Column:
    """b(x) = #{j : cⱼ ≤ x} over the ``points`` = K + 1 grid points, for values x in [low, high]."""
    sf = functions_of(x)
    steps = points - 1
    width = high - low

    def point(j: Column) -> Column:
        return sf.lit(low) + sf.lit(width) * (j.cast("double") / sf.lit(float(steps)))

    estimate = sf.floor((x - sf.lit(low)) / sf.lit(width) * sf.lit(float(steps))).cast("long")
    t = sf.least(sf.greatest(estimate, sf.lit(0)), sf.lit(steps))
    below = sf.greatest(t - sf.lit(_REACH), sf.lit(0))
    total = below  # every grid point below t − REACH is ≤ x
    for offset in range(-_REACH, _REACH + 1):
        j = t + sf.lit(offset)
        total = total + sf.when((j >= below) & (j <= steps) & (point(j) <= x), 1).otherwise(0)
    return total
