"""The exact bounded aggregates of the Spark engine equal the pandas engine's, before any noise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import types as spark_types

from dp_pipeline._quantile import grid as _grid
from dp_pipeline.frames._engine import Bounding
from dp_pipeline.frames._pandas import PandasEngine
from dp_pipeline.mechanisms import secure_rng
from dp_pipeline.spark._engine import SparkEngine
from dp_pipeline.spark._keys import _NO_MATCH, spark_value

pytestmark = pytest.mark.spark


def visits() -> pd.DataFrame:
    """Each person has at most 2 rows, so bounding to m = 2 keeps every row (a deterministic input); the
    values are integers, so every sum is exact in floating point whatever the order of addition."""
    rng = np.random.default_rng(14)
    person = np.repeat(np.arange(60), rng.integers(1, 3, 60))
    return pd.DataFrame(
        {
            "person": [f"p{i}" for i in person],
            "x": rng.integers(-30, 130, person.size).astype(float),
            "ward": rng.choice(["a", "b", "c", "undeclared"], person.size),
            "floor": rng.integers(0, 3, person.size),
        }
    )


TWO_KEYS = pd.MultiIndex.from_tuples([("a", 0), ("b", 2), ("z", 1)], names=["ward", "floor"])


def both(spark: Any, df: pd.DataFrame) -> tuple[PandasEngine, SparkEngine]:
    return PandasEngine(df), SparkEngine(spark.createDataFrame(df))


@pytest.mark.parametrize(
    ("by", "keys"),
    [
        (None, None),
        (["ward"], pd.Index(["c", "a", "never", "b"], name="ward")),
        (["ward", "floor"], TWO_KEYS),
    ],
)
def test_the_exact_bounded_sums_are_equal(spark: Any, by: Any, keys: Any) -> None:
    pandas_engine, spark_engine = both(spark, visits())
    bounding = Bounding("person", 2, by, keys, secure_rng(1))
    powers, exponents = [0, 1, 2], [-52, -40, -30]
    for clip, centre in (((0.0, 100.0), 50.0), ((-10.0, 40.0), 0.0)):
        expected = pandas_engine.sums(bounding, "x", clip, centre, powers, exponents)
        got = spark_engine.sums(bounding, "x", clip, centre, powers, exponents)
        assert got == expected
    # and against an independent computation: the clipped values (integers) summed per declared key by
    # hand, in units of each grid 2^j
    df = visits()
    clipped = [int(v) for v in df["x"].clip(0.0, 100.0) - 50.0]
    if by is None:
        want = [[sum(v**p for v in clipped) << -j] for p, j in zip(powers, exponents, strict=True)]
    else:
        rows = [tuple(r) for r in df[by].itertuples(index=False)]
        wanted = [k if len(by) > 1 else (k,) for k in keys]
        pairs = list(zip(clipped, rows, strict=True))
        want = [
            [sum(v**p for v, r in pairs if r == k) << -j for k in wanted]
            for p, j in zip(powers, exponents, strict=True)
        ]
    assert spark_engine.sums(bounding, "x", (0.0, 100.0), 50.0, powers, exponents) == want


def test_the_grid_ranks_are_equal(spark: Any) -> None:
    pandas_engine, spark_engine = both(spark, visits())
    keys = pd.Index(["a", "b", "never"], name="ward")
    for by, index in ((None, None), (["ward"], keys)):
        bounding = Bounding("person", 2, by, index, secure_rng(2))
        grid = _grid(-5.0, 117.3)
        got = spark_engine.grid_ranks(bounding, "x", (-5.0, 117.3), grid)
        np.testing.assert_array_equal(got, pandas_engine.grid_ranks(bounding, "x", (-5.0, 117.3), grid))
        assert got.shape == (bounding.n_keys, grid.size + 1)


def test_a_key_of_another_type_than_its_column_matches_nothing_as_in_pandas(spark: Any) -> None:
    df = visits()
    pandas_engine, spark_engine = both(spark, df)
    keys = pd.Index([0, "1", 2.0, 1.5, None], name="floor")
    bounding = Bounding(None, 1, ["floor"], keys, secure_rng(3))
    expected = pandas_engine.sums(bounding, None, (1.0, 1.0), 0.0, [0], [0])
    assert spark_engine.sums(bounding, None, (1.0, 1.0), 0.0, [0], [0]) == expected
    counts = expected[0]
    assert counts[0] == (df["floor"] == 0).sum() and counts[2] == (df["floor"] == 2).sum()
    assert [counts[i] for i in (1, 3, 4)] == [0, 0, 0]


KEYS = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=3), st.booleans())


@given(KEYS)
def test_a_declared_key_converts_exactly_when_a_value_of_the_column_type_equals_it(key: Any) -> None:
    for data_type, bits in ((spark_types.IntegerType(), 32), (spark_types.LongType(), 64)):
        converted = spark_value(key, data_type)
        representable = (
            isinstance(key, int | float)
            and not isinstance(key, str)
            and float(key).is_integer()
            and -(2 ** (bits - 1)) <= int(key) < 2 ** (bits - 1)
        )
        assert (converted is not _NO_MATCH) == representable
        if representable:
            assert isinstance(converted, int) and converted == key
    as_string = spark_value(key, spark_types.StringType())
    assert as_string == key if isinstance(key, str) else as_string is _NO_MATCH
    as_double = spark_value(key, spark_types.DoubleType())
    assert as_double is _NO_MATCH if isinstance(key, str) else as_double == float(key)
