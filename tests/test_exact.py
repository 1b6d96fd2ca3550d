"""dp_pipeline._exact: every rounded result is checked against exact rationals computed in the test."""

from __future__ import annotations

import math
import sys
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline import _exact as exact
from dp_pipeline.exceptions import InvalidParameterError

positive = st.floats(min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False)
rationals = st.fractions(min_value=Fraction(1, 10**300), max_value=10**300)
# exact decimals with many digits, as the ledger's sums are
decimals = st.builds(
    lambda digits, exponent: Decimal(f"{digits}E{exponent}"),
    st.integers(1, 10**400),
    st.integers(-700, 200),
)


def _down(x: float) -> float:
    return math.nextafter(x, -math.inf)


@given(st.one_of(positive, rationals, decimals))
def test_sqrt_up_is_the_least_double_whose_square_covers(value: float | Fraction | Decimal) -> None:
    target = Fraction(value)
    root = exact.sqrt_up(value)
    assert Fraction(root) ** 2 >= target
    assert root == 0.0 or Fraction(_down(root)) ** 2 < target


@given(st.one_of(positive, rationals, decimals))
def test_sqrt_down_is_the_greatest_double_whose_square_fits(value: float | Fraction | Decimal) -> None:
    target = Fraction(value)
    root = exact.sqrt_down(value)
    assert Fraction(root) ** 2 <= target
    after = math.nextafter(root, math.inf)
    assert math.isinf(after) or Fraction(after) ** 2 > target


@given(st.floats(min_value=1e-150, max_value=1e150))
def test_the_root_of_an_exact_square_is_the_double_itself(x: float) -> None:
    # rounding the 60-digit decimal root up and then the double up gave one ulp too many here
    assert exact.sqrt_up(Fraction(x) ** 2) == x
    assert exact.sqrt_down(Fraction(x) ** 2) == x


@given(st.one_of(rationals, decimals, rationals.map(lambda f: -f)))
def test_float_up_and_down_bracket_the_exact_value(value: Fraction | Decimal) -> None:
    target = Fraction(value)
    up, down = exact.float_up(value), exact.float_down(value)
    if math.isinf(up):
        assert target > Fraction(sys.float_info.max) and down == sys.float_info.max
        return
    assert Fraction(up) >= target and Fraction(_down(up)) < target
    if target <= 0:
        assert down == 0.0  # what is left of a budget is never negative
    else:
        assert Fraction(down) <= target < Fraction(math.nextafter(down, math.inf))


def test_float_up_and_down_beyond_the_largest_double() -> None:
    huge = Fraction(sys.float_info.max) * 2
    assert exact.float_up(huge) == math.inf and exact.float_down(huge) == sys.float_info.max
    assert exact.sqrt_up(Fraction(10) ** 700) == math.inf and exact.sqrt_down(Fraction(10) ** 700) > 1e300


@given(st.fractions(min_value=Fraction(1, 10**50), max_value=10**50))
def test_decimal_up_is_never_below_and_exact_when_it_can_be(value: Fraction) -> None:
    rounded = exact.decimal_up(value)
    assert Fraction(rounded) >= value
    assert Fraction(rounded) - value <= value * Fraction(1, 10**39)
    assert exact.decimal_up(Fraction(1, 5)) == Decimal("0.2")


@given(st.lists(st.floats(min_value=0.0, max_value=1e300), max_size=30))
def test_decimal_sums_are_exact(values: list[float]) -> None:
    total = Decimal(0)
    squares = Decimal(0)
    for v in values:
        total = exact.add(total, exact.to_decimal(v))
        squares = exact.add(squares, exact.square(exact.to_decimal(v)))
    assert Fraction(total) == sum((Fraction(v) for v in values), Fraction(0))
    assert Fraction(squares) == sum((Fraction(v) ** 2 for v in values), Fraction(0))
    assert Fraction(exact.subtract(total, exact.to_decimal(0.1))) == Fraction(total) - Fraction(0.1)
    assert exact.to_decimal(0.1) > Decimal("0.1")  # the double's exact value, not its repr


@given(st.floats(min_value=1e-300, max_value=1e300), st.integers(1, 10**6))
def test_split_epsilon_is_the_largest_share_that_never_sums_above(epsilon: float, parts: int) -> None:
    share = exact.split_epsilon(epsilon, parts)
    assert parts * Fraction(share) <= Fraction(epsilon)
    assert parts * Fraction(math.nextafter(share, math.inf)) > Fraction(epsilon)


@given(st.integers(1, 10**9), st.floats(min_value=0.0, max_value=1e290))
def test_times_up_is_the_least_double_not_below_the_product(k: int, value: float) -> None:
    product = exact.times_up(k, value)
    assert Fraction(product) >= k * Fraction(value)
    assert product == 0.0 or Fraction(_down(product)) < k * Fraction(value)


def test_times_up_beyond_the_largest_double_names_the_group_size() -> None:
    with pytest.raises(InvalidParameterError, match="k = 10") as info:
        exact.times_up(10, sys.float_info.max / 2)
    assert info.value.parameter == "k"
