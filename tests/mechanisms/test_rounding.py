"""Derived noise parameters are rounded toward more noise: the exact privacy loss never exceeds the claim.

Each check computes the loss implied by the float parameters the samplers use exactly (fractions.Fraction)
or with mpmath at 60 digits, independently of the library's rounding helpers.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline._exact import divide_down, divide_up, sqrt_up, subtract_up
from dp_pipeline.mechanisms import BoundedLaplace, BoundedStaircase, Gaussian, Laplace

positive = st.floats(min_value=1e-8, max_value=1e8, allow_nan=False, allow_infinity=False)
epsilons = st.floats(min_value=1e-9, max_value=30.0, allow_nan=False, allow_infinity=False)
deltas = st.floats(min_value=1e-300, max_value=0.5, allow_nan=False, allow_infinity=False)


def below(value: float) -> float:
    return math.nextafter(value, -math.inf)


# --------------------------------------------------------------------------------------------- helpers


@given(positive, positive)
def test_directed_division_brackets_the_exact_quotient(a: float, b: float) -> None:
    exact = Fraction(a) / Fraction(b)
    up, down = divide_up(a, b), divide_down(a, b)
    assert Fraction(below(up)) < exact <= Fraction(up)
    assert Fraction(down) <= exact < Fraction(math.nextafter(down, math.inf))


@given(st.integers(min_value=0, max_value=10**6) | positive)
def test_sqrt_up_is_the_least_double_whose_square_covers(value: float) -> None:
    root = sqrt_up(value)
    assert Fraction(root) ** 2 >= Fraction(value)
    assert root == 0.0 or Fraction(below(root)) ** 2 < Fraction(value)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_subtract_up_is_the_least_double_not_below_the_difference(a: float, b: float) -> None:
    difference = subtract_up(a, b)
    exact = Fraction(a) - Fraction(b)
    assert Fraction(below(difference)) < exact <= Fraction(difference)


# --------------------------------------------------------------------------------------------- Laplace


@given(epsilons, positive)
def test_laplace_scale_is_the_least_double_whose_exact_epsilon_is_within_the_claim(
    epsilon: float, sensitivity: float
) -> None:
    m = Laplace(epsilon=epsilon, sensitivity=sensitivity)
    assert Fraction(sensitivity) / Fraction(m.scale) <= Fraction(m.guarantee.epsilon)
    assert Fraction(sensitivity) / Fraction(below(m.scale)) > Fraction(epsilon)  # no more noise than needed
    assert Fraction(m.event.sensitivity) / Fraction(m.event.parameters["scale"]) <= Fraction(epsilon)


def test_laplace_scale_example_that_rounding_to_nearest_gets_wrong() -> None:
    # 1/0.7 rounds to nearest below the exact quotient: that noise would lose slightly more than ε
    assert Fraction(1.0 / 0.7) < 1 / Fraction(0.7)
    assert 1 / Fraction(Laplace(epsilon=0.7, sensitivity=1.0).scale) <= Fraction(0.7)


# --------------------------------------------------------------------------------------------- Gaussian


@given(st.floats(min_value=1e-6, max_value=1e3), positive)
def test_gdp_sigma_gives_at_most_mu(mu: float, sensitivity: float) -> None:
    m = Gaussian.from_mu(mu=mu, sensitivity=sensitivity)
    assert Fraction(sensitivity) / Fraction(m.sigma) <= Fraction(mu)
    assert Fraction(sensitivity) / Fraction(below(m.sigma)) > Fraction(mu)
    assert m.gdp.mu == mu


@given(st.floats(min_value=0.01, max_value=10.0), st.floats(min_value=1e-12, max_value=0.1), positive)
def test_gdp_reading_of_an_approx_calibration_is_rounded_up(
    epsilon: float, delta: float, sensitivity: float
) -> None:
    m = Gaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration="tail_bound")
    assert Fraction(m.gdp.mu) >= Fraction(sensitivity) / Fraction(m.sigma)


@given(st.floats(min_value=1e-6, max_value=0.999999), deltas, positive)
def test_classic_sigma_is_at_least_the_exact_formula(
    epsilon: float, delta: float, sensitivity: float
) -> None:
    sigma = Gaussian(epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration="classic").sigma
    with mpmath.workdps(60):
        exact = mpmath.mpf(sensitivity) * mpmath.sqrt(2 * mpmath.log(mpmath.mpf(1.25) / delta)) / epsilon
        assert mpmath.mpf(sigma) >= exact
        assert mpmath.mpf(sigma) <= exact * (1 + mpmath.mpf(2) ** -40)  # and only by a hair


# --------------------------------------------------------------------------------------------- bounded


def exact_bounded_laplace_loss(m: BoundedLaplace) -> mpmath.mpf:
    """Δ/b + ln(C_b(l + Δ)/C_b(l)) at 60 digits, from the float b and the exact u − l."""
    b, sens = mpmath.mpf(m.scale), mpmath.mpf(m.sensitivity)
    width = mpmath.mpf(m.upper) - mpmath.mpf(m.lower)

    def mass(distance_low: mpmath.mpf, distance_high: mpmath.mpf) -> mpmath.mpf:
        return 1 - (mpmath.exp(-distance_low / b) + mpmath.exp(-distance_high / b)) / 2

    return sens / b + mpmath.log(mass(sens, width - sens) / mass(0, width))


@given(
    st.floats(min_value=1e-9, max_value=20.0),
    st.floats(min_value=-1e3, max_value=1e3),
    st.floats(min_value=1e-3, max_value=1e3),
    st.floats(min_value=0.01, max_value=1.0),
)
def test_bounded_laplace_exact_loss_is_within_epsilon(
    epsilon: float, lower: float, width: float, fraction: float
) -> None:
    upper = lower + width
    sensitivity = fraction * (upper - lower)
    m = BoundedLaplace(epsilon=epsilon, lower=lower, upper=upper, sensitivity=sensitivity)
    with mpmath.workdps(60):
        assert exact_bounded_laplace_loss(m) <= epsilon


@pytest.mark.parametrize("epsilon", [1e-9, 1e-7, 1e-5, 3e-4])
def test_bounded_laplace_small_epsilon_is_within_epsilon(epsilon: float) -> None:
    # ln of the ratio of the two masses, each within rounding of 1/2, is off by ulps of 1: for small ε the
    # calibration must not rest on it
    for sensitivity in (0.1, 1.0, 3.0, 7.0, 9.9):
        m = BoundedLaplace(epsilon=epsilon, lower=0.0, upper=10.0, sensitivity=sensitivity)
        with mpmath.workdps(60):
            assert exact_bounded_laplace_loss(m) <= epsilon


@given(st.floats(min_value=-1e6, max_value=1e6), st.floats(min_value=1e-6, max_value=1e6))
def test_bounded_default_sensitivity_and_width_cover_the_exact_range(lower: float, width: float) -> None:
    upper = lower + width
    exact = Fraction(upper) - Fraction(lower)
    laplace = BoundedLaplace(epsilon=1.0, lower=lower, upper=upper)
    staircase = BoundedStaircase(epsilon=1.0, lower=lower, upper=upper, gamma=0.3)
    assert Fraction(laplace.sensitivity) >= exact and Fraction(laplace.width) >= exact
    assert Fraction(staircase.event.sensitivity) >= exact and Fraction(staircase.width) >= exact


def test_bounded_width_example_that_rounding_to_nearest_gets_wrong() -> None:
    lower, upper = -0.3, 2.0  # 2.0 − (−0.3) = 2.3 rounds below the exact difference
    assert Fraction(upper - lower) < Fraction(upper) - Fraction(lower)
    m = BoundedLaplace(epsilon=1.0, lower=lower, upper=upper)
    assert Fraction(m.sensitivity) >= Fraction(upper) - Fraction(lower)


@given(st.floats(min_value=1e-9, max_value=30.0), st.floats(min_value=0.0, max_value=1.0))
def test_bounded_staircase_exact_loss_is_within_epsilon(epsilon: float, gamma: float) -> None:
    m = BoundedStaircase(epsilon=epsilon, lower=0.0, upper=1.0, gamma=gamma)
    with mpmath.workdps(60):
        hat, g = mpmath.mpf(m.epsilon_hat), mpmath.mpf(gamma)
        w = mpmath.expm1(hat)
        loss = hat + mpmath.log((1 + min(2 * g, 1) * w) / (1 + g * w))
        assert loss <= epsilon
