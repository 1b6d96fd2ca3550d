"""Gaussian mechanism against its definition: mpmath at high precision, dp-accounting, quadrature, samples."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import integrate, stats

from dp_pipeline import ApproxDP, GaussianDP, InvalidParameterError
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.mechanisms import Gaussian, secure_rng
from tests.mechanisms.empirical import assert_empirically_dp, clopper_pearson, seeded

mpmath.mp.dps = 50


def mp_delta(eps: float, sigma: float, sens: float) -> mpmath.mpf:
    """Exact δ(ε) of N(0, σ²) noise at L2 sensitivity S (Balle & Wang 2018, Thm 8), at 50 digits."""
    eps, sigma, sens = mpmath.mpf(eps), mpmath.mpf(sigma), mpmath.mpf(sens)
    a, b = sens / (2 * sigma) - eps * sigma / sens, -sens / (2 * sigma) - eps * sigma / sens
    return mpmath.ncdf(a) - mpmath.exp(eps) * mpmath.ncdf(b)


def mp_tail(eps: float, sigma: float, sens: float) -> mpmath.mpf:
    """The privacy loss's tail P(L > ε) = Φ(S/(2σ) − εσ/S) (Balle & Wang 2018, Sec. 3), at 50 digits."""
    eps, sigma, sens = mpmath.mpf(eps), mpmath.mpf(sigma), mpmath.mpf(sens)
    return mpmath.ncdf(sens / (2 * sigma) - eps * sigma / sens)


def mp_least_sigma(eps: float, delta: float, sens: float) -> mpmath.mpf:
    """The least σ with exact δ(ε) ≤ δ, by plain bisection at 50 digits (δ(ε) decreases in σ)."""
    lo, hi = mpmath.mpf("1e-6") * sens, mpmath.mpf(sens)
    while mp_delta(eps, float(hi), sens) > delta:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mp_delta(eps, mid, sens) > delta else (lo, mid)
    return hi


# --- the worked values --------------------------------------------------------------------------------------


def test_worked_example_values() -> None:
    # Balle & Wang's setting, ε = 1, δ = 1e-5, S = 1: analytic, tail-bound and classic σ.
    assert Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0).sigma == pytest.approx(3.73, abs=5e-3)
    assert Gaussian(
        epsilon=1.0, delta=1e-5, calibration="tail_bound", sensitivity=1.0
    ).sigma == pytest.approx(4.38, abs=5e-3)
    classic = Gaussian(epsilon=1.0, delta=1e-5, calibration="classic", sensitivity=1.0).sigma
    assert classic == pytest.approx(4.84, abs=5e-3)
    assert classic == pytest.approx(math.sqrt(2 * math.log(1.25 / 1e-5)), rel=1e-15)


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-5), (1.5, 1e-10), (3.0, 0.1), (4.9, 1e-5)])
def test_classic_at_epsilon_one_or_more_where_the_exact_condition_holds(epsilon: float, delta: float) -> None:
    # the public contract calls calibration="classic" at ε = 1; beyond its theorem the formula is accepted
    # only where mpmath's exact δ(ε) of its σ (Balle & Wang, Thm 8) is within δ
    sigma = Gaussian(epsilon=epsilon, delta=delta, calibration="classic", sensitivity=2.0).sigma
    assert sigma == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25 / delta)) / epsilon, rel=1e-12)
    assert mp_delta(epsilon, sigma, 2.0) <= delta


@pytest.mark.parametrize(("epsilon", "delta"), [(10.0, 1e-5), (5.0, 0.5), (20.0, 0.1)])
def test_classic_refuses_where_its_sigma_is_below_the_exact_one(epsilon: float, delta: float) -> None:
    classic = math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    assert mp_delta(epsilon, classic, 1.0) > delta  # the formula is not (ε, δ)-DP here
    with pytest.raises(InvalidParameterError, match="analytic") as info:
        Gaussian(epsilon=epsilon, delta=delta, calibration="classic", sensitivity=1.0)
    assert info.value.parameter == "delta"


# --- analytic calibration against independent computations --------------------------------------------------


@pytest.mark.parametrize(
    ("eps", "delta", "sens"),
    [
        (1.0, 1e-5, 1.0),
        (0.1, 1e-6, 1.0),
        (0.5, 1e-10, 3.0),
        (3.0, 1e-3, 0.2),
        (8.0, 1e-12, 1.0),
        (0.01, 0.1, 1.0),
        (20.0, 1e-40, 2.0),
        (1.0, 0.5, 1.0),
    ],
)
def test_analytic_sigma_is_the_least_sigma_at_50_digits(eps: float, delta: float, sens: float) -> None:
    sigma = Gaussian(epsilon=eps, delta=delta, sensitivity=sens).sigma
    reached = mp_delta(eps, sigma, sens)
    assert reached <= delta  # private
    assert reached == pytest.approx(delta, rel=1e-8)  # and not needlessly noisy
    assert mp_delta(eps, sigma * (1 - 1e-6), sens) > delta  # less noise would break (ε, δ)-DP
    root = mp_least_sigma(eps, delta, sens)
    assert sigma >= root
    assert sigma == pytest.approx(float(root), rel=1e-10)


@pytest.mark.parametrize(("eps", "delta", "sens"), [(1.0, 1e-5, 1.0), (0.3, 1e-8, 2.0), (3.0, 1e-3, 1.0)])
def test_analytic_sigma_matches_the_pld_of_dp_accounting(eps: float, delta: float, sens: float) -> None:
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    sigma = Gaussian(epsilon=eps, delta=delta, sensitivity=sens).sigma

    def pld_delta(s: float) -> float:
        dist = pld.from_gaussian_mechanism(standard_deviation=s, sensitivity=sens)
        return float(dist.get_delta_for_epsilon(eps))

    # dp-accounting's pessimistic (connect-the-dots) PLD reproduces δ to far better than this tolerance
    assert pld_delta(sigma) == pytest.approx(delta, rel=1e-6)
    assert pld_delta(sigma * 0.999) > delta * 1.001


@pytest.mark.slow
def test_analytic_sigma_matches_the_calibration_of_dp_accounting() -> None:
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    mechanism_calibration = pytest.importorskip("dp_accounting.mechanism_calibration")
    pld_privacy_accountant = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")

    eps, delta = 1.0, 1e-5
    noise_multiplier = mechanism_calibration.calibrate_dp_mechanism(
        pld_privacy_accountant.PLDAccountant,
        dp_event.GaussianDpEvent,
        eps,
        delta,
        bracket_interval=mechanism_calibration.LowerEndpointAndGuess(0.1, 1.0),
        tol=1e-4,
    )
    sigma = Gaussian(epsilon=eps, delta=delta, sensitivity=1.0).sigma
    # dp-accounting returns the upper end of its final bracket: no less than the least σ, within tol
    assert sigma <= noise_multiplier <= sigma + 2e-4


@given(
    eps=st.floats(1e-3, 50.0),
    log10_delta=st.floats(-15.0, math.log10(0.9)),
    sens=st.floats(1e-3, 1e3),
)
def test_analytic_sigma_is_exact_and_below_the_other_calibrations(
    eps: float, log10_delta: float, sens: float
) -> None:
    delta = 10.0**log10_delta
    analytic = Gaussian(epsilon=eps, delta=delta, sensitivity=sens).sigma
    tail = Gaussian(epsilon=eps, delta=delta, sensitivity=sens, calibration="tail_bound").sigma
    assert mp_delta(eps, analytic, sens) <= delta
    assert mp_delta(eps, analytic * (1 - 1e-6), sens) > delta
    assert analytic <= tail
    # the tail bound is a valid calibration: its exact δ(ε) is at most its P(L > ε) = δ
    assert mp_delta(eps, tail, sens) <= mp_tail(eps, tail, sens) <= delta
    if eps < 1.0:
        classic = Gaussian(epsilon=eps, delta=delta, sensitivity=sens, calibration="classic").sigma
        assert mp_delta(eps, classic, sens) <= delta
        assert analytic <= classic


@given(eps=st.floats(1e-6, 1e3), log10_delta=st.floats(-300.0, -1e-6))
def test_analytic_sigma_is_private_at_extreme_parameters(eps: float, log10_delta: float) -> None:
    delta = 10.0**log10_delta
    sigma = Gaussian(epsilon=eps, delta=delta, sensitivity=1.0).sigma
    assert math.isfinite(sigma) and sigma > 0
    assert mp_delta(eps, sigma, 1.0) <= delta
    assert sigma <= Gaussian(epsilon=eps, delta=delta, calibration="tail_bound", sensitivity=1.0).sigma


def test_analytic_gaussian_is_exactly_its_gdp() -> None:
    m = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=2.0)
    mu = m.gdp.mu
    assert mu >= 2.0 / m.sigma
    assert Fraction(mu) * Fraction(m.sigma) >= Fraction(2.0)
    # μ-GDP's δ(ε) (Dong, Roth & Su, Cor. 2.13) evaluated independently at 50 digits is the target δ
    mu_mp = mpmath.mpf(mu)
    gdp_delta = mpmath.ncdf(-1 / mu_mp + mu_mp / 2) - mpmath.e * mpmath.ncdf(-1 / mu_mp - mu_mp / 2)
    assert gdp_delta == pytest.approx(1e-5, rel=1e-8)


# --- tail bound and classic ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta", "sens"), [(1.0, 1e-5, 1.0), (0.2, 0.7, 1.0), (5.0, 1e-30, 4.0)])
def test_tail_bound_solves_the_seed_equation(eps: float, delta: float, sens: float) -> None:
    sigma = Gaussian(epsilon=eps, delta=delta, sensitivity=sens, calibration="tail_bound").sigma
    # mpmath's root of the tail bound δ = Φ(S/(2σ) − εσ/S), solved in σ directly (not through the quadratic)
    root = mpmath.findroot(lambda s: mpmath.log(mp_tail(eps, s, sens) / delta), sigma * 1.01)
    assert sigma == pytest.approx(float(root), rel=1e-12)
    assert mp_tail(eps, sigma, sens) <= delta * (1 + 1e-12)


def test_classic_formula() -> None:
    for eps, delta, sens in [(0.5, 1e-5, 1.0), (0.9, 1e-9, 2.5)]:
        sigma = Gaussian(epsilon=eps, delta=delta, sensitivity=sens, calibration="classic").sigma
        assert sigma == pytest.approx(sens * math.sqrt(2 * math.log(1.25 / delta)) / eps, rel=1e-14)


# --- μ-GDP --------------------------------------------------------------------------------------------------


def test_from_mu() -> None:
    m = Gaussian.from_mu(mu=0.5, sensitivity=1.0)
    assert m.sigma == 2.0
    assert m.guarantee == GaussianDP(0.5)
    assert m.gdp == GaussianDP(0.5)
    assert m.event.guarantee == GaussianDP(0.5)
    assert m.event.parameters == {"sigma": 2.0}


@given(mu=st.floats(1e-3, 100.0), sens=st.floats(1e-3, 1e3))
def test_from_mu_rounds_sigma_up(mu: float, sens: float) -> None:
    sigma = Gaussian.from_mu(mu=mu, sensitivity=sens).sigma
    assert Fraction(sigma) >= Fraction(sens) / Fraction(mu)
    assert sigma == pytest.approx(sens / mu, rel=1e-15)


@pytest.mark.parametrize(
    "kwargs",
    [{"calibration": "gdp", "mu": 1.0, "epsilon": 1.0}, {"calibration": "gdp", "mu": 1.0, "delta": 1e-5}],
)
def test_gdp_calibration_takes_mu_only(kwargs: dict[str, Any]) -> None:
    name = next(key for key in kwargs if key not in ("calibration", "mu"))
    with pytest.raises(InvalidParameterError) as info:
        Gaussian(**{"sensitivity": 1.0, **kwargs})
    assert info.value.parameter == name


# --- event, density, sampling -------------------------------------------------------------------------------


def test_guarantee_and_event() -> None:
    m = Gaussian(epsilon=0.5, delta=1e-6, sensitivity=2.0)
    assert m.guarantee == ApproxDP(0.5, 1e-6)
    event = m.event
    assert event.kind == "gaussian"
    assert event.sensitivity == 2.0
    assert event.parameters == {"sigma": m.sigma}
    assert PrivacyEvent.from_dict(event.to_dict()) == event


def test_pdf_is_a_normal_density_with_the_stated_variance() -> None:
    m = Gaussian(epsilon=0.7, delta=1e-4, sensitivity=1.5)
    mass, _ = integrate.quad(lambda y: m.pdf(y, 3.0), -np.inf, np.inf)
    second, _ = integrate.quad(lambda y: (y - 3.0) ** 2 * m.pdf(y, 3.0), -np.inf, np.inf)
    assert mass == pytest.approx(1.0, abs=1e-9)
    assert second == pytest.approx(m.variance, rel=1e-8)
    assert m.variance == pytest.approx(m.sigma**2, rel=1e-15)
    y = np.linspace(-10, 10, 101)
    np.testing.assert_allclose(m.pdf(y, 0.2), stats.norm.pdf(y, loc=0.2, scale=m.sigma), rtol=1e-12)


def test_randomize_is_vectorised_and_reproducible() -> None:
    m = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    x = np.arange(12.0).reshape(3, 4)
    a, b = m.randomize(x, rng=secure_rng(7)), m.randomize(x, rng=secure_rng(7))
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, m.randomize(x, rng=secure_rng(8)))
    assert isinstance(m.randomize(5.0, rng=secure_rng(1)), float)
    assert isinstance(m.randomize(5, rng=secure_rng(1)), int)  # an integer query gets integer noise
    assert m.randomize([1, 2, 3]).shape == (3,)


@pytest.mark.slow
def test_noise_is_normal_with_sigma() -> None:
    m = Gaussian(epsilon=0.8, delta=1e-6, sensitivity=2.0)
    noise = m.randomize(np.zeros(200_000), rng=secure_rng(3))
    assert stats.kstest(noise, stats.norm(scale=m.sigma).cdf).pvalue > 1e-3


# --- empirical checks on 10⁶ samples per input --------------------------------------------------------------


def central_bins(m: Gaussian, eps: float, sens: float, width: float) -> NDArray[np.float64]:
    """Bins inside the region where the privacy loss |L(y)| ≤ ε for inputs 0 and S.

    L(y) = S(S − 2y)/(2σ²) there, so |L| ≤ ε on [S/2 − εσ²/S, S/2 + εσ²/S]: every bin inside it has a
    probability ratio of at most e^ε. Outside, (ε, δ)-DP allows larger ratios on a set of mass ≤ δ, so those
    bins are left to the δ-aware check below.
    """
    half = eps * m.sigma**2 / sens
    return np.arange(sens / 2 - half, sens / 2 + half + 1e-12, width)


@pytest.mark.slow
def test_empirical_ratio_within_exp_epsilon_where_the_loss_is_at_most_epsilon() -> None:
    eps, delta, sens = 1.0, 1e-5, 1.0
    m = Gaussian(epsilon=eps, delta=delta, sensitivity=sens)
    bins = central_bins(m, eps, sens, 1.0)
    ratio = assert_empirically_dp(seeded(m), 0.0, sens, eps, bins=bins)
    # the bins separate the two inputs: the largest ratio inside them is e^ε, reached only at the edges
    # where few samples fall, so the certified ratio is well above 1 but below e^ε
    assert ratio > 1.5
    # the same bins catch a mechanism with half the noise
    half = Gaussian(epsilon=eps, delta=delta, sensitivity=sens * 0.5)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(seeded(half), 0.0, sens, eps, bins=bins)


def certified_hockey_stick(
    out_a: NDArray[np.float64], out_b: NDArray[np.float64], bins: NDArray[np.float64], eps: float
) -> float:
    """A lower confidence bound (level 1 − 1e-6) on max over directions of Σ_bins (P_a − e^ε P_b)₊.

    The binned sum is at most δ(ε) of the mechanism (post-processing). With Clopper–Pearson intervals that
    hold simultaneously (Bonferroni over bins, both samples and both directions), Σ (lo_a − e^ε hi_b)₊
    is below the binned sum, so a correct mechanism exceeds δ with probability below 1e-6.
    """
    count_a, _ = np.histogram(out_a, bins=bins)
    count_b, _ = np.histogram(out_b, bins=bins)
    level = 1e-6 / (2 * len(count_a))
    lo_a, hi_a = clopper_pearson(count_a, len(out_a), level)
    lo_b, hi_b = clopper_pearson(count_b, len(out_b), level)
    return max(
        float(np.sum(np.maximum(lo_a - math.exp(eps) * hi_b, 0.0))),
        float(np.sum(np.maximum(lo_b - math.exp(eps) * hi_a, 0.0))),
    )


@pytest.mark.slow
def test_empirical_hockey_stick_divergence_within_delta() -> None:
    # a δ large enough to be resolved by 10⁶ samples; the bins cover the tails where the loss exceeds ε
    eps, delta, sens, n = 0.5, 0.05, 1.0, 1_000_000
    m = Gaussian(epsilon=eps, delta=delta, sensitivity=sens)
    bins = np.concatenate([[-np.inf], np.linspace(-5 * m.sigma, 5 * m.sigma + sens, 41), [np.inf]])
    out_a, out_b = (
        m.randomize(np.zeros(n), rng=secure_rng(21)),
        m.randomize(np.full(n, sens), rng=secure_rng(22)),
    )
    certified = certified_hockey_stick(out_a, out_b, bins, eps)
    assert certified <= delta
    assert certified > 0.5 * delta  # the bound is close to the exact δ(ε): the check has power
    # and it catches noise calibrated for a 40% larger sensitivity than it is used with
    weak = Gaussian(epsilon=eps, delta=delta, sensitivity=sens / 1.4)
    out_a, out_b = (
        weak.randomize(np.zeros(n), rng=secure_rng(23)),
        weak.randomize(np.full(n, sens), rng=secure_rng(24)),
    )
    assert certified_hockey_stick(out_a, out_b, bins, eps) > delta


# --- rejection of bad input ---------------------------------------------------------------------------------

not_a_real = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, True, False, None, "1.0", b"1", [1.0], 1 + 2j]),
    st.text(max_size=5),
)
non_positive = st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)
outside_unit_interval = st.one_of(
    st.floats(max_value=0.0, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1.0, allow_nan=False, allow_infinity=False),
)


def assert_rejected(parameter: str, **kwargs: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        Gaussian(**{"sensitivity": 1.0, **kwargs})
    assert info.value.parameter == parameter, str(info.value)
    assert repr(parameter) in str(info.value)


@given(
    bad=st.one_of(not_a_real, non_positive),
    calibration=st.sampled_from(["analytic", "tail_bound", "classic"]),
)
def test_rejects_bad_epsilon(bad: Any, calibration: str) -> None:
    assert_rejected("epsilon", epsilon=bad, delta=1e-5, calibration=calibration)


@given(bad=st.one_of(not_a_real, outside_unit_interval))
def test_rejects_bad_delta(bad: Any) -> None:
    assert_rejected("delta", epsilon=1.0, delta=bad)


@given(bad=st.one_of(not_a_real.filter(lambda v: v is not None), non_positive))
def test_rejects_bad_sensitivity(bad: Any) -> None:
    assert_rejected("sensitivity", epsilon=1.0, delta=1e-5, sensitivity=bad)
    with pytest.raises(InvalidParameterError) as info:
        Gaussian.from_mu(mu=1.0, sensitivity=bad)
    assert info.value.parameter == "sensitivity"


@given(
    bad=st.one_of(st.text(max_size=12), st.integers(), st.none()).filter(
        lambda v: v not in ("analytic", "tail_bound", "classic", "gdp")
    )
)
def test_rejects_bad_calibration(bad: Any) -> None:
    assert_rejected("calibration", epsilon=1.0, delta=1e-5, calibration=bad)


@given(bad=st.one_of(not_a_real, non_positive))
def test_rejects_bad_mu(bad: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        Gaussian.from_mu(mu=bad, sensitivity=1.0)
    assert info.value.parameter == "mu"


@pytest.mark.parametrize(
    "arguments",
    [
        {"mu": 5e-324, "sensitivity": 1.0},
        {"mu": 1e-10, "sensitivity": 1e300},
        {"epsilon": 1e-10, "delta": 1e-10, "sensitivity": 1e300},
        {"epsilon": 1e-300, "delta": 1e-300, "sensitivity": 1e300},
    ],
)
def test_a_sigma_beyond_the_largest_float_is_refused(arguments: dict[str, float]) -> None:
    make = Gaussian.from_mu if "mu" in arguments else Gaussian
    with pytest.raises(InvalidParameterError, match="beyond the largest float"):
        make(**arguments)


def test_rejects_missing_parameters_and_mu_outside_gdp() -> None:
    assert_rejected("epsilon", delta=1e-5)
    assert_rejected("delta", epsilon=1.0)
    assert_rejected("mu", epsilon=1.0, delta=1e-5, mu=0.5)
    assert_rejected("sensitivity", epsilon=1.0, delta=1e-5, sensitivity=math.nan)


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
        Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0).randomize(bad, rng=secure_rng(0))
    assert info.value.parameter == "values"


def test_randomize_rejects_bad_rng() -> None:
    with pytest.raises(InvalidParameterError) as info:
        Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0).randomize([1.0], rng="seed")  # type: ignore[arg-type]
    assert info.value.parameter == "rng"
