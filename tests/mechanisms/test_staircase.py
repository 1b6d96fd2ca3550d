"""Staircase mechanism against its definition: exact rationals, quadrature, series, samples."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from dp_pipeline import InvalidParameterError, PureDP
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.mechanisms import Staircase, secure_rng, staircase_cdf, staircase_pdf
from tests.mechanisms.empirical import assert_empirically_dp, seeded


def reference_pdf(x: float, eps: float, sens: float, gamma: float) -> float:
    """The density straight from its definition, with the steps located in exact rational arithmetic.

    f = a on [0, γΔ), e^{−ε}a on [γΔ, Δ), f(x) = e^{−ε} f(x − Δ) for x ≥ Δ, f(−x) = f(x).
    """
    a = (1 - math.exp(-eps)) / (2 * sens * (gamma + math.exp(-eps) * (1 - gamma)))
    rest, width, factor = abs(Fraction(x)), Fraction(sens), 1.0
    while rest >= width:
        rest -= width
        factor *= math.exp(-eps)
    return factor * (a if rest < Fraction(gamma) * width else math.exp(-eps) * a)


def pieces(sens: float, gamma: float, eps: float) -> list[tuple[float, float]]:
    """The intervals of [0, ∞) on which the density is constant, up to where the rest has mass < 1e-17."""
    steps = math.ceil(40 / eps) + 1
    out = []
    for k in range(steps):
        cut = (k + gamma) * sens
        out += [(k * sens, cut), (cut, (k + 1) * sens)]
    return [(lo, hi) for lo, hi in out if hi > lo]


def series_moments(eps: float, gamma: float, sens: float) -> tuple[float, float]:
    """E|X| and E[X²] summed step by step from the definition of the density (not the sampler's form)."""
    b = math.exp(-eps)
    a = (1 - b) / (2 * sens * (gamma + b * (1 - gamma)))
    first = second = 0.0
    for k in range(math.ceil(60 / eps) + 1):
        lo, cut, hi = k * sens, (k + gamma) * sens, (k + 1) * sens
        level = a * b**k
        first += level * (cut**2 - lo**2) / 2 + level * b * (hi**2 - cut**2) / 2
        second += level * (cut**3 - lo**3) / 3 + level * b * (hi**3 - cut**3) / 3
    return 2 * first, 2 * second


CASES = [(1.0, 1.0, None), (0.3, 2.0, 0.0), (2.5, 0.5, 1.0), (0.7, 1.0, 0.1), (4.0, 3.0, 0.9)]


# --- the density --------------------------------------------------------------------------------------------


@given(
    x=st.floats(-60.0, 60.0),
    eps=st.floats(0.05, 10.0),
    sens=st.floats(0.1, 10.0),
    gamma=st.floats(0.0, 1.0),
)
def test_pdf_matches_the_definition(x: float, eps: float, sens: float, gamma: float) -> None:
    u = abs(x) / sens
    if min(abs(u - round(u)), abs(u - math.floor(u) - gamma)) < 1e-9:
        return  # within rounding of a step edge, where float division may pick either side
    assert staircase_pdf(x, eps, sens, gamma) == pytest.approx(reference_pdf(x, eps, sens, gamma), rel=1e-12)


def test_pdf_steps_are_half_open_at_exact_edges() -> None:
    # dyadic Δ and γ make every edge exact in floating point
    eps, sens, gamma = 1.0, 0.5, 0.25
    edges = np.array([0.0, 0.125, 0.5, 0.625, 1.0, 1.125, -0.125, -0.5, -0.625])
    expected = [reference_pdf(v, eps, sens, gamma) for v in edges]
    np.testing.assert_allclose(staircase_pdf(edges, eps, sens, gamma), expected, rtol=1e-14)


@pytest.mark.parametrize(("eps", "sens", "gamma"), CASES)
def test_pdf_integrates_to_one_and_cdf_is_its_integral(eps: float, sens: float, gamma: float | None) -> None:
    g = Staircase(epsilon=eps, sensitivity=sens, gamma=gamma).effective_gamma

    def mass(lo: float, hi: float) -> float:
        return integrate.quad(lambda v: float(staircase_pdf(v, eps, sens, g)), lo, hi)[0]

    assert 2 * sum(mass(lo, hi) for lo, hi in pieces(sens, g, eps)) == pytest.approx(1.0, abs=1e-12)
    for x in np.array([-7.3, -2.0, -0.4, -1e-9, 0.0, 0.05, 0.3, 1.0, 2.7, 11.0]) * sens:
        inner = sum(mass(lo, min(hi, abs(x))) for lo, hi in pieces(sens, g, eps) if lo < abs(x))
        expected = 0.5 + inner if x >= 0 else 0.5 - inner
        assert float(staircase_cdf(x, eps, sens, g)) == pytest.approx(expected, abs=1e-12)


def test_cdf_is_monotone_with_exact_tails() -> None:
    eps, sens, gamma = 1.3, 2.0, 0.4
    x = np.linspace(-50, 50, 20001)
    cdf = staircase_cdf(x, eps, sens, gamma)
    assert np.all(np.diff(cdf) >= 0)
    np.testing.assert_allclose(staircase_cdf(-x, eps, sens, gamma), 1 - cdf, atol=1e-15)
    np.testing.assert_array_equal(staircase_cdf([-np.inf, np.inf], eps, sens, gamma), [0.0, 1.0])
    np.testing.assert_array_equal(staircase_pdf([-np.inf, np.inf], eps, sens, gamma), [0.0, 0.0])
    # far tail: P(X ≤ −kΔ) = e^{−kε}/2 holds with full relative precision, not as 1 − (1 − tiny)
    assert float(staircase_cdf(-400 * sens, eps, sens, gamma)) == pytest.approx(
        math.exp(-400 * eps) / 2, rel=1e-12
    )


# --- moments and the optimal γ ------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "sens", "gamma"), CASES)
def test_variance_and_mean_absolute_error_match_quadrature(
    eps: float, sens: float, gamma: float | None
) -> None:
    m = Staircase(epsilon=eps, sensitivity=sens, gamma=gamma)
    g = m.effective_gamma
    second = 2 * sum(
        integrate.quad(lambda x: x * x * float(m.pdf(x, 0.0)), lo, hi)[0] for lo, hi in pieces(sens, g, eps)
    )
    first = 2 * sum(
        integrate.quad(lambda x: x * float(m.pdf(x, 0.0)), lo, hi)[0] for lo, hi in pieces(sens, g, eps)
    )
    assert m.variance == pytest.approx(second, rel=1e-9)
    assert m.mean_absolute_error == pytest.approx(first, rel=1e-9)


@given(eps=st.floats(0.02, 20.0), sens=st.floats(0.01, 100.0), gamma=st.floats(0.0, 1.0))
def test_closed_form_moments_match_the_series(eps: float, sens: float, gamma: float) -> None:
    m = Staircase(epsilon=eps, sensitivity=sens, gamma=gamma)
    first, second = series_moments(eps, gamma, sens)
    assert m.mean_absolute_error == pytest.approx(first, rel=1e-9)
    assert m.variance == pytest.approx(second, rel=1e-9)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0])
def test_default_gamma_minimises_the_expected_absolute_noise(eps: float) -> None:
    # Geng & Viswanath 2016: for the cost |x| the optimal γ is 1/(1 + e^{ε/2})
    assert Staircase(epsilon=eps, sensitivity=1.0).effective_gamma == pytest.approx(
        1 / (1 + math.exp(eps / 2)), rel=1e-15
    )
    best = optimize.minimize_scalar(
        lambda g: series_moments(eps, g, 1.0)[0],
        bounds=(0.0, 1.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert Staircase(epsilon=eps, sensitivity=1.0).effective_gamma == pytest.approx(best.x, abs=1e-5)


def test_variance_optimal_gamma_differs_from_the_default() -> None:
    # documented: the default is the ℓ1 optimum; the variance has its minimum elsewhere
    eps = 1.0
    best = optimize.minimize_scalar(
        lambda g: Staircase(epsilon=eps, gamma=g, sensitivity=1.0).variance,
        bounds=(0.0, 1.0),
        method="bounded",
    )
    assert abs(best.x - Staircase(epsilon=eps, sensitivity=1.0).effective_gamma) > 1e-3
    assert (
        Staircase(epsilon=eps, gamma=best.x, sensitivity=1.0).variance
        < Staircase(epsilon=eps, sensitivity=1.0).variance
    )


# --- privacy from the exact density -------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("gamma", [0.0, 0.125, None, 0.5, 0.875, 1.0])
def test_density_ratio_of_neighbours_is_bounded_by_exp_epsilon(eps: float, gamma: float | None) -> None:
    m = Staircase(epsilon=eps, sensitivity=1.0, gamma=gamma)
    # dyadic grid: every step edge of a dyadic γ lies on it, and y − shift is exact
    y = np.arange(-20 * 1024, 21 * 1024) / 1024
    bound = math.exp(eps) * (1 + 1e-12)
    for shift in (1 / 1024, 0.25, 1 / 3, 0.5, 0.75, 1.0):
        p, q = m.pdf(y, 0.0), m.pdf(y, shift)
        assert np.all(p <= bound * q)
        assert np.all(q <= bound * p)
    # the bound is attained for inputs a full sensitivity apart
    assert np.max(m.pdf(y, 0.0) / m.pdf(y, 1.0)) == pytest.approx(math.exp(eps), rel=1e-12)


# --- event, sampling ----------------------------------------------------------------------------------------


def test_guarantee_event_and_gamma() -> None:
    m = Staircase(epsilon=0.8, sensitivity=2.0)
    assert m.guarantee == PureDP(0.8)
    assert m.gamma is None
    assert m.effective_gamma == pytest.approx(1 / (1 + math.exp(0.4)))
    event = m.event
    assert event.kind == "staircase"
    assert event.sensitivity == 2.0
    assert event.parameters == {"gamma": m.effective_gamma}
    assert PrivacyEvent.from_dict(event.to_dict()) == event
    assert Staircase(epsilon=0.8, gamma=0.3, sensitivity=1.0).event.parameters == {"gamma": 0.3}


def test_randomize_is_vectorised_and_reproducible() -> None:
    m = Staircase(epsilon=1.0, sensitivity=1.0)
    x = np.arange(12.0).reshape(3, 4)
    a, b = m.randomize(x, rng=secure_rng(7)), m.randomize(x, rng=secure_rng(7))
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, m.randomize(x, rng=secure_rng(8)))
    assert isinstance(m.randomize(5.0, rng=secure_rng(1)), float)
    assert isinstance(m.randomize(5, rng=secure_rng(1)), int)  # an integer query gets integer noise
    assert m.randomize([1, 2, 3]).shape == (3,)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps", "sens", "gamma"), [(1.0, 1.0, None), (0.5, 2.0, 0.0), (2.0, 1.0, 1.0), (0.2, 1.0, 0.7)]
)
def test_sampler_follows_the_staircase_distribution(eps: float, sens: float, gamma: float | None) -> None:
    m = Staircase(epsilon=eps, sensitivity=sens, gamma=gamma)
    noise = m.randomize(np.zeros(200_000), rng=secure_rng(5))
    g = m.effective_gamma
    assert stats.kstest(noise, lambda v: staircase_cdf(v, eps, sens, g)).pvalue > 1e-3
    assert np.var(noise) == pytest.approx(m.variance, rel=0.03)


@pytest.mark.slow
def test_empirical_ratio_within_exp_epsilon() -> None:
    m = Staircase(epsilon=1.0, sensitivity=1.0)
    bins = np.linspace(-6, 7, 66)
    ratio = assert_empirically_dp(seeded(m), 0.0, 1.0, 1.0, bins=bins)
    # outside [0, Δ) the true ratio is e^ε everywhere, so the certified ratio gets close to it
    assert ratio > np.exp(1.0) * 0.85
    # and the check catches noise for twice the claimed ε
    weak = Staircase(epsilon=2.0, sensitivity=1.0)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(seeded(weak), 0.0, 1.0, 1.0, bins=bins)


# --- rejection of bad input ---------------------------------------------------------------------------------

not_a_real = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, True, False, "1.0", b"1", [1.0], 1 + 2j]),
    st.text(max_size=5),
)
non_positive = st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)
outside_unit_interval = st.one_of(
    st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1.0 + 1e-12, allow_nan=False, allow_infinity=False),
)


def assert_rejected(parameter: str, **kwargs: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        Staircase(**{"sensitivity": 1.0, **kwargs})
    assert info.value.parameter == parameter, str(info.value)
    assert repr(parameter) in str(info.value)


@given(bad=st.one_of(not_a_real, non_positive, st.none()))
def test_rejects_bad_epsilon(bad: Any) -> None:
    assert_rejected("epsilon", epsilon=bad)


@given(bad=st.one_of(not_a_real, non_positive, st.none()))
def test_rejects_bad_sensitivity(bad: Any) -> None:
    assert_rejected("sensitivity", epsilon=1.0, sensitivity=bad)


@given(bad=st.one_of(not_a_real, outside_unit_interval))
def test_rejects_bad_gamma(bad: Any) -> None:
    assert_rejected("gamma", epsilon=1.0, gamma=bad)


@given(
    which=st.sampled_from(["epsilon", "sensitivity", "gamma"]),
    bad=st.sampled_from([math.nan, math.inf, -math.inf, -1.0, "x", None]),
    function=st.sampled_from([staircase_pdf, staircase_cdf]),
)
def test_density_functions_reject_bad_parameters(which: str, bad: Any, function: Any) -> None:
    params: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "gamma": 0.5, which: bad}
    with pytest.raises(InvalidParameterError) as info:
        function([0.0, 1.0], **params)
    assert info.value.parameter == which


@given(
    bad=st.one_of(
        st.lists(st.sampled_from([math.nan, math.inf, -math.inf]), min_size=1, max_size=4).map(
            lambda v: [*v, 1.0]
        ),
        st.sampled_from([[], "abc", [[1, 2], [3]], [1 + 2j], [True, False], None, {"a": 1}]),
    )
)
def test_randomize_rejects_bad_values(bad: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        Staircase(epsilon=1.0, sensitivity=1.0).randomize(bad, rng=secure_rng(0))
    assert info.value.parameter == "values"


def test_randomize_rejects_bad_rng() -> None:
    with pytest.raises(InvalidParameterError) as info:
        Staircase(epsilon=1.0, sensitivity=1.0).randomize([1.0], rng=-1)
    assert info.value.parameter == "rng"


def test_gamma_zero_with_underflowing_epsilon_is_a_clear_error() -> None:
    # with γ = 0 the height a = (1 − e^{−ε}) / (2Δ e^{−ε}) overflows once e^{−ε} underflows to 0
    with pytest.raises(InvalidParameterError, match="epsilon"):
        staircase_pdf(np.array([0.5]), 800.0, 1.0, 0.0)
    assert np.isfinite(staircase_pdf(np.array([0.5]), 700.0, 1.0, 0.0)).all()
