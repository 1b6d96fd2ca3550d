"""The checks of tabular input: per-feature parameters and the sensitivity from declared bounds."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline import InvalidParameterError
from dp_pipeline._tabular import declared_sensitivity, per_feature


def test_per_feature_takes_a_scalar_a_sequence_or_a_mapping() -> None:
    names = ["age", "weight"]
    assert per_feature(2, names, "lower").tolist() == [2.0, 2.0]
    assert per_feature([1, 2], names, "lower").tolist() == [1.0, 2.0]
    assert per_feature({"weight": 3}, names, "lower", default=-np.inf).tolist() == [-np.inf, 3.0]
    for bad in ({"height": 1}, [1, 2, 3], "1", {"age": 1}):
        with pytest.raises(InvalidParameterError) as info:
            per_feature(bad, names, "lower")
        assert info.value.parameter == "lower"


@given(st.floats(-1e6, 1e6), st.floats(1e-9, 1e6))
def test_a_sensitivity_from_the_bounds_is_their_exact_width_rounded_up(low: float, width: float) -> None:
    high = low + width
    if not high > low:
        return
    (got,) = declared_sensitivity(None, np.array([low]), np.array([high]), ["x"])
    exact = Fraction(high) - Fraction(low)  # the least double not below it
    assert Fraction(float(got)) >= exact > Fraction(math.nextafter(float(got), -math.inf))


def test_bounds_whose_float_difference_rounds_down_give_the_width_rounded_up() -> None:
    low, high = np.array([-0.1, -0.7, -2.2]), np.array([0.7, 0.2, 0.3])
    assert any(Fraction(h - lo) < Fraction(h) - Fraction(lo) for lo, h in zip(low, high, strict=True))
    got = declared_sensitivity(None, low, high, ["a", "b", "c"])
    for g, lo, h in zip(got, low, high, strict=True):
        assert Fraction(float(g)) >= Fraction(float(h)) - Fraction(float(lo))
