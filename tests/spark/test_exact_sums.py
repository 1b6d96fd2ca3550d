"""Spark sums are exact, and equal to the pandas engine's on the same adversarial data."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline.frames import dp_sum
from dp_pipeline.frames._engine import Bounding
from dp_pipeline.frames._exact_sums import grid_exponent
from dp_pipeline.frames._pandas import PandasEngine
from dp_pipeline.mechanisms import Laplace, secure_rng
from dp_pipeline.spark._engine import SparkEngine

pytestmark = pytest.mark.spark


def adversarial() -> pd.DataFrame:
    """Huge values with ones (a float sum drops the ones), alternating signs, subnormals, in two groups."""
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [
            [1e16, 1.0, 1.0, 1.0, -1e16, 3.0, 2.0**-1074, -(2.0**-1074), 2.0**-1022, 1e16 - 2.0],
            rng.choice([1e16, -1e16, 1.0, -1.0, 0.1], 2000),
        ]
    )
    return pd.DataFrame({"x": values, "g": np.where(np.arange(values.size) % 3 == 0, "a", "b")})


def independent(values: np.ndarray, clip: tuple[float, float], centre: float, p: int, j: int) -> int:
    """Σ trunc(((clip(v) − c) as a float)ᵖ / 2^j), each power the float product, summed as Python ints."""
    out = 0
    for v in values:
        y = min(max(float(v), clip[0]), clip[1]) - centre
        term = y if p == 1 else y * y
        out += int(Fraction(term) / Fraction(2) ** j)
    return out


@pytest.mark.parametrize(("clip", "centre"), [((-1e16, 1e16), 0.0), ((-5.0, 1e16), 5e15 - 2.5)])
def test_pandas_and_spark_give_the_same_exact_sums(spark: Any, clip: Any, centre: float) -> None:
    df = adversarial()
    noise = Laplace(epsilon=1.0, sensitivity=2e16)
    powers = [0, 1, 2]
    half = max(abs(clip[0] - centre), abs(clip[1] - centre))
    exponents = [
        grid_exponent(1.0, 1.0, noise),
        grid_exponent(-half, half, noise),
        grid_exponent(0.0, half * half, noise),
    ]
    keys = pd.Index(["a", "b", "never"], name="g")
    bounding = Bounding(None, 1, ["g"], keys, secure_rng(1))
    expected = PandasEngine(df).sums(bounding, "x", clip, centre, powers, exponents)
    got = SparkEngine(spark.createDataFrame(df)).sums(bounding, "x", clip, centre, powers, exponents)
    assert got == expected
    for key_position, key in enumerate(["a", "b"]):
        values = df.loc[df["g"] == key, "x"].to_numpy()
        assert got[0][key_position] == values.size << -exponents[0]
        for i in (1, 2):
            assert got[i][key_position] == independent(values, clip, centre, powers[i], exponents[i])
    assert [row[2] for row in got] == [0, 0, 0]


def test_a_spark_sum_release_reads_the_exact_sum(spark: Any) -> None:
    """[1, 1, 1, 1e16]: the float sum rounds to 1e16 + 4; the released value's centre is the exact sum."""
    sdf = spark.createDataFrame(pd.DataFrame({"x": [1.0, 1.0, 1.0, 1e16]}))
    out = sdf.transform(
        dp_sum, "x", lower=0.0, upper=1e16, epsilon=1e9, accountant="unaccounted", random_state=secure_rng(4)
    ).toPandas()
    # noise of scale 1e16/1e9 = 1e7: the value is 1e16 up to it (the grid of M = 1e16 is 2, so the ones
    # truncate to 0), never biased by the float rounding
    assert math.isclose(out["value"][0], 1e16, abs_tol=1e9)


def test_the_decimal_sums_used_beyond_the_long_range_give_the_same_exact_sums(spark: Any) -> None:
    """The job that sums the halves as DecimalType(38, 0) (run when a long sum overflows, beyond 2³⁶
    rows in one key) gives the same exact sums as the long halves."""
    df = adversarial()
    noise = Laplace(epsilon=1.0, sensitivity=2e16)
    exponents = [grid_exponent(1.0, 1.0, noise), grid_exponent(-1e16, 1e16, noise)]
    bounding = Bounding(None, 1, ["g"], pd.Index(["a", "b"], name="g"), secure_rng(5))
    engine = SparkEngine(spark.createDataFrame(df))
    clip = (-1e16, 1e16)
    wide = engine._sums(bounding, "x", clip, 0.0, [0, 1], exponents, wide=True)
    assert wide == engine.sums(bounding, "x", clip, 0.0, [0, 1], exponents)
    assert wide == PandasEngine(df).sums(bounding, "x", clip, 0.0, [0, 1], exponents)
