"""Contribution bounding on Spark keeps at most m rows per person, every m-subset equally likely."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dp_pipeline.spark._bounding import KEEP, with_kept

pytestmark = pytest.mark.spark


def test_each_person_keeps_at_most_m_rows_and_every_subset_is_equally_likely(spark: Any) -> None:
    """3000 persons with 4 rows each (labelled 0–3), m = 2: each keeps exactly 2 rows, and the 6 possible
    pairs are kept equally often (chi-square); persons with fewer than m rows keep them all."""
    persons, rows, m = 3000, 4, 2
    data = [(p, r) for p in range(persons) for r in range(rows)] + [(-1, 0)]  # one person with one row
    sdf = spark.createDataFrame(data, "person long, row long")
    kept = with_kept(sdf, "person", m, seed=11).where(KEEP).toPandas()
    per_person = kept.groupby("person")["row"].apply(lambda r: tuple(sorted(r)))
    assert (kept.groupby("person").size().drop(-1) == m).all() and per_person[-1] == (0,)
    observed = Counter(per_person.drop(-1))
    pairs = list(itertools.combinations(range(rows), m))
    counts = np.array([observed[p] for p in pairs])
    assert counts.sum() == persons
    assert stats.chisquare(counts).pvalue > 1e-3


def test_without_a_person_column_every_row_is_kept(spark: Any) -> None:
    sdf = spark.createDataFrame([(i,) for i in range(10)], "x long")
    assert with_kept(sdf, None, 1, seed=1).where(KEEP).count() == 10
