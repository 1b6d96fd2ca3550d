"""Composition against independent computations.

Trust no library blindly: every number from dp-accounting is checked against a second route: exact
enumeration of finite privacy-loss distributions, closed forms verified by quadrature, an independent
numerical convolution (for Laplace), μ-GDP at 40 digits with mpmath (for Gaussians), the optimal composition
theorem of Kairouz, Oh & Viswanath (for (ε, δ) guarantees), RDP (an upper bound), and dp-accounting's own
one-by-one composition against its self-composition.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, optimize, special, stats

from dp_pipeline import (
    ApproxDP,
    GaussianDP,
    InvalidParameterError,
    PrivacyEvent,
    PureDP,
    UnsupportedCompositionError,
)
from dp_pipeline.accounting import _losses
from dp_pipeline.accounting._analysis import pld
from dp_pipeline.accounting._composition import (
    Composition,
    as_approx_dp,
    as_gdp,
    compose_basic,
    compose_gdp,
    compose_plan,
    compose_plan_gdp,
    event_gdp,
    group_event,
    laplace_mu,
)
from dp_pipeline.events import EventKind
from dp_pipeline.guarantees import Guarantee

pld_lib = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

# --------------------------------------------------------------------------------------------------
# events as the mechanisms build them (kinds and parameters of the event conventions)


def laplace(epsilon: float, sensitivity: float = 1.0) -> PrivacyEvent:
    return PrivacyEvent(
        kind="laplace",
        guarantee=PureDP(epsilon),
        sensitivity=sensitivity,
        parameters={"scale": sensitivity / epsilon},
    )


def gaussian(sigma: float, sensitivity: float = 1.0) -> PrivacyEvent:
    return PrivacyEvent(
        kind="gaussian",
        guarantee=GaussianDP(sensitivity / sigma),
        sensitivity=sensitivity,
        parameters={"sigma": sigma},
    )


def rr(epsilon: float, k: int = 2) -> PrivacyEvent:
    tail = math.exp(-epsilon)
    denominator = 1.0 + (k - 1) * tail
    return PrivacyEvent(
        kind="randomized_response",
        guarantee=PureDP(epsilon),
        parameters={"categories": k, "p_true": 1.0 / denominator, "p_other": tail / denominator},
    )


def known(guarantee: Guarantee, kind: EventKind = "guarantee") -> PrivacyEvent:
    return PrivacyEvent(kind=kind, guarantee=guarantee)


def epsilon_of(result: Composition) -> float:
    assert isinstance(result.guarantee, ApproxDP)
    return result.guarantee.epsilon


def pld_epsilon(events: list[PrivacyEvent], delta: float) -> float:
    """ε of the PLD route alone (compose_plan also takes basic and μ-GDP composition into account)."""
    return pld._pld_epsilon([_losses._event_loss(e) for e in events], delta)


# --------------------------------------------------------------------------------------------------
# independent references


def finite_pld(event: PrivacyEvent) -> tuple[np.ndarray, np.ndarray]:
    """Exact PLD of one randomized-response release, from the definition (pair of inputs 0 ≠ 1).

    The privacy loss of outcome o is ln(P(o | x=0) / P(o | x=1)), distributed as o ~ P(· | x=0).
    """
    k = int(event.parameters["categories"])
    p, q = float(event.parameters["p_true"]), float(event.parameters["p_other"])
    upper = np.array([p] + [q] * (k - 1))  # P(o | x = 0), o = 0, 1, ..., k-1
    lower = np.array([q, p] + [q] * (k - 2))  # P(o | x = 1)
    return np.log(upper) - np.log(lower), upper


def product_pld(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """PLD of the composition: all combinations of outcomes, losses added, probabilities multiplied;
    outcomes with the same total loss (to 1e-11) merged."""
    losses: np.ndarray = np.zeros(1)
    probs: np.ndarray = np.ones(1)
    for part_losses, part_probs in parts:
        losses = np.add.outer(losses, part_losses).ravel()
        probs = np.multiply.outer(probs, part_probs).ravel()
        keys, inverse = np.unique(np.round(losses, 11), return_inverse=True)
        losses, probs = keys, np.bincount(inverse, weights=probs)
    return losses, probs


def hockey_stick(losses: np.ndarray, probs: np.ndarray, epsilon: float, infinity: float = 0.0) -> float:
    """δ(ε) = P[L = ∞] + E[(1 − e^{ε − L})₊]."""
    above = losses > epsilon
    return infinity + math.fsum(probs[above] * -np.expm1(epsilon - losses[above]))


def solve_epsilon(delta_of: object, delta: float, upper: float) -> float:
    """The least ε ≥ 0 with δ(ε) ≤ delta, for a continuous non-increasing δ(ε)."""
    assert callable(delta_of)
    if delta_of(0.0) <= delta:
        return 0.0
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, upper, xtol=1e-14, rtol=1e-14))


mpmath.mp.dps = 40


def mp_gdp_epsilon(mu: float, delta: float) -> float:
    """The least ε with δ(ε) ≤ delta for μ-GDP (Dong, Roth & Su 2022, Cor. 2.13), bisection at 40 digits."""
    m, target = mpmath.mpf(mu), mpmath.mpf(delta)

    def d(e: mpmath.mpf) -> mpmath.mpf:
        return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)

    lo, hi = mpmath.mpf(0), m * (m / 2 + 20)
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if d(mid) > target else (lo, mid)
    return float(hi)


def laplace_bracket(ls: list[float], delta: float, step: float) -> tuple[float, float]:
    """[ε_low, ε_high] containing the exact ε at δ of composed Laplace releases with losses L = Δ/b.

    One release (noise Lap(b), inputs 0 and Δ): loss L w.p. 1/2, −L w.p. e^{−L}/2, and in between density
    e^{−(L−ℓ)/2}/4. Each cell of width ``step`` is put at its upper end (pessimistic) or lower end
    (optimistic); since δ(ε) = E[(1 − e^{ε−L})₊] grows with every loss value, the two discretised
    compositions bracket the exact δ(ε), hence ε. Composed by direct FFT convolution with numpy.
    """
    results = []
    for side in (np.floor, np.ceil):
        dist = None
        for L in ls:
            lo_index, hi_index = int(np.floor(-L / step)), int(np.ceil(L / step))
            grid = np.arange(lo_index, hi_index + 1) * step
            probs = np.zeros(grid.size)
            edges = np.clip(np.arange(lo_index, hi_index + 1) * step, -L, L)
            cell = 0.5 * (np.exp(-(L - edges[1:]) / 2) - np.exp(-(L - edges[:-1]) / 2))
            target = np.arange(1, grid.size) if side is np.ceil else np.arange(grid.size - 1)
            np.add.at(probs, target, cell)
            probs[int(side(L / step)) - lo_index] += 0.5
            probs[int(side(-L / step)) - lo_index] += 0.5 * math.exp(-L)
            if dist is None:
                dist = (lo_index, probs)
            else:
                n = dist[1].size + probs.size - 1
                conv = np.fft.irfft(np.fft.rfft(dist[1], n) * np.fft.rfft(probs, n), n)
                dist = (dist[0] + lo_index, np.maximum(conv, 0.0))
        assert dist is not None
        losses = (dist[0] + np.arange(dist[1].size)) * step
        results.append(
            solve_epsilon(lambda e, x=losses, p=dist[1]: hockey_stick(x, p, e), delta, sum(ls) + 1)
        )
    return results[0], results[1]


def kairouz_region(k: int, eps: float, delta: float) -> list[tuple[float, float]]:
    """The exact privacy region of k-fold (ε, δ)-DP composition: ((k−2i)ε, 1 − (1−δ)^k(1−δᵢ)),
    δᵢ = Σ_{l<i} C(k,l)(e^{(k−l)ε} − e^{(k−2i+l)ε})/(1+e^ε)^k (Kairouz, Oh & Viswanath 2015, Thm 3.3)."""
    e, d = mpmath.mpf(eps), mpmath.mpf(delta)
    region = []
    for i in range(k // 2):
        di = (
            mpmath.fsum(
                mpmath.binomial(k, l) * (mpmath.exp((k - l) * e) - mpmath.exp((k - 2 * i + l) * e))
                for l in range(i)  # noqa: E741
            )
            / (1 + mpmath.exp(e)) ** k
        )
        region.append(((k - 2 * i) * eps, float(1 - (1 - d) ** k * (1 - di))))
    return region


# --------------------------------------------------------------------------------------------------
# basic composition and μ-GDP composition against exact sums

finite_eps = st.floats(0.0, 50.0, allow_subnormal=False)
small_delta = st.floats(0.0, 1e-3, allow_subnormal=False)


@given(st.lists(st.tuples(finite_eps, small_delta), max_size=30))
def test_basic_composition_is_the_exact_binary_sum_rounded_up(pairs: list[tuple[float, float]]) -> None:
    result = compose_basic([ApproxDP(e, d) for e, d in pairs])
    exact_eps = sum((Fraction(e) for e, _ in pairs), Fraction(0))
    exact_delta = sum((Fraction(d) for _, d in pairs), Fraction(0))
    for value, exact in ((result.epsilon, exact_eps), (result.delta, exact_delta)):
        # the least double not below the exact sum of the doubles
        assert Fraction(value) >= exact
        assert value == 0.0 or Fraction(math.nextafter(value, -math.inf)) < exact
    # and agrees with a float sum to rounding
    assert result.epsilon == pytest.approx(math.fsum(e for e, _ in pairs), rel=1e-15, abs=1e-300)


def test_basic_composition_of_tenths_is_never_below_their_binary_values() -> None:
    # the double 0.1 is 1/10 + 5.6e-18: fifty of them lose more than 5, and the sum says so
    assert compose_basic([PureDP(0.1)] * 50) == ApproxDP(math.nextafter(5.0, math.inf), 0.0)
    assert compose_basic([PureDP(0.125)] * 40) == ApproxDP(5.0, 0.0)  # exact in binary: no drift
    assert compose_basic([PureDP(0.1), PureDP(0.15)]).epsilon == 0.25  # 0.1 + 0.15 is exactly 1/4
    assert compose_basic([ApproxDP(0.5, 2.0**-24)] * 16) == ApproxDP(8.0, 2.0**-20)
    assert compose_basic([PureDP(1.0), ApproxDP(0.25, 1e-6)]) == ApproxDP(1.25, 1e-6)


def test_basic_composition_refuses_gdp_and_vacuous_sums() -> None:
    assert compose_basic([]) == ApproxDP(0.0, 0.0)
    with pytest.raises(UnsupportedCompositionError, match=r"μ-GDP|no single"):
        compose_basic([PureDP(1.0), GaussianDP(0.5)])
    with pytest.raises(UnsupportedCompositionError, match="guarantees nothing"):
        compose_basic([ApproxDP(1.0, 0.6), ApproxDP(1.0, 0.5)])
    with pytest.raises(UnsupportedCompositionError, match="guarantees nothing"):
        compose_basic([PureDP(1e308)] * 2)


@given(st.lists(st.floats(0.0, 1e3, allow_subnormal=False), max_size=30))
def test_gdp_composition_is_the_exact_root_rounded_up(mus: list[float]) -> None:
    result = compose_gdp([GaussianDP(m) for m in mus]).mu
    exact = sum((Fraction(m) ** 2 for m in mus), Fraction(0))
    assert Fraction(result) ** 2 >= exact
    assert result == 0.0 or Fraction(math.nextafter(result, -math.inf)) ** 2 < exact
    assert result == pytest.approx(math.sqrt(math.fsum(m * m for m in mus)), rel=1e-14)


def test_gdp_composition_of_equal_parts() -> None:
    assert compose_gdp([GaussianDP(0.125)] * 64) == GaussianDP(1.0)
    assert compose_gdp([GaussianDP(0.1)] * 100) == GaussianDP(math.nextafter(1.0, 2.0))  # 0.1 > 1/10
    assert compose_gdp([GaussianDP(3.0), GaussianDP(4.0)]) == GaussianDP(5.0)
    assert compose_gdp([]) == GaussianDP(0.0)


def test_conversions() -> None:
    assert as_approx_dp(PureDP(0.7)) == ApproxDP(0.7, 0.0)
    assert as_approx_dp(ApproxDP(0.7, 1e-6)) == ApproxDP(0.7, 1e-6)
    assert as_approx_dp(GaussianDP(0.8), 1e-6) == GaussianDP(0.8).to_approx_dp(1e-6)
    assert as_approx_dp(GaussianDP(0.8), 1e-6).epsilon == pytest.approx(mp_gdp_epsilon(0.8, 1e-6), rel=1e-9)
    with pytest.raises(InvalidParameterError, match="delta"):
        as_approx_dp(GaussianDP(0.8))
    assert as_gdp(GaussianDP(0.4)) == GaussianDP(0.4)
    assert as_gdp(PureDP(1.0)) == PureDP(1.0).to_gdp()
    assert as_gdp(ApproxDP(1.0, 0.0)) == PureDP(1.0).to_gdp()
    with pytest.raises(UnsupportedCompositionError, match="μ-GDP"):
        as_gdp(ApproxDP(1.0, 1e-9))


def test_event_gdp_is_exact_for_gaussian_noise_whatever_the_calibration() -> None:
    assert event_gdp(gaussian(2.0, sensitivity=1.0)) == GaussianDP(0.5)
    # an (ε, δ)-calibrated Gaussian event: μ comes from σ, not from (ε, δ)
    sigma = 3.73
    mu = 1.0 / sigma
    approx = GaussianDP(mu).to_approx_dp(1e-5)
    event = PrivacyEvent(kind="gaussian", guarantee=approx, sensitivity=1.0, parameters={"sigma": sigma})
    got = event_gdp(event).mu
    assert Fraction(got) >= Fraction(1) / Fraction(sigma)
    assert got == pytest.approx(mu, rel=1e-15)
    # Laplace noise: the μ of its own trade-off, below the generic ε-DP μ (test_pure_curves checks it)
    assert event_gdp(laplace(1.0)) == laplace_mu(1.0)
    assert event_gdp(laplace(1.0)).mu < PureDP(1.0).to_gdp().mu
    with pytest.raises(UnsupportedCompositionError):
        event_gdp(known(ApproxDP(1.0, 1e-6)))


def test_compose_plan_gdp() -> None:
    events = [gaussian(2.0), gaussian(4.0, sensitivity=2.0), known(GaussianDP(0.5)), laplace(0.3)]
    result = compose_plan_gdp(events)
    assert result.method == "gdp"
    expected = math.sqrt(0.25 + 0.25 + 0.25 + laplace_mu(0.3).mu ** 2)
    assert isinstance(result.guarantee, GaussianDP)
    assert result.guarantee.mu == pytest.approx(expected, rel=1e-15)
    assert compose_plan_gdp([]) == Composition(GaussianDP(0.0), "gdp")
    with pytest.raises(UnsupportedCompositionError):
        compose_plan_gdp([gaussian(1.0), known(ApproxDP(0.5, 1e-8))])


# --------------------------------------------------------------------------------------------------
# group privacy


def test_group_laplace_has_the_pld_of_the_scaled_sensitivity() -> None:
    event = laplace(0.4, sensitivity=2.0)
    grouped = group_event(event, 3)
    assert grouped.kind == "laplace"
    assert grouped.sensitivity == 6.0
    assert grouped.parameters == event.parameters
    assert grouped.guarantee == PureDP(3 * 0.4)
    # the PLD used for the group is the Laplace PLD at sensitivity 3Δ: at least dp-accounting's optimistic
    # one and at most its pessimistic one (connect the dots is tighter than rounding losses up) ...
    h = 1e-3
    ours = pld._single_pld(_losses._event_loss(grouped), h)
    eps = np.linspace(0.0, 1.2, 13)
    got = np.array([ours.delta_for_epsilon(float(x)) for x in eps])
    upper = pld_lib.from_laplace_mechanism(5.0, sensitivity=6.0, value_discretization_interval=h)
    lower = pld_lib.from_laplace_mechanism(
        5.0, sensitivity=6.0, value_discretization_interval=h, pessimistic_estimate=False
    )
    assert np.all(got <= np.asarray(upper.get_delta_for_epsilon(eps)) * (1 + 2e-9) + 1e-13)
    assert np.all(got >= np.asarray(lower.get_delta_for_epsilon(eps)))
    # ... whose δ(ε) is that of one Laplace release with L = 3Δ/b = 1.2: 1 − e^{(ε−L)/2}, from above
    exact = -np.expm1((eps[:-1] - 1.2) / 2)
    assert np.all(got[:-1] >= exact)
    np.testing.assert_allclose(got[:-1], exact, rtol=2e-9)
    assert epsilon_of(compose_plan([grouped], delta=1e-3)) == pytest.approx(
        1.2 + 2 * math.log1p(-1e-3), rel=1e-4
    )
    assert group_event(event, 1) is event


def test_group_gaussian_is_exact() -> None:
    event = gaussian(4.0, sensitivity=1.5)
    grouped = group_event(event, 5)
    assert grouped.sensitivity == 7.5
    assert grouped.guarantee == GaussianDP(5 * 1.5 / 4.0)
    assert event_gdp(grouped) == GaussianDP(7.5 / 4.0)
    # an (ε, δ) Gaussian event keeps its δ; ε is the exact one of the k-fold sensitivity, rounded up. The
    # generic rule (kε, k e^{(k−1)ε} δ) would give δ ≥ 1 here.
    approx = GaussianDP(1.0 / 3.73).to_approx_dp(1e-5)
    event = PrivacyEvent(kind="gaussian", guarantee=approx, sensitivity=1.0, parameters={"sigma": 3.73})
    with pytest.raises(InvalidParameterError):
        approx.group(20)
    grouped = group_event(event, 20)
    assert isinstance(grouped.guarantee, ApproxDP)
    assert grouped.guarantee.delta == 1e-5
    exact = mp_gdp_epsilon(20 / 3.73, 1e-5)
    assert grouped.guarantee.epsilon >= exact * (1 - 1e-12)
    assert grouped.guarantee.epsilon == pytest.approx(exact, rel=1e-9)


def test_group_randomized_response_and_guarantee_kinds() -> None:
    grouped = group_event(rr(0.8, k=4), 3)
    assert grouped.kind == "guarantee"
    assert grouped.guarantee == PureDP(0.8).group(3)
    assert grouped.parameters == {}
    assert group_event(rr(0.8), 1) == rr(0.8)
    stair = PrivacyEvent(kind="staircase", guarantee=PureDP(0.5), sensitivity=1.0, parameters={"gamma": 0.3})
    assert group_event(stair, 4).guarantee == PureDP(2.0)
    assert group_event(stair, 4).sensitivity == 4.0
    assert group_event(known(ApproxDP(0.5, 1e-8)), 3).guarantee == ApproxDP(0.5, 1e-8).group(3)
    assert group_event(known(GaussianDP(0.5)), 3).guarantee == GaussianDP(1.5)


# --------------------------------------------------------------------------------------------------
# tight composition of Laplace noise


def test_laplace_closed_form_by_direct_integration() -> None:
    b, sens = 1.25, 1.0
    L = sens / b

    def p(x: float) -> float:
        return stats.laplace.pdf(x, 0.0, b)

    def q(x: float) -> float:
        return stats.laplace.pdf(x, sens, b)

    for eps in (0.0, 0.1, 0.4, 0.7):
        # p ≥ e^ε q exactly where x ≤ (Δ − εb)/2; integrate (p − e^ε q) there
        cut = (sens - eps * b) / 2
        left, _ = integrate.quad(lambda x, e=eps: p(x) - math.exp(e) * q(x), -np.inf, min(cut, 0.0))
        mid, _ = integrate.quad(lambda x, e=eps: p(x) - math.exp(e) * q(x), min(cut, 0.0), cut)
        closed = -math.expm1((eps - L) / 2)
        assert left + mid == pytest.approx(closed, rel=1e-10)
        # the PLD at the closed-form δ gives back ε (pessimistic, within 1e-4)
        pld = pld_epsilon([laplace(1.0 / b * sens, sensitivity=sens)], closed)
        assert eps * (1 - 1e-9) - 1e-12 <= pld <= eps * (1 + 1e-4) + 1e-6


@pytest.mark.parametrize("delta", [1e-2, 1e-4])
def test_laplace_plan_matches_an_independent_convolution(delta: float) -> None:
    epsilons = [0.05, 0.1, 0.15, 0.2, 0.3, 0.1, 0.25, 0.35]
    sensitivities = [1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 1.0, 2.0]
    events = [laplace(e, s) for e, s in zip(epsilons, sensitivities, strict=True)]
    low, high = laplace_bracket(epsilons, delta, step=2e-5)
    assert high - low < 1e-3 * low  # the reference is sharp enough to judge a 1e-3 error
    result = compose_plan(events, delta=delta)
    assert result.method == "pld"
    assert low * (1 - 1e-9) <= epsilon_of(result) <= high * (1 + 2e-4)
    assert epsilon_of(result) < compose_basic([e.guarantee for e in events]).epsilon


def test_laplace_rdp_is_an_upper_bound_and_not_absurd() -> None:
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

    for eps, n in ((0.1, 50), (0.5, 10), (0.05, 200)):
        for delta in (1e-5, 1e-9):
            accountant = rdp.RdpAccountant()
            accountant.compose(dp_event.LaplaceDpEvent(1.0 / eps), n)
            rdp_eps = accountant.get_epsilon(delta)
            ours = epsilon_of(compose_plan([laplace(eps)] * n, delta=delta))
            assert ours <= rdp_eps <= 1.25 * ours


# --------------------------------------------------------------------------------------------------
# tight composition of Gaussian noise: exact μ-GDP


@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_gaussian_plan_pld_matches_exact_gdp(delta: float) -> None:
    sigmas = [0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0, 55.0]
    sensitivities = [1.0, 2.0, 1.0, 0.5, 1.0, 3.0, 1.0, 1.0, 2.0, 1.0]
    events = [gaussian(s, d) for s, d in zip(sigmas, sensitivities, strict=True)]
    mu = math.sqrt(math.fsum((d / s) ** 2 for s, d in zip(sigmas, sensitivities, strict=True)))
    exact = mp_gdp_epsilon(mu, delta)
    pld = pld_epsilon(events, delta)
    assert exact * (1 - 1e-12) <= pld <= exact * (1 + 1e-3)
    assert pld == pytest.approx(exact, rel=1e-4)  # measured: within 5e-5
    # the plan reports the exact value through μ-GDP, which is never looser than the PLD
    result = compose_plan(events, delta=delta)
    assert result.method == "gdp"
    assert exact * (1 - 1e-12) <= epsilon_of(result) <= pld
    assert epsilon_of(result) == pytest.approx(exact, rel=1e-9)
    assert result.guarantee == ApproxDP(epsilon_of(result), delta)


def test_gaussian_rdp_is_an_upper_bound_and_not_absurd() -> None:
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")

    for sigma, n in ((1.0, 1), (2.0, 10), (20.0, 50)):
        for delta in (1e-5, 1e-9):
            accountant = rdp.RdpAccountant()
            accountant.compose(dp_event.GaussianDpEvent(sigma), n)
            rdp_eps = accountant.get_epsilon(delta)
            pld = pld_epsilon([gaussian(sigma)] * n, delta)
            assert pld <= rdp_eps <= 1.25 * pld


def test_mixed_plan_is_between_exact_gdp_parts_and_basic() -> None:
    events = [gaussian(3.0), gaussian(5.0), laplace(0.2), rr(0.5, k=3), known(PureDP(0.3), "staircase")]
    result = compose_plan(events, delta=1e-6)
    assert result.method == "pld"
    # removing the pure events can only lower ε; their μ-GDP conversion can only raise it
    assert epsilon_of(result) >= mp_gdp_epsilon(math.sqrt(1 / 9 + 1 / 25), 1e-6)
    assert epsilon_of(result) <= as_approx_dp(compose_plan_gdp(events).guarantee, 1e-6).epsilon


# --------------------------------------------------------------------------------------------------
# tight composition of randomized response and of (ε, δ) guarantees: exact enumeration


@pytest.mark.parametrize(
    ("epsilons", "k", "delta"),
    [
        ([0.5] * 12, 2, 1e-6),
        ([0.05] * 16, 2, 1e-6),
        ([2.0] * 5, 2, 1e-3),
        ([0.1, 0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 0.2, 0.4, 0.6, 0.8, 1.0], 2, 1e-6),
        ([0.7] * 8, 5, 1e-6),
        ([0.2, 0.9, 1.5, 0.4, 1.1, 0.6, 0.3], 4, 1e-4),
    ],
)
def test_randomized_response_plan_matches_exact_enumeration(
    epsilons: list[float], k: int, delta: float
) -> None:
    events = [rr(e, k) for e in epsilons]
    losses, probs = product_pld([finite_pld(e) for e in events])
    assert math.fsum(probs) == pytest.approx(1.0, abs=1e-12)
    exact = solve_epsilon(lambda e: hockey_stick(losses, probs, e), delta, sum(epsilons) + 1)
    result = epsilon_of(compose_plan(events, delta=delta))
    assert exact * (1 - 1e-9) <= result <= exact * (1 + 2e-4)


def test_randomized_response_builders_of_dp_accounting_agree_and_are_looser() -> None:
    """Our reading of from_randomized_response: noise parameter k·p_other (then 1 − p + p/k = p_true);
    for k-ary RR it equals from_two_probability_mass_functions on the pmfs of two inputs; both round losses
    up to the grid, so they are above the exact value and above ours."""
    h = 1e-3
    for eps, k in ((0.1, 2), (1.0, 2), (0.7, 5)):
        event = rr(eps, k)
        p, q = event.parameters["p_true"], event.parameters["p_other"]
        assert isinstance(p, float) and isinstance(q, float)
        builder = pld_lib.from_randomized_response(k * q, k, value_discretization_interval=h)
        upper = {o: math.log(p if o == 0 else q) for o in range(k)}
        lower = {o: math.log(p if o == 1 else q) for o in range(k)}
        pmfs = pld_lib.from_two_probability_mass_functions(lower, upper, value_discretization_interval=h)
        grid = np.linspace(0.0, eps, 7)
        np.testing.assert_allclose(
            builder.get_delta_for_epsilon(grid), pmfs.get_delta_for_epsilon(grid), rtol=1e-9
        )
        n, delta = 20, 1e-6
        losses, probs = product_pld([finite_pld(event)] * n)
        exact = solve_epsilon(lambda e, x=losses, w=probs: hockey_stick(x, w, e), delta, n * eps + 1)
        theirs = builder.self_compose(n).get_epsilon_for_delta(delta)
        ours = epsilon_of(compose_plan([event] * n, delta=delta))
        assert exact * (1 - 1e-9) <= ours <= theirs * (1 + 1e-7)  # ours carries a 1e-8 rounding margin
        assert theirs >= exact * (1 - 1e-9)


@pytest.mark.parametrize(("k", "eps", "delta"), [(10, 0.3, 1e-7), (6, 1.0, 0.0), (15, 0.1, 1e-9)])
def test_approx_guarantees_match_the_optimal_composition_theorem(k: int, eps: float, delta: float) -> None:
    events = [known(ApproxDP(eps, delta))] * k
    for target_eps, target_delta in kairouz_region(k, eps, delta)[1:]:
        result = epsilon_of(compose_plan(events, delta=target_delta))
        assert target_eps * (1 - 1e-9) <= result <= target_eps * (1 + 2e-4)


@given(
    st.lists(st.floats(0.01, 2.0), min_size=1, max_size=9),
    st.sampled_from([1e-2, 1e-4, 1e-6, 1e-9]),
)
def test_pure_plans_are_tight_and_never_looser_than_basic(epsilons: list[float], delta: float) -> None:
    events = [known(PureDP(e), "staircase") for e in epsilons]
    parts = [(np.array([-e, e]), np.array([special.expit(-e), special.expit(e)])) for e in epsilons]
    losses, probs = product_pld(parts)
    exact = solve_epsilon(lambda x: hockey_stick(losses, probs, x), delta, sum(epsilons) + 1)
    result = compose_plan(events, delta=delta)
    assert epsilon_of(result) <= compose_basic([e.guarantee for e in events]).epsilon
    assert exact * (1 - 1e-9) <= epsilon_of(result) <= exact * (1 + 2e-4) + 1e-12


def test_delta_zero_gives_the_exact_pure_sum() -> None:
    events = [laplace(0.125), rr(0.25, k=3), known(PureDP(0.125), "staircase"), known(ApproxDP(0.5, 0.0))]
    result = compose_plan(events, delta=0.0)
    assert result == Composition(ApproxDP(1.0, 0.0), "basic")
    # the ε at a tiny δ approaches it from below
    assert 0.99 < epsilon_of(compose_plan(events, delta=1e-12)) <= 1.0
    assert compose_plan([known(GaussianDP(0.0)), laplace(0.5)], delta=0.0).guarantee == ApproxDP(0.5, 0.0)
    with pytest.raises(UnsupportedCompositionError, match="δ = 0"):
        compose_plan([laplace(0.1), gaussian(2.0)], delta=0.0)


def test_events_whose_own_delta_exceeds_the_target_have_no_epsilon() -> None:
    with pytest.raises(UnsupportedCompositionError, match="no finite ε"):
        compose_plan([known(ApproxDP(0.5, 1e-4)), laplace(1.0)], delta=1e-5)
    # within the target it works, and beats basic composition
    result = compose_plan([known(ApproxDP(0.5, 1e-7))] * 10 + [laplace(0.2)] * 10, delta=1e-5)
    assert result.method == "pld"
    assert epsilon_of(result) < 7.0


def test_empty_plan_costs_nothing() -> None:
    assert compose_plan([], delta=1e-6) == Composition(ApproxDP(0.0, 0.0), "basic")
    assert compose_plan([], delta=0.0) == Composition(ApproxDP(0.0, 0.0), "basic")


def test_basic_wins_when_the_pld_cannot_beat_it() -> None:
    # one Laplace release at a δ below its PLD's resolution: ε = L exactly from basic composition
    result = compose_plan([laplace(0.75)], delta=1e-300)
    assert result == Composition(ApproxDP(0.75, 0.0), "basic")


# --------------------------------------------------------------------------------------------------
# the PLD against itself: one-by-one composition equals self-composition


@pytest.mark.parametrize(
    ("single", "twin"),
    [
        (_losses._LaplaceLoss(2.0, 1.0), _losses._LaplaceLoss(4.0, 2.0)),
        (_losses._GaussianLoss(3.0, 1.0), _losses._GaussianLoss(6.0, 2.0)),
        (_losses._event_loss(rr(0.6, k=3)), _losses._event_loss(known(PureDP(0.6)))),
    ],
)
def test_one_by_one_composition_equals_self_composition(single: Any, twin: Any) -> None:
    """``twin`` has the same (or a dominating) PLD under another key, so the plan [single]*n is self-composed
    and [single, twin, single, twin, ...] is composed one pair at a time."""
    n, h, tail = 12, 2e-3, 1e-15
    grouped = pld._plan_pld([single] * n, h, tail)
    library = pld._single_pld(single, h).self_compose(n, tail)
    one_by_one = pld._single_pld(single, h)
    for _ in range(n - 1):
        one_by_one = one_by_one.compose(pld._single_pld(single, h), tail)
    eps = np.linspace(0.0, 4.0, 41)

    def curve(pld: Any) -> np.ndarray:
        return np.array([pld.delta_for_epsilon(float(x)) for x in eps])

    reference = curve(one_by_one)
    np.testing.assert_allclose(curve(grouped), reference, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(curve(library), reference, rtol=1e-9, atol=1e-13)
    if isinstance(single, _losses._DiscreteLoss):
        return  # the twin is ε-DP's worst case, which dominates k-ary RR: compared in another test
    mixed = pld._plan_pld([single, twin] * (n // 2), h, tail)
    np.testing.assert_allclose(curve(mixed), reference, rtol=1e-7, atol=1e-13)


def test_krr_is_dominated_by_the_worst_case_of_its_epsilon() -> None:
    for k in (3, 6):
        plan = compose_plan([rr(0.6, k)] * 12, delta=1e-6)
        worst = compose_plan([known(PureDP(0.6))] * 12, delta=1e-6)
        assert epsilon_of(plan) <= epsilon_of(worst)


# --------------------------------------------------------------------------------------------------
# speed and events from the real mechanisms


def test_a_plan_of_20_distinct_events_is_fast() -> None:
    events = (
        [laplace(e) for e in np.linspace(0.05, 1.0, 7)]
        + [gaussian(s) for s in np.linspace(1.0, 30.0, 7)]
        + [rr(e, k) for e, k in zip(np.linspace(0.1, 2.0, 6), range(2, 8), strict=True)]
    )
    compose_plan(events[:2], delta=1e-6)  # import dp-accounting outside the timing
    start = time.process_time()  # this process's CPU time: other processes on the machine do not count
    result = compose_plan(events, delta=1e-6)
    elapsed = time.process_time() - start
    assert result.method == "pld"
    assert elapsed < 1.5  # measured about 0.1 s of CPU (numpy 1.26 and 2.4, dp-accounting 0.4.4 and 0.6)


def test_events_from_the_mechanisms() -> None:
    from dp_pipeline.mechanisms import BinaryRandomizedResponse, Gaussian, KRandomizedResponse, Laplace

    lap = Laplace(epsilon=0.5, sensitivity=2.0).event
    gau = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0).event
    brr = BinaryRandomizedResponse(epsilon=1.0, variant="spinner_coin").event
    krr = KRandomizedResponse(epsilon=1.0, categories=("a", "b", "c", "d", "e")).event
    plan = [lap, gau, brr, krr]
    for event in plan:
        assert group_event(event, 1) is event
        event_gdp(event)
    assert event_gdp(gau).mu == pytest.approx(1.0 / gau.parameters["sigma"])  # type: ignore[operator]
    result = compose_plan(plan, delta=1e-5)
    assert result.method == "pld"
    assert epsilon_of(result) < compose_basic([e.guarantee for e in plan]).epsilon


@pytest.mark.processes
def test_accounting_does_not_import_the_mechanisms() -> None:
    code = (
        "import sys, dp_pipeline.accounting._composition;"
        "bad = [m for m in sys.modules if m.startswith('dp_pipeline.mechanisms')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------------------
# bad input


bad_numbers = st.one_of(
    st.floats(allow_nan=True).filter(lambda d: not 0.0 <= d < 1.0),
    st.just(math.nan),
    st.text(max_size=3),
    st.none(),
    st.booleans(),
    st.lists(st.floats(0, 0.5), max_size=2),
)
not_events = st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none(), st.just(PureDP(1.0)))


@given(bad_numbers)
def test_bad_delta_is_refused(delta: object) -> None:
    with pytest.raises(InvalidParameterError, match="delta"):
        compose_plan([laplace(1.0)], delta=delta)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="delta"):
        as_approx_dp(GaussianDP(1.0), delta)  # type: ignore[arg-type]


@given(not_events)
def test_non_events_are_refused(item: Any) -> None:
    for function in (lambda e: compose_plan(e, delta=1e-6), compose_plan_gdp):
        with pytest.raises(InvalidParameterError, match="events"):
            function([laplace(1.0), item])
    with pytest.raises(InvalidParameterError):
        group_event(item, 2)
    with pytest.raises(InvalidParameterError):
        event_gdp(item)


@given(st.one_of(st.integers(max_value=0), st.floats(), st.booleans(), st.text(max_size=2), st.none()))
def test_bad_group_size_is_refused(k: object) -> None:
    with pytest.raises(InvalidParameterError, match="group_size"):
        group_event(laplace(1.0), k)  # type: ignore[arg-type]


@given(st.one_of(st.integers(), st.floats(), st.text(max_size=2), st.none(), st.just(laplace(1.0))))
def test_non_guarantees_are_refused(item: object) -> None:
    with pytest.raises(InvalidParameterError):
        compose_basic([PureDP(1.0), item])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError):
        compose_gdp([GaussianDP(1.0), item])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError):
        as_gdp(item)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        as_approx_dp(item, 1e-6)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "not_a_sequence", [laplace(1.0), PureDP(1.0), "laplace", None, 3, iter([laplace(1.0)])]
)
def test_non_sequences_are_refused(not_a_sequence: object) -> None:
    with pytest.raises(InvalidParameterError):
        compose_plan(not_a_sequence, delta=1e-6)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        compose_basic(not_a_sequence)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        compose_gdp(not_a_sequence)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "event",
    [
        PrivacyEvent(kind="laplace", guarantee=PureDP(1.0), sensitivity=1.0),  # no scale
        PrivacyEvent(kind="laplace", guarantee=PureDP(1.0), parameters={"scale": 1.0}),  # no sensitivity
        PrivacyEvent(kind="laplace", guarantee=PureDP(1.0), sensitivity=1.0, parameters={"scale": -1.0}),
        PrivacyEvent(kind="laplace", guarantee=PureDP(1.0), sensitivity=1.0, parameters={"scale": math.nan}),
        PrivacyEvent(kind="laplace", guarantee=PureDP(1.0), sensitivity=1.0, parameters={"scale": "1"}),
        # claims less than its noise gives
        PrivacyEvent(kind="laplace", guarantee=PureDP(0.5), sensitivity=1.0, parameters={"scale": 1.0}),
        PrivacyEvent(kind="laplace", guarantee=GaussianDP(0.5), sensitivity=1.0, parameters={"scale": 1.0}),
        PrivacyEvent(kind="gaussian", guarantee=PureDP(5.0), sensitivity=1.0, parameters={"sigma": 1.0}),
        PrivacyEvent(kind="gaussian", guarantee=GaussianDP(0.5), sensitivity=1.0, parameters={"sigma": 1.0}),
        PrivacyEvent(
            kind="gaussian", guarantee=ApproxDP(1.0, 1e-9), sensitivity=1.0, parameters={"sigma": 1.0}
        ),
        PrivacyEvent(kind="gaussian", guarantee=GaussianDP(1.0), sensitivity=1.0, parameters={"sigma": 0.0}),
        PrivacyEvent(
            kind="randomized_response",
            guarantee=PureDP(1.0),
            parameters={"categories": 2, "p_true": 0.9, "p_other": 0.2},  # does not sum to 1
        ),
        PrivacyEvent(
            kind="randomized_response",
            guarantee=PureDP(1.0),
            parameters={"categories": 2, "p_true": 0.9, "p_other": 0.1},  # ln 9 > 1
        ),
        PrivacyEvent(
            kind="randomized_response",
            guarantee=PureDP(5.0),
            parameters={"categories": 2.5, "p_true": 0.9, "p_other": 0.1},
        ),
        PrivacyEvent(
            kind="randomized_response",
            guarantee=PureDP(5.0),
            parameters={"categories": 2, "p_true": 1.0, "p_other": 0.0},
        ),
        PrivacyEvent(kind="randomized_response", guarantee=PureDP(5.0), parameters={"categories": 2}),
    ],
)
def test_corrupt_events_are_refused(event: PrivacyEvent) -> None:
    for function in (
        lambda e: compose_plan([e], delta=1e-6),
        lambda e: compose_plan([e], delta=0.0),
        lambda e: compose_plan_gdp([e]),
        event_gdp,
        lambda e: group_event(e, 2),
    ):
        with pytest.raises(InvalidParameterError):
            function(event)


def test_anti_truthful_and_uninformative_randomized_response() -> None:
    # reporting the truth less often than another answer still leaks ln(p_other/p_true)
    swapped = PrivacyEvent(
        kind="randomized_response",
        guarantee=PureDP(math.log(3.0)),
        parameters={"categories": 2, "p_true": 0.25, "p_other": 0.75},
    )
    assert epsilon_of(compose_plan([swapped] * 4, delta=1e-6)) == pytest.approx(
        epsilon_of(compose_plan([rr(math.log(3.0))] * 4, delta=1e-6)), rel=1e-9
    )
    silent = PrivacyEvent(
        kind="randomized_response",
        guarantee=PureDP(0.0),
        parameters={"categories": 4, "p_true": 0.25, "p_other": 0.25},
    )
    assert compose_plan([silent] * 3, delta=1e-6) == Composition(ApproxDP(0.0, 0.0), "basic")
