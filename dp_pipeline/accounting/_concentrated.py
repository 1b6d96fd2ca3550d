"""Zero-concentrated DP (zCDP): reading ρ-zCDP as (ε, δ)-DP, rounded toward more privacy loss.

A mechanism is ρ-zCDP if D_α(M(D) ‖ M(D')) ≤ ρα for every order α > 1 and all neighbours (Bun & Steinke
2016, Def. 1.1). The conversion is Canonne, Kamath & Steinke's (2020, §2.3): the hockey-stick divergence is
δ = E[max(0, 1 − e^{ε − Z})] for the privacy loss Z, and bounding max(0, 1 − e^{ε − z}) by c·e^{(α−1)z} at one
order α gives, from the moment E[e^{(α−1)Z}] ≤ e^{(α−1)αρ},

    ε(ρ, δ) = inf over α > 1 of  αρ + c(α),   c(α) = (ln(1/δ) − ln α)/(α − 1) + ln(1 − 1/α).

It is below Bun & Steinke's ε = ρ + 2√(ρ ln(1/δ)) at every ρ and δ (the factor (1 − 1/α)^α/(α − 1) that it
adds is below 1), and it is what OpenDP (``make_zCDP_to_approxDP``) and dp-accounting's RDP accountant
evaluate. It is not the optimal reading of ρ-zCDP (which has no closed form).

**Exactness.** Every α > 1 gives a valid bound, so α only needs to be near the optimum: it comes from a
floating-point root of ∂/∂α = ρ − (ln(1/δ) − ln α)/(α − 1)² (one root: the left side grows, the right side
falls). The bound at that α is then evaluated in 60-digit decimal arithmetic, whose logarithms and
quotients are correctly rounded (relative error below 10⁻⁵⁹ each), plus a margin of 10⁻⁵⁰ times the sum of
the terms' magnitudes, which exceeds their total rounding error; the result is rounded up to a double
(:func:`zcdp_epsilon`) or, for the largest ρ a budget allows, down (:func:`zcdp_rho_limit`). Written here
rather than taken from dp-accounting or OpenDP on purpose: the core needs neither, dp-accounting rounds to
nearest over a fixed grid of orders, and the ledger needs ρ as an exact decimal. The tests compare both
functions with mpmath, dp-accounting and OpenDP.

References
----------
Bun & Steinke, "Concentrated differential privacy: simplifications, extensions, and lower bounds", TCC 2016.
Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020, §2.3.
Mironov, "Rényi differential privacy", CSF 2017 (the Rényi divergences of the Laplace mechanism).
Cesar & Rogers, "Bounding, concentrating, and truncating: unifying privacy loss composition for data
analytics", ALT 2021 (bounded range implies ε²/8-zCDP).
Harrison & Manurangsi, "Exact zCDP characterizations for fundamental differentially private mechanisms",
FORC 2026, arXiv:2510.25746 (the Laplace mechanism is exactly (ε + e^{−ε} − 1)-zCDP).
"""

from __future__ import annotations

import decimal
import functools
import math
import sys
from decimal import Decimal
from fractions import Fraction

from scipy import optimize

from dp_pipeline import _exact as exact

__all__ = ["bounded_range_rho", "laplace_rho", "zcdp_epsilon", "zcdp_rho_limit"]

_CONTEXT = decimal.Context(
    prec=60,
    Emax=100_000,
    Emin=-100_000,
    rounding=decimal.ROUND_HALF_EVEN,
    traps=[decimal.InvalidOperation, decimal.Overflow, decimal.DivisionByZero],
)
_MARGIN = Decimal("1e-50")
_ONE = Decimal(1)
_LOG_ALPHA_CAP = 690.0  # α ≤ 1 + e⁶⁹⁰, within the doubles


def _log_inverse(delta: float) -> float:
    return -math.log(delta)


def _best_alpha(rho: float, log_inv_delta: float) -> float:
    """α > 1 near the minimiser of αρ + c(α): the root of (α − 1)²ρ = ln(1/δ) − ln α, found in doubles for
    t = ln(α − 1) (the root spans hundreds of orders of magnitude as ρ does)."""

    def slope(t: float) -> float:  # (α − 1)²·(∂/∂α of αρ + c(α)) at α = 1 + eᵗ: negative below the root
        return math.exp(t + math.log(rho) + t) - log_inv_delta + math.log1p(math.exp(t))

    low = math.log(sys.float_info.epsilon)  # α = 1 + 2⁻⁵²: the least α kept (below it α − 1 is imprecise)
    high = min(math.log(math.sqrt(log_inv_delta / rho) + 1.0), _LOG_ALPHA_CAP)  # slope ≥ 0 there
    if slope(low) >= 0.0:  # ρ so large that the minimiser is next to 1: α = 1 + 2⁻⁵² is valid
        t = low
    elif slope(high) <= 0.0:  # ρ so small that the minimiser lies beyond the cap: the cap is valid
        t = high
    else:
        t = float(optimize.brentq(slope, low, high, xtol=1e-15, rtol=1e-15, maxiter=400))
    return 1.0 + math.exp(t)


def _c_upper(alpha: float, delta: float) -> Fraction:
    """An upper bound on c(α) = (ln(1/δ) − ln α)/(α − 1) + ln(1 − 1/α), exactly as a Fraction."""
    a = Decimal(alpha)
    a_minus_one = exact.subtract(a, _ONE)  # exact
    log_inv_delta = _CONTEXT.minus(_CONTEXT.ln(Decimal(delta)))
    log_a = _CONTEXT.ln(a)
    log_a_minus_one = _CONTEXT.ln(a_minus_one)
    first = _CONTEXT.divide(_CONTEXT.subtract(log_inv_delta, log_a), a_minus_one)
    second = _CONTEXT.subtract(log_a_minus_one, log_a)
    size = _CONTEXT.add(
        _CONTEXT.divide(_CONTEXT.add(abs(log_inv_delta), abs(log_a)), a_minus_one),
        _CONTEXT.add(abs(log_a_minus_one), abs(log_a)),
    )
    bound = _CONTEXT.add(_CONTEXT.add(first, second), _CONTEXT.multiply(_MARGIN, _CONTEXT.add(size, _ONE)))
    return Fraction(bound)


@functools.lru_cache(maxsize=1024)
def zcdp_epsilon(rho: Decimal, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP, rounded up: the bound of the module notes at a near-optimal α.

    Parameters
    ----------
    rho : Decimal
        ρ ≥ 0, exactly (the ledger's sum).
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        0.0 for ρ = 0; never below inf over α of αρ + c(α), never negative.
    """
    if rho <= 0:
        return 0.0
    alpha = _best_alpha(float(rho), _log_inverse(delta))
    bound = Fraction(alpha) * Fraction(rho) + _c_upper(alpha, delta)
    return max(0.0, exact.float_up(bound))


@functools.lru_cache(maxsize=256)
def zcdp_rho_limit(epsilon: float, delta: float) -> Decimal:
    """ρ_B: a double, rounded down, such that every ρ ≤ ρ_B has ρ-zCDP implying (ε, δ)-DP.

    At the order α_B that is optimal for the largest such ρ (found in doubles), ρ ≤ (ε − c(α_B))/α_B gives
    α_Bρ + c(α_B) ≤ ε; c(α_B) is bounded from above and the quotient rounded down, so ρ_B is certified.
    Returns 0 when no ρ > 0 is certified (a δ too close to 1 for the bound).

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float
        δ in (0, 1).
    """
    log_inv_delta = _log_inverse(delta)

    def excess(rho: float) -> float:  # ε(ρ) − ε in doubles, to locate ρ_B and its order
        alpha = _best_alpha(rho, log_inv_delta)
        c = (log_inv_delta - math.log(alpha)) / (alpha - 1.0) + math.log1p(-1.0 / alpha)
        return alpha * rho + c - epsilon

    low, high = sys.float_info.min, max(epsilon, sys.float_info.min)
    if excess(low) >= 0.0:
        return Decimal(0)
    while excess(high) <= 0.0 and high < sys.float_info.max / 4:
        high *= 2.0
    rho = float(optimize.brentq(excess, low, high, xtol=sys.float_info.min, rtol=1e-15))
    alpha = _best_alpha(rho, log_inv_delta)
    limit = (Fraction(epsilon) - _c_upper(alpha, delta)) / Fraction(alpha)
    return exact.to_decimal(exact.float_down(limit))


_EIGHTH = Decimal("0.125")


def laplace_rho(loss: Fraction) -> Decimal:
    """ρ of Laplace noise whose exact loss is ε = Δ/b (for a group of k, kΔ/b): ε + e^{−ε} − 1, rounded up
    to 40 digits.

    Parameters
    ----------
    loss : Fraction
        ε = Δ/b ≥ 0, exactly.

    Returns
    -------
    Decimal
        Never below ε + e^{−ε} − 1, which is below the ε²/2 of a generic ε-DP release (0.368 against 0.5 at
        ε = 1; the same to first order as ε → 0).

    Notes
    -----
    **Proof.** Lap(0, b) against Lap(Δ, b) has Rényi divergence (Mironov 2017, the table of basic
    mechanisms), with ε = Δ/b,

        D_α = 1/(α − 1)·ln(α/(2α − 1)·e^{(α − 1)ε} + (α − 1)/(2α − 1)·e^{−αε}),   α > 1,

    the same for the reversed pair (the two densities are mirror images), and ρ-zCDP is D_α ≤ ρα for all
    α > 1 (Bun & Steinke 2016, Def. 1.1). The least such ρ, sup over α > 1 of D_α/α, is the limit at α → 1,
    the Kullback–Leibler divergence ε + e^{−ε} − 1 (proved by Harrison & Manurangsi, confirming Wang's
    2022 conjecture; the tests check D_α against quadrature of the two densities and
    D_α/α ≤ ρ on a fine grid of α in mpmath). A shift s ≤ Δ costs ρ(s/b) ≤ ρ(Δ/b) (ρ grows with ε). A vector
    query with L1 sensitivity Δ and independent noise per coordinate costs Σρ(sᵢ/b) over shifts with
    Σsᵢ ≤ Δ (zCDP composes additively), at most ρ(Δ/b) because ρ is convex (ρ'' = e^{−ε} > 0) with
    ρ(0) = 0, hence superadditive.

    **Exactness.** ε is first rounded up to 40 digits (ρ grows with ε), then ε − 1 + e^{−ε} is evaluated
    in decimal arithmetic with p = 60 + 2·(digits of 1/ε) digits, each operation correctly rounded (error
    below 10^{1−p} times the operands' size ε + 1 each), plus a margin of 10^{2−p}·(ε + 1) that exceeds
    their sum: ρ ≈ ε²/2 keeps about 58 correct digits however small ε is. The result is rounded up.
    """
    if loss <= 0:
        return Decimal(0)
    epsilon = exact.decimal_up(loss)
    digits = 60 + 2 * max(0, -epsilon.adjusted())
    context = _CONTEXT.copy()
    context.prec = digits
    value = context.add(context.subtract(epsilon, _ONE), context.exp(context.minus(epsilon)))
    margin = Fraction(1, 10 ** (digits - 2)) * (Fraction(epsilon) + 1)
    return exact.decimal_up(Fraction(value) + margin)


def bounded_range_rho(epsilon: Decimal) -> Decimal:
    """ρ = ε²/8 of an ε-bounded-range release (the exponential mechanism at ε), exactly.

    Parameters
    ----------
    epsilon : Decimal
        ε ≥ 0 of the release for the group charged (kε for a group of k).

    Returns
    -------
    Decimal
        ε²/8, a quarter of the ε²/2 of a generic ε-DP release.

    Notes
    -----
    **Proof.** ε-bounded range means that for every pair of neighbours the privacy loss Z = ln(P(y)/Q(y))
    lies in an interval [t − ε, t] of width ε. Cesar & Rogers 2021 show such a mechanism is
    ε²/8-zCDP: by Hoeffding's lemma, ln E_P[e^{λZ}] ≤ λ·E_P[Z] + λ²ε²/8, and for bounded-range losses the
    mean E_P[Z] (the KL divergence) is itself at most ε²/8, which gives D_α = ln E_P[e^{(α−1)Z}]/(α − 1) ≤
    αε²/8 (the tests check D_α/α ≤ ε²/8 in mpmath over the dominating generalised randomized responses of
    ε-BR, Dong, Durfee & Rogers 2020, for every t and a fine grid of α). The exponential mechanism at ε is
    ε-BR (Durfee & Rogers 2019). For a group of k, the loss is a sum of k losses each in an interval of
    width ε, so the mechanism is kε-BR: ρ = (kε)²/8.
    """
    return exact.multiply(exact.square(epsilon), _EIGHTH)
