"""Partition bounding on Spark: the rows of the partitions read, each person in at most L of them (every
L-subset of a person's partitions equally likely), and the frame functions charging those partitions."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.accounting import partition_spending
from dp_pipeline.frames import dp_count
from dp_pipeline.frames._engine import PartitionBounding
from dp_pipeline.spark._bounding import KEEP, with_kept

pytestmark = pytest.mark.spark


def test_each_person_keeps_at_most_l_partitions_with_all_their_rows_and_every_subset_equally_likely(
    spark: Any,
) -> None:
    """3000 persons with 2 rows in each of 4 days, L = 2 and m = 4: each keeps both rows of exactly 2 days,
    and the 6 pairs of days are kept equally often (chi-square); rows of day 9 are never read."""
    persons, days, limit = 3000, 4, 2
    data = [(p, str(d), r) for p in range(persons) for d in (*range(days), 9) for r in range(2)]
    sdf = spark.createDataFrame(data, "person long, day string, row long")
    read = PartitionBounding("day", tuple(str(d) for d in range(days)), limit)
    kept = with_kept(sdf, "person", 4, seed=5, partitions=read).where(KEEP).toPandas()
    assert "9" not in set(kept["day"])
    assert (kept.groupby(["person", "day"]).size() == 2).all()  # a kept day keeps its rows (m = 4)
    chosen = kept.groupby("person")["day"].apply(lambda d: tuple(sorted(set(d))))
    assert len(chosen) == persons and all(len(pair) == limit for pair in chosen)
    observed = Counter(chosen)
    counts = np.array([observed[pair] for pair in itertools.combinations("0123", limit)])
    assert counts.sum() == persons
    assert stats.chisquare(counts).pvalue > 1e-3


def test_dp_count_on_spark_reads_its_partition_and_charges_it(spark: Any) -> None:
    rows = [("p1", "a")] * 5 + [("p1", "b")] * 5 + [("p2", "a"), ("p3", "c"), ("p3", "c"), ("p4", "d")]
    sdf = spark.createDataFrame(rows, "person string, ward string")
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1e12), relation="add_remove", partitions=1)
    options: dict[str, Any] = {"accountant": acct, "dataset": "visits", "privacy_unit": "person"}
    exact = 1e9
    one = dp_count(
        sdf, epsilon=exact, partition_column="ward", partition="a", max_contributions=10, **options
    )
    assert one.toPandas()["value"][0] == pytest.approx(6, abs=1e-3)  # p1's 5 visits to a, p2's one
    whole = dp_count(sdf, epsilon=exact, partition_column="ward", max_contributions=10, **options)
    # one ward per person (L = 1): p1 keeps 5 visits (a or b), p2 1, p3 2, p4 1
    assert whole.toPandas()["value"][0] == pytest.approx(9, abs=1e-3)
    assert list(partition_spending(acct.store, "visits")) == ["a"]
