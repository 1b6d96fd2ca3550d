"""The sum a frame function releases has the sensitivity its noise is calibrated to.

Every check is against an independent computation with :class:`fractions.Fraction`: the quantised values
trunc(v / 2^j)·2^j summed exactly, and the declared bound M = max(|l|, |u|) (add/remove) or the width
W = max(u, 0) − min(l, 0) (replace-one, one sum) computed in the test. The sums released are captured where
the noise is added, so the test reads what the release reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from dp_pipeline.frames import _aggregates as aggregates
from dp_pipeline.frames import _exact_sums, dp_mean, dp_sum, dp_var
from dp_pipeline.frames._exact_sums import noisy_sums
from dp_pipeline.mechanisms import Gaussian, Laplace, secure_rng

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted", "epsilon": 1.0}  # replace-one neighbours


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Fraction, ...]]]:
    """The exact sums handed to the noise, as Fractions, one tuple per noisy part."""
    seen: list[tuple[Fraction, ...]] = []

    def spy(noise: Any, totals: Any, exponent: int, rng: Any) -> Any:
        seen.append(tuple(Fraction(t) * Fraction(2) ** exponent for t in totals))
        return noisy_sums(noise, totals, exponent, rng)

    monkeypatch.setattr(aggregates, "noisy_sums", spy)
    yield seen


def released_sum(seen: list[tuple[Fraction, ...]], df: pd.DataFrame, low: float, high: float) -> Fraction:
    seen.clear()
    df.pipe(dp_sum, "x", lower=low, upper=high, random_state=secure_rng(0), **OPT_OUT)
    ((value,),) = seen
    return value


def independent_sum(values: list[float], low: float, high: float) -> Fraction:
    """Σ trunc(clip(v)/2^j)·2^j (Fractions), j = e − 53 with M < 2^e (the lattice at ε = 1 is coarser)."""
    j = math.frexp(max(abs(low), abs(high)))[1] - 53
    step = Fraction(2) ** j
    return sum((int(Fraction(min(max(v, low), high)) / step) * step for v in values), Fraction(0))


def width(low: float, high: float) -> Fraction:
    return Fraction(max(high, 0.0)) - Fraction(min(low, 0.0))


def test_a_huge_value_and_ones_move_the_sum_by_at_most_the_width(captured: list[Any]) -> None:
    """[1, 1, 1, 1e16] against [1, 1, 1, 0]: the float sum of the first is 1e16 + 4, so replacing one row
    moved it by 1e16 + 1, more than the width 1e16 the noise is calibrated to. (On the grid of M = 1e16,
    2¹, each 1 truncates to 0.)"""
    low, high = 0.0, 1e16
    big = released_sum(captured, pd.DataFrame({"x": [1.0, 1.0, 1.0, 1e16]}), low, high)
    small = released_sum(captured, pd.DataFrame({"x": [1.0, 1.0, 1.0, 0.0]}), low, high)
    assert big == independent_sum([1.0, 1.0, 1.0, 1e16], low, high) == Fraction(10**16)
    assert small == independent_sum([1.0, 1.0, 1.0, 0.0], low, high) == 0
    assert abs(big - small) <= width(low, high)


ADVERSARIAL = hs.one_of(
    hs.sampled_from([1e16, -1e16, 1.0, -1.0, 2.0**-1074, -(2.0**-1074), 2.0**-1022, 0.1, 1e16 - 2.0]),
    hs.floats(-1e16, 1e16, allow_nan=False, allow_subnormal=True),
)


@settings(max_examples=40, deadline=None)
@given(
    values=hs.lists(ADVERSARIAL, min_size=1, max_size=40),
    position=hs.integers(0, 39),
    other=ADVERSARIAL,
)
def test_a_replaced_row_moves_the_released_sum_by_at_most_the_width(
    values: list[float], position: int, other: float
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        seen: list[tuple[Fraction, ...]] = []

        def spy(noise: Any, totals: Any, exponent: int, rng: Any) -> Any:
            seen.append(tuple(Fraction(t) * Fraction(2) ** exponent for t in totals))
            return np.zeros(len(totals))

        patch.setattr(aggregates, "noisy_sums", spy)
        low, high = -1e16, 3e15
        neighbour = list(values)
        neighbour[position % len(values)] = other
        first = released_sum(seen, pd.DataFrame({"x": values}), low, high)
        second = released_sum(seen, pd.DataFrame({"x": neighbour}), low, high)
    assert first == independent_sum(values, low, high)
    assert second == independent_sum(neighbour, low, high)
    assert abs(first - second) <= width(low, high)


def test_many_rows_in_one_group_sum_exactly(captured: list[Any]) -> None:
    """2²¹ rows of the largest float below 1 and one of 2⁻⁵² per block: a float sum drops the small ones;
    the released sum is the exact sum of the quantised values."""
    n = 2**21
    values = np.full(n, 1.0 - 2.0**-53)
    values[::1024] = 2.0**-52
    df = pd.DataFrame({"x": values, "g": "a"})
    captured.clear()
    df.pipe(dp_sum, "x", lower=0.0, upper=1.0, by="g", keys=["a"], random_state=secure_rng(1), **OPT_OUT)
    ((got,),) = captured
    big = n - n // 1024
    # with M = 1 the grid is 2⁻⁵²: 1 − 2⁻⁵³ truncates to 1 − 2⁻⁵², and 2⁻⁵² stays
    assert got == big * (1 - Fraction(1, 2**52)) + (n // 1024) * Fraction(1, 2**52)


def test_every_part_of_a_mean_and_a_variance_is_exact(captured: list[Any]) -> None:
    values = [1e16, -1e16, 1.0, 1.0, 1.0, 2.0**-1074]
    df = pd.DataFrame({"x": values})
    for function, parts in ((dp_mean, 2), (dp_var, 3)):
        captured.clear()
        df.pipe(function, "x", lower=-1e16, upper=1e16, random_state=secure_rng(2), **OPT_OUT)
        assert len(captured) == parts
        assert captured[-1] == (len(values),)  # the count
        # the centre is 0: the centred sum is the plain sum on the grid of 1e16
        assert captured[0] == (independent_sum(values, -1e16, 1e16),)


@pytest.mark.parametrize(
    "noise", [Laplace(epsilon=1.0, sensitivity=3.0), Gaussian(epsilon=1.0, delta=1e-6, sensitivity=3.0)]
)
def test_the_noise_of_an_exact_sum_is_the_mechanism_noise_on_that_sum(noise: Any) -> None:
    """A sum a float holds gets exactly the mechanism's own release (same draws); a sum moved by whole
    lattice steps a·λ gets the same release moved by a·λ, rounded once: the release is a function of the
    cell of S + X, whatever the size of S."""
    lattice = Fraction(noise.lattice)
    for totals, exponent in (([5, 12345, 0], -3), ([7], 2)):
        exact = [float(Fraction(t) * Fraction(2) ** exponent) for t in totals]
        mine = noisy_sums(noise, totals, exponent, secure_rng(7))
        assert mine.tolist() == noise.randomize(np.array(exact), secure_rng(7)).tolist()
        per_step = lattice / Fraction(2) ** exponent  # λ in grid units
        a = 3**60 * per_step.denominator
        steps = int(a * per_step)
        moved = noisy_sums(noise, [t + steps for t in totals], exponent, secure_rng(7))
        assert moved.tolist() == [float(Fraction(v) + a * lattice) for v in mine]


def test_the_grid_is_never_finer_than_the_float_residual_allows() -> None:
    """For a noise whose lattice is far above the values (ε tiny), the grid follows the lattice."""
    noise = Laplace(epsilon=1e-9, sensitivity=1.0)
    k = math.frexp(noise.lattice)[1] - 1
    assert _exact_sums.grid_exponent(0.0, 1.0, noise) == k - 53
    assert _exact_sums.grid_exponent(0.0, 1.0, Laplace(epsilon=1.0, sensitivity=1.0)) == 1 - 53
