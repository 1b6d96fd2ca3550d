"""Contribution bounding on Spark: a uniform random sample of at most m rows per person, and on a partitioned
dataset of at most L of the partitions each person appears in."""

from __future__ import annotations

from collections.abc import Hashable

from pyspark.sql import Column, DataFrame

from dp_pipeline.frames._engine import PartitionBounding
from dp_pipeline.spark._api import functions_of, window_of

__all__ = ["KEEP", "with_kept"]

KEEP = "__dp_keep"
"""The boolean column that says whether a row enters the release."""


def with_kept(
    sdf: DataFrame,
    unit: Hashable | None,
    limit: int,
    seed: int,
    partitions: PartitionBounding | None = None,
) -> DataFrame:
    """``sdf`` with a column :data:`KEEP`: true for at most ``limit`` rows of each value of ``unit``.

    The rows of one person are ranked by independent uniform priorities (``rand(seed)``) in a window over
    the person column, and the first ``limit`` kept, so every subset of ``limit`` of a person's rows is
    equally likely and which of a person's rows are kept does not depend on anyone else's rows (the
    priorities are i.i.d. whatever the partitioning). The priorities need not be secret: any per-person rule
    bounds the sensitivity; ``seed`` is drawn from the release's generator, new at every call. Without a
    person column every row is kept (each row is a person).

    With ``partitions`` only rows of the partitions read are kept, and of those only the rows of at most L
    partitions per person, chosen first: each (person, partition) pair gets the priority
    ``xxhash64(seed, person, partition)`` (one value for all the pair's rows, independent across pairs for
    a random seed), and a person's read partitions are ranked by it; the rows are then sampled among the
    kept ones (as :func:`~dp_pipeline.frames._common.bound_partitions` does in memory).
    """
    sf = functions_of(sdf)
    read: Column = sf.lit(True) if partitions is None else _partition_kept(sdf, unit, seed, partitions)
    if unit is None:
        return sdf.withColumn(KEEP, read)
    window = window_of(sdf).partitionBy(sf.col(str(unit))).orderBy(~read, sf.rand(seed))
    return sdf.withColumn(KEEP, read & (sf.row_number().over(window) <= limit))


def _partition_kept(
    sdf: DataFrame, unit: Hashable | None, seed: int, partitions: PartitionBounding
) -> Column:
    """True for the rows of ``sdf`` of the partitions read, in at most L of them per person."""
    sf = functions_of(sdf)
    name = sf.col(str(partitions.column)).cast("string")
    read = name.isin(list(partitions.names)) if partitions.names else sf.lit(True)
    if unit is None:
        return read
    priority = sf.xxhash64(sf.lit(seed), sf.col(str(unit)), name)
    window = window_of(sdf).partitionBy(sf.col(str(unit))).orderBy(~read, priority, name)
    return read & (sf.dense_rank().over(window) <= partitions.limit)
