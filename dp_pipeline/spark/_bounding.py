"""Contribution bounding on Spark: a uniform random sample of at most m rows per person."""

from __future__ import annotations

from collections.abc import Hashable

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as sf

__all__ = ["KEEP", "with_kept"]

KEEP = "__dp_keep"
"""The boolean column that says whether a row enters the release."""


def with_kept(sdf: DataFrame, unit: Hashable | None, limit: int, seed: int) -> DataFrame:
    """``sdf`` with a column :data:`KEEP`: true for at most ``limit`` rows of each value of ``unit``.

    The rows of one person are ranked by independent uniform priorities (``rand(seed)``) in a window over
    the person column, and the first ``limit`` kept, so every subset of ``limit`` of a person's rows is
    equally likely and which of a person's rows are kept does not depend on anyone else's rows (the
    priorities are i.i.d. whatever the partitioning). The priorities need not be secret: any per-person rule
    bounds the sensitivity; ``seed`` is drawn from the release's generator, new at every call. Without a
    person column every row is kept (each row is a person).
    """
    if unit is None:
        return sdf.withColumn(KEEP, sf.lit(True))
    window = Window.partitionBy(sf.col(str(unit))).orderBy(sf.rand(seed))
    return sdf.withColumn(KEEP, sf.row_number().over(window) <= limit)
