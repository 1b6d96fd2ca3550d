"""Bounded Laplace and bounded staircase mechanisms against the definition of ε-LDP and independent
references.

The reference computations here do not reuse the mechanisms' internals: densities are rebuilt from
scipy.stats.laplace or from the unbounded staircase functions, normalising constants and moments come from
scipy quadrature, and privacy is checked from the exact pdf over fine grids of (t, t', y).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import integrate, stats

from dp_pipeline import InvalidParameterError, PureDP
from dp_pipeline.mechanisms import BoundedLaplace, BoundedStaircase, secure_rng, staircase_cdf, staircase_pdf
from tests.mechanisms.empirical import assert_empirically_dp, seeded

GAMMAS = [float(g) for g in np.linspace(0.0, 1.0, 11)]
EPSILONS = [0.2, 1.0, 5.0]
RANGES = [(0.0, 1.0), (10.0, 20.0), (1.67, 1.85), (-5.0, 3.0)]


def table1_epsilon_hat(epsilon: float, gamma: float) -> float:
    """Kim, Park & Lee's Table 1, transcribed as printed and evaluated with 50 digits (it cancels badly)."""
    with mpmath.workdps(50):
        e, g = mpmath.exp(epsilon), mpmath.mpf(gamma)
        if gamma < 0.5:
            b = g * e - 1 + 2 * g
            return float(mpmath.log(2 * (1 - g) * e / (-b + mpmath.sqrt(b**2 + 8 * g * (1 - g) * e))))
        if gamma < 1.0:
            root = mpmath.sqrt((g * e) ** 2 + 4 * g * (1 - g) * e)
            return float(mpmath.log(2 * (1 - g) * e / (-g * e + root)))
        return epsilon


def reference_staircase_density(
    y: NDArray[np.float64], t: NDArray[np.float64], eps_hat: float, gamma: float, lower: float, upper: float
) -> NDArray[np.float64]:
    """p(y|t) of a bounded staircase run with ``eps_hat``, built from the unbounded pdf and cdf."""
    width = upper - lower
    mass = staircase_cdf(upper - t, eps_hat, width, gamma) - staircase_cdf(lower - t, eps_hat, width, gamma)
    inside = (y >= lower) & (y <= upper)
    return np.where(inside, staircase_pdf(y - t, eps_hat, width, gamma) / mass, 0.0)


def grid(lower: float, upper: float, n: int, extra: list[float]) -> NDArray[np.float64]:
    return np.union1d(np.linspace(lower, upper, n), np.clip(extra, lower, upper))


def max_ratio_all_pairs(density: NDArray[np.float64]) -> float:
    """sup over (t, t', y) of p(y|t)/p(y|t') from a matrix density[t, y]: max_y max_t p / min_t p."""
    return float(np.max(density.max(axis=0) / density.min(axis=0)))


# ---------------------------------------------------------------------------------------------------------
# Contract values and the paper's worked example
# ---------------------------------------------------------------------------------------------------------


def test_contract_values_and_paper_example() -> None:
    # Δ = u − l: C_b(u) = C_b(l), so the calibration is b = Δ/ε (rounded up by at most 1e-12 relative)
    scale = BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0).scale
    assert 10.0 <= scale <= 10.0 * (1 + 1e-11)
    # Kim, Park & Lee: t = 18, l = 10, u = 20, γ = 0.3, ε = 1 gives ε̂ ≈ 0.7703. The certified value agrees
    # with Table 1 for γ < 1/2 up to the downward rounding margin.
    eps_hat = BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3).epsilon_hat
    assert round(eps_hat, 4) == 0.7703
    table = table1_epsilon_hat(1.0, 0.3)
    assert eps_hat <= table
    assert eps_hat == pytest.approx(table, rel=1e-10)


@pytest.mark.parametrize("epsilon", [0.01, 0.2, 1.0, 5.0, 10.0, 30.0])
def test_epsilon_hat_against_table1(epsilon: float) -> None:
    """Table 1 is right for γ < 1/2 and too large for 1/2 ≤ γ < 1 (ε̂ ≥ ε there: not ε-LDP)."""
    for gamma in np.linspace(0.0, 1.0, 41):
        ours = BoundedStaircase(epsilon=epsilon, lower=0.0, upper=1.0, gamma=gamma).epsilon_hat
        assert 0.0 < ours <= epsilon
        if gamma < 0.5 or gamma == 1.0:
            assert ours <= table1_epsilon_hat(epsilon, gamma)
            assert ours == pytest.approx(table1_epsilon_hat(epsilon, gamma), rel=1e-9)
        else:
            assert table1_epsilon_hat(epsilon, gamma) >= epsilon * (1 - 1e-12)
            assert ours < epsilon


@pytest.mark.parametrize("gamma", [0.5, 0.6, 0.75, 0.9])
def test_table1_value_for_large_gamma_breaks_ldp(gamma: float) -> None:
    """Run with the table's ε̂, the mechanism's worst density ratio exceeds e^ε (independent density)."""
    lower, upper, epsilon = 10.0, 20.0, 1.0
    eps_table = table1_epsilon_hat(epsilon, gamma)
    t = np.array([lower, lower + gamma * (upper - lower) * (1 + 1e-9)])
    y = np.linspace(lower, upper, 2001)
    density = reference_staircase_density(y[None, :], t[:, None], eps_table, gamma, lower, upper)
    assert max_ratio_all_pairs(density) > math.exp(epsilon) * 1.05


# ---------------------------------------------------------------------------------------------------------
# ε-LDP from the exact pdf over fine grids of (t, t', y)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bounds", RANGES)
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_bounded_staircase_is_ldp_and_tight_on_a_grid(epsilon: float, bounds: tuple[float, float]) -> None:
    lower, upper = bounds
    width = upper - lower
    for gamma in GAMMAS:
        m = BoundedStaircase(epsilon=epsilon, lower=lower, upper=upper, gamma=gamma)
        # candidate worst cases beside the regular grid: the midpoint and just past l + γΔ (and mirrored)
        edge = gamma * width * (1 + 1e-9)
        critical = [lower + edge, upper - edge, (lower + upper) / 2]
        t = grid(lower, upper, 201, critical)
        y = grid(lower, upper, 1001, critical)
        density = m.pdf(y[None, :], t[:, None])
        assert np.all(density > 0)
        ratio = max_ratio_all_pairs(density)
        assert ratio <= math.exp(epsilon) * (1 + 1e-9), (gamma, ratio)
        if 0.0 < gamma < 1.0:
            # the calibration is not wastefully loose: the worst case reaches e^ε (for γ ≥ 1/2 only on
            # outputs y in [l, t' − γΔ], a short interval at l, hence the grid includes y = l)
            assert ratio >= math.exp(epsilon) * (1 - 1e-6), (gamma, ratio)
        else:
            # γ = 0 and γ = 1 give a uniform output on (l, u): no privacy loss at all (the grid's endpoints
            # carry the staircase's values on a null set, which the first assertion covers)
            assert max_ratio_all_pairs(density[:, 1:-1]) == pytest.approx(1.0, rel=1e-12)


def laplace_grid_ratio(m: BoundedLaplace, t: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """sup p(y|t)/p(y|t') over grid pairs with |t − t'| ≤ Δ, from an independent density (scipy)."""
    b = m.scale
    law = stats.laplace(loc=t[:, None], scale=b)
    mass = law.cdf(m.upper) - law.cdf(m.lower)
    density = law.pdf(y[None, :]) / mass
    np.testing.assert_allclose(m.pdf(y[None, :], t[:, None]), density, rtol=1e-10)
    worst = 0.0
    for i, ti in enumerate(t):
        near = np.abs(t - ti) <= m.sensitivity * (1 + 1e-12)
        worst = max(worst, float(np.max(density[i] / density[near].min(axis=0))))
    return worst


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (10.0, 20.0), (1.67, 1.85)])
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_bounded_laplace_is_dp_and_tight_on_a_grid(epsilon: float, bounds: tuple[float, float]) -> None:
    lower, upper = bounds
    width = upper - lower
    for fraction in (1.0, 0.5, 0.2):
        m = BoundedLaplace(epsilon=epsilon, lower=lower, upper=upper, sensitivity=fraction * width)
        t = grid(lower, upper, 101, [lower + fraction * width, upper - fraction * width])
        y = grid(lower, upper, 801, [])
        ratio = laplace_grid_ratio(m, t, y)
        assert ratio <= math.exp(epsilon) * (1 + 1e-9)
        assert ratio >= math.exp(epsilon) * (1 - 1e-9)  # attained at t = l, t' = l + Δ, y = l


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_bounded_laplace_needs_more_than_delta_over_epsilon_below_the_range(epsilon: float) -> None:
    """Truncation breaks b = Δ/ε: the calibration is needed, and the grid check detects its absence."""
    m = BoundedLaplace(epsilon=epsilon, lower=0.0, upper=10.0, sensitivity=2.0)
    assert m.scale > 2.0 / epsilon
    naive = stats.laplace(loc=np.array([0.0, 2.0])[:, None], scale=2.0 / epsilon)
    y = np.linspace(0.0, 10.0, 1001)
    density = naive.pdf(y[None, :]) / (naive.cdf(10.0) - naive.cdf(0.0))
    assert max_ratio_all_pairs(density) > math.exp(epsilon) * (1 + 1e-3)


def test_calibrations_are_monotone() -> None:
    epsilons = np.geomspace(0.01, 50, 60)
    scales = [BoundedLaplace(epsilon=e, lower=0.0, upper=1.0, sensitivity=0.3).scale for e in epsilons]
    assert np.all(np.diff(scales) < 0)
    assert all(s >= 0.3 / e for s, e in zip(scales, epsilons, strict=True))
    for gamma in (0.1, 0.3, 0.7):
        hats = [BoundedStaircase(epsilon=e, lower=0.0, upper=1.0, gamma=gamma).epsilon_hat for e in epsilons]
        assert np.all(np.diff(hats) > 0)
        assert all(h < e for h, e in zip(hats, epsilons, strict=True))


# ---------------------------------------------------------------------------------------------------------
# Densities, distribution functions and moments against quadrature
# ---------------------------------------------------------------------------------------------------------

STAIRCASES = [
    BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3),
    BoundedStaircase(epsilon=0.2, lower=0.0, upper=1.0, gamma=0.75),
    BoundedStaircase(epsilon=5.0, lower=1.67, upper=1.85, gamma=0.18),
    BoundedStaircase(epsilon=2.0, lower=-5.0, upper=3.0, gamma=0.0),
    BoundedStaircase(epsilon=2.0, lower=-5.0, upper=3.0, gamma=1.0),
]
LAPLACES = [
    BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0),
    BoundedLaplace(epsilon=0.3, lower=-2.0, upper=5.0, sensitivity=1.5),
    BoundedLaplace(epsilon=8.0, lower=1.67, upper=1.85),
]


def quad_moments(m: BoundedStaircase | BoundedLaplace, t: float) -> tuple[float, float, float]:
    width = m.upper - m.lower
    kinks = [t] if isinstance(m, BoundedLaplace) else [t - m.gamma * width, t + m.gamma * width]
    points = [p for p in kinks if m.lower < p < m.upper]

    def quad(f: object) -> float:
        kw = {"points": points, "epsabs": 1e-13, "epsrel": 1e-12, "limit": 200}
        return float(integrate.quad(f, m.lower, m.upper, **kw)[0])

    mass = quad(lambda y: m.pdf(y, t))
    return mass, quad(lambda y: y * m.pdf(y, t)), quad(lambda y: (y - t) ** 2 * m.pdf(y, t))


def quad_cdf(m: BoundedStaircase | BoundedLaplace, t: float, v: float) -> float:
    width = m.upper - m.lower
    kinks = [t] if isinstance(m, BoundedLaplace) else [t - m.gamma * width, t + m.gamma * width]
    points = [p for p in kinks if m.lower < p < v] or None
    return float(integrate.quad(lambda y: m.pdf(y, t), m.lower, v, points=points, limit=200)[0])


@pytest.mark.parametrize("m", [*STAIRCASES, *LAPLACES], ids=repr)
def test_pdf_integrates_to_one_and_moments_match_quadrature(m: BoundedStaircase | BoundedLaplace) -> None:
    for t in np.linspace(m.lower, m.upper, 9):
        mass, mean, second = quad_moments(m, float(t))
        assert mass == pytest.approx(1.0, abs=1e-9)
        assert m.expected_output(t) == pytest.approx(mean, rel=1e-9, abs=1e-12 * (m.upper - m.lower))
        assert m.mse(t) == pytest.approx(second, rel=1e-8)
        assert m.variance_at(t) == pytest.approx(second - (mean - t) ** 2, rel=1e-7, abs=1e-14)
        ys = np.linspace(m.lower, m.upper, 7)
        cdf = [quad_cdf(m, float(t), float(v)) for v in ys]
        np.testing.assert_allclose(m.cdf(ys, t), cdf, atol=1e-9)
    assert m.pdf(m.lower - 1.0, m.lower) == 0.0
    assert m.pdf(m.upper + 1.0, m.upper) == 0.0
    assert m.cdf(m.lower - 1.0, m.upper) == 0.0
    assert m.cdf(m.upper + 1.0, m.lower) == 1.0


@pytest.mark.parametrize("m", STAIRCASES, ids=repr)
def test_staircase_normaliser_and_pdf_match_the_unbounded_functions(m: BoundedStaircase) -> None:
    t = np.linspace(m.lower, m.upper, 33)
    y = np.linspace(m.lower, m.upper, 257)
    width = m.upper - m.lower
    expected = staircase_cdf(m.upper - t, m.epsilon_hat, width, m.gamma) - staircase_cdf(
        m.lower - t, m.epsilon_hat, width, m.gamma
    )
    np.testing.assert_allclose(m.normaliser(t), expected, rtol=1e-12)
    reference = reference_staircase_density(y[None, :], t[:, None], m.epsilon_hat, m.gamma, m.lower, m.upper)
    np.testing.assert_allclose(m.pdf(y[None, :], t[:, None]), reference, rtol=1e-12)


def test_pdf_and_moments_broadcast_and_return_floats_for_scalars() -> None:
    m = BoundedStaircase(epsilon=1.0, lower=0.0, upper=1.0, gamma=0.3)
    assert isinstance(m.pdf(0.5, 0.2), float)
    assert isinstance(m.mse(0.2), float)
    assert m.pdf(np.zeros((2, 3)), np.array([0.0, 0.5, 1.0])).shape == (2, 3)
    assert m.expected_output([0.0, 1.0]).shape == (2,)
    # the bounded mechanisms pull outputs inward: E[Y | l] > l and E[Y | u] < u
    assert m.expected_output(0.0) > 0.0 and m.expected_output(1.0) < 1.0


# ---------------------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------------------


def test_randomize_is_vectorised_reproducible_and_inside_the_range() -> None:
    for m in (STAIRCASES[0], LAPLACES[0]):
        x = np.linspace(m.lower, m.upper, 12).reshape(3, 4)
        a, b = m.randomize(x, rng=secure_rng(5)), m.randomize(x, rng=secure_rng(5))
        assert a.shape == (3, 4)
        np.testing.assert_array_equal(a, b)
        assert isinstance(m.randomize(m.lower, rng=secure_rng(1)), float)
        out = m.randomize(np.full(10_000, m.upper), rng=secure_rng(2))
        assert np.all((out >= m.lower) & (out <= m.upper))
        assert not np.any(np.isnan(out))


def reference_cdf(m: BoundedStaircase | BoundedLaplace, t: float) -> Callable[[Any], Any]:
    """P(Y ≤ y | t) rebuilt from the unbounded staircase's cdf or from scipy's Laplace."""
    if isinstance(m, BoundedStaircase):
        args = (m.epsilon_hat, m.upper - m.lower, m.gamma)
        low, high = staircase_cdf(m.lower - t, *args), staircase_cdf(m.upper - t, *args)
        return lambda y: (staircase_cdf(y - t, *args) - low) / (high - low)
    law: Any = stats.laplace(loc=t, scale=m.scale)
    low, high = law.cdf(m.lower), law.cdf(m.upper)
    return lambda y: (law.cdf(y) - low) / (high - low)


@pytest.mark.slow
@pytest.mark.parametrize("m", [STAIRCASES[0], STAIRCASES[1], STAIRCASES[2], *LAPLACES], ids=repr)
def test_samples_follow_the_exact_distribution(m: BoundedStaircase | BoundedLaplace) -> None:
    width = m.upper - m.lower
    for t in (m.lower, m.lower + 0.37 * width, m.upper):
        out = m.randomize(np.full(100_000, t), rng=secure_rng(17))
        cdf = reference_cdf(m, t)
        assert stats.kstest(out, cdf).pvalue > 1e-4, t


@pytest.mark.slow
def test_empirical_ratio_of_the_bounded_staircase() -> None:
    lower, upper = 10.0, 20.0
    m = BoundedStaircase(epsilon=1.0, lower=lower, upper=upper, gamma=0.3)
    bins = np.linspace(lower, upper, 41)
    release = seeded(m)
    # the neighbouring inputs at the two ends of the range: the true ratio is e^ε̂ there
    ratio = assert_empirically_dp(release, lower, upper, 1.0, bins)
    assert ratio > 0.9 * math.exp(m.epsilon_hat)
    # the worst-case pair (l and the midpoint) reaches e^ε, and a mechanism with a larger ε is caught
    ratio = assert_empirically_dp(release, lower, (lower + upper) / 2, 1.0, bins)
    assert ratio > 0.9 * math.exp(1.0)
    loose = BoundedStaircase(epsilon=1.5, lower=lower, upper=upper, gamma=0.3)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(seeded(loose), lower, (lower + upper) / 2, 1.0, bins)


@pytest.mark.slow
def test_empirical_ratio_of_the_bounded_laplace() -> None:
    m = BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0)
    bins = np.linspace(0.0, 10.0, 41)
    ratio = assert_empirically_dp(seeded(m), 0.0, 10.0, 1.0, bins)
    assert ratio > 0.85 * math.exp(1.0)
    loose = BoundedLaplace(epsilon=1.5, lower=0.0, upper=10.0)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(seeded(loose), 0.0, 10.0, 1.0, bins)


# ---------------------------------------------------------------------------------------------------------
# Privacy events and guarantees
# ---------------------------------------------------------------------------------------------------------


def test_guarantees_and_events() -> None:
    s = BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3)
    assert s.guarantee == PureDP(1.0)
    assert s.event.kind == "bounded_staircase"
    assert s.event.parameters == {"gamma": 0.3, "epsilon_hat": s.epsilon_hat, "lower": 10.0, "upper": 20.0}
    assert s.event.sensitivity == 10.0
    lap = BoundedLaplace(epsilon=0.5, lower=0.0, upper=4.0, sensitivity=1.0)
    assert lap.guarantee == PureDP(0.5)
    assert lap.event.kind == "bounded_laplace"
    assert lap.event.parameters == {"scale": lap.scale, "lower": 0.0, "upper": 4.0}
    assert lap.event.sensitivity == 1.0
    assert BoundedLaplace(epsilon=0.5, lower=0.0, upper=4.0).sensitivity == 4.0


# ---------------------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------------------

NOT_FINITE = st.sampled_from([float("nan"), float("inf"), -float("inf")])
WRONG_TYPE = st.one_of(st.text(), st.booleans(), st.none(), st.lists(st.floats(), max_size=2))


def build(name: str, value: object) -> None:
    kwargs: dict[str, object] = {"epsilon": 1.0, "lower": 0.0, "upper": 1.0}
    cls = BoundedLaplace if name == "sensitivity" else BoundedStaircase
    if cls is BoundedStaircase:
        kwargs["gamma"] = 0.3
    kwargs[name] = value
    cls(**kwargs)  # type: ignore[arg-type]


@given(
    name=st.sampled_from(["epsilon", "lower", "upper", "gamma", "sensitivity"]),
    bad=st.one_of(NOT_FINITE, WRONG_TYPE),
)
def test_constructors_reject_non_numbers(name: str, bad: object) -> None:
    if name == "sensitivity" and bad is None:
        return  # None is the documented default: u − l
    with pytest.raises(InvalidParameterError, match=name) as info:
        build(name, bad)
    assert info.value.parameter == name


@given(
    case=st.one_of(
        st.tuples(st.just("epsilon"), st.floats(max_value=0.0)),
        st.tuples(st.just("gamma"), st.floats(max_value=-1e-12) | st.floats(min_value=1.0 + 1e-12)),
        st.tuples(st.just("upper"), st.floats(max_value=0.0)),
        st.tuples(st.just("lower"), st.floats(min_value=1.0, allow_infinity=False)),
        st.tuples(st.just("sensitivity"), st.floats(max_value=0.0) | st.floats(min_value=1.0 + 1e-9)),
    )
)
def test_constructors_reject_out_of_range_values(case: tuple[str, float]) -> None:
    name, bad = case
    expected = "upper" if name == "lower" else name  # lower ≥ upper is reported on 'upper'
    with pytest.raises(InvalidParameterError, match=expected) as info:
        build(name, bad)
    assert info.value.parameter == expected


@given(
    values=st.one_of(
        st.lists(st.floats(min_value=1.0 + 1e-9, allow_nan=False, allow_infinity=False), min_size=1),
        st.lists(st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False), min_size=1),
        st.lists(NOT_FINITE, min_size=1),
        st.just([]),
        st.text(),
        st.just([[0.1, 0.2], [0.3]]),
        st.just([True, False]),
        st.just([0.5 + 1j]),
    ),
    which=st.sampled_from(["staircase", "laplace"]),
)
def test_randomize_rejects_bad_values(values: object, which: str) -> None:
    m = (
        BoundedStaircase(epsilon=1.0, lower=0.0, upper=1.0, gamma=0.2)
        if which == "staircase"
        else BoundedLaplace(epsilon=1.0, lower=0.0, upper=1.0)
    )
    with pytest.raises(InvalidParameterError, match="values") as info:
        m.randomize(values, rng=secure_rng(0))
    assert info.value.parameter == "values"


def test_out_of_range_inputs_are_rejected_not_clipped() -> None:
    m = BoundedLaplace(epsilon=1.0, lower=0.0, upper=1.0)
    with pytest.raises(InvalidParameterError, match=r"declared range"):
        m.randomize([0.5, 1.0000001])
    with pytest.raises(InvalidParameterError, match="'t'"):
        m.pdf(0.5, 2.0)
    with pytest.raises(InvalidParameterError, match="'t'"):
        BoundedStaircase(epsilon=1.0, lower=0.0, upper=1.0, gamma=0.2).mse([-0.1])
    with pytest.raises(InvalidParameterError, match="rng"):
        m.randomize([0.5], rng="seed")  # type: ignore[arg-type]
