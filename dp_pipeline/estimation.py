"""Estimates from randomised reports, each with its variance, standard error and a confidence interval.

Every estimator returns an :class:`Estimate`. The point estimates of the randomized-response estimators are
unbiased; their variances are the closed forms evaluated at the observed report frequencies (plug-in), and the
intervals are normal-approximation (Wald) intervals, intersected with the range the estimated quantity can
take. Estimates are vectorised: a share estimated from an ``(n, m)`` array of reports (n respondents, m
items) is an :class:`Estimate` of m shares.

Two sampling models are worth telling apart. If the n respondents are a random sample from a population
(reports i.i.d.), the variance of a share is λ(1 − λ)/(n(p − q)²) for the population share: the model of
:func:`rr_share`. If the respondents are fixed and the quantity of interest is theirs, the only randomness
is the mechanism's and the variance is smaller (by π(1 − π)/n for a share, Nf(1 − f) for a count whose
true share is f): the counts :func:`rr_count`, :func:`krr_counts` and :func:`krr_counts_from_tally` are
of these respondents and report this variance, the sum of the respondents' independent Bernoulli
variances over (p − q)². :func:`ldp_mean` is the exception to unbiasedness: no unbiased mean exists from
the bounded mechanisms' reports in general (see its notes).

This module sits above :mod:`dp_pipeline.mechanisms`: it reads mechanisms; mechanisms never import it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, special

from dp_pipeline._validation import check_array, check_real
from dp_pipeline.exceptions import InvalidParameterError, data_value_error
from dp_pipeline.mechanisms._randomized_response import (
    BinaryRandomizedResponse,
    KRandomizedResponse,
    check_binary,
)

__all__ = [
    "Estimate",
    "krr_counts",
    "krr_counts_from_tally",
    "ldp_mean",
    "rr_count",
    "rr_share",
    "rr_share_from_counts",
]

FloatOrArray = float | NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Estimate:
    """A point estimate with its (estimated) variance and a confidence interval; scalars or arrays.

    Attributes
    ----------
    value : float or ndarray
        The point estimate.
    variance : float or ndarray
        The estimated variance of ``value`` (see each estimator for exact vs plug-in).
    ci_low, ci_high : float or ndarray
        The two-sided interval at ``level``: value ∓ z·std_error with z = Φ⁻¹((1 + level)/2), intersected
        with the range the quantity can take (never lowers coverage; the point estimate is not clipped,
        which keeps it unbiased).
    level : float
        The interval's nominal coverage, 0.95 by default.
    labels : tuple or None
        For per-category estimates, the category of each entry (``estimate["a"]`` selects one).
    """

    value: FloatOrArray
    variance: FloatOrArray
    ci_low: FloatOrArray
    ci_high: FloatOrArray
    level: float = 0.95
    labels: tuple[Hashable, ...] | None = None

    def __post_init__(self) -> None:
        for field in (self.value, self.variance, self.ci_low, self.ci_high):
            if isinstance(field, np.ndarray):
                field.flags.writeable = False  # frozen all the way down

    @property
    def std_error(self) -> FloatOrArray:
        """√variance."""
        return _out(np.sqrt(np.asarray(self.variance, dtype=float)))

    def __getitem__(self, label: Hashable) -> Estimate:
        """The estimate of one category (per-category estimates only)."""
        if self.labels is None:
            raise InvalidParameterError("this estimate has no labels; index its arrays instead", "label")
        try:
            i = self.labels.index(label)
        except ValueError:
            message = f"{label!r} is not one of the labels {self.labels}"
            raise InvalidParameterError(message, "label") from None

        def pick(a: FloatOrArray) -> float:
            return float(np.asarray(a, dtype=float)[i])

        return Estimate(
            pick(self.value), pick(self.variance), pick(self.ci_low), pick(self.ci_high), level=self.level
        )

    def to_dict(self) -> dict[Hashable, float]:
        """Label → point estimate (per-category estimates only)."""
        if self.labels is None:
            raise InvalidParameterError("this estimate has no labels", "label")
        return dict(zip(self.labels, np.asarray(self.value, dtype=float).tolist(), strict=True))


def _out(value: NDArray[np.float64]) -> FloatOrArray:
    return float(value) if np.ndim(value) == 0 else value


def _z(level: Any) -> float:
    value = check_real(level, "level")
    if not 0.0 < value < 1.0:
        raise InvalidParameterError(f"'level' must lie in (0, 1), got {value}", "level")
    return float(special.ndtri((1.0 + value) / 2.0))


def _interval(
    value: NDArray[np.float64], variance: NDArray[np.float64], level: float, low: Any, high: Any
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    half = _z(level) * np.sqrt(variance)
    return np.clip(value - half, low, high), np.clip(value + half, low, high)


def _require(mechanism: Any, kind: type, what: str) -> None:
    if not isinstance(mechanism, kind):
        got = type(mechanism).__name__
        raise InvalidParameterError(
            f"'mechanism' must be the {kind.__name__} that produced the {what}, got {got}", "mechanism"
        )


def _check_count_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 1:
        raise InvalidParameterError(f"'n' must be a positive integer (the number of reports), got {n!r}", "n")
    return int(n)


def _check_counts(counts: Any, name: str, total: int | None) -> NDArray[np.float64]:
    array = check_array(counts, name)
    if np.any(array < 0) or np.any(array != np.floor(array)):
        raise InvalidParameterError(f"{name!r} must hold non-negative integer counts", name)
    if total is not None and np.any(array > total):
        raise InvalidParameterError(f"{name!r} must not exceed n = {total}", name)
    return array


# ------------------------------------------------------------------------------------------------------------
# Binary randomized response
# ------------------------------------------------------------------------------------------------------------


def rr_share_from_counts(
    yes: Any, n: Any, mechanism: BinaryRandomizedResponse, *, level: float = 0.95
) -> Estimate:
    """Unbiased estimate of the true "yes" share from ``yes`` reports of 1 among ``n`` (vectorised).

    Parameters
    ----------
    yes : int or array-like of int
        Reports saying 1 (yes), each in [0, n].
    n : int
        Number of reports behind each count.
    mechanism : BinaryRandomizedResponse
        The mechanism that produced the reports.
    level : float
        Interval coverage, 0.95 by default.

    Returns
    -------
    Estimate
        The share π̂, its plug-in variance and interval (clipped to [0, 1]).

    Notes
    -----
    With λ̂ = yes/n the observed share of 1s, q = P(report 1 | truth 0) and p_t = P(report 1 | truth 1),
    E[λ̂] = q + (p_t − q)π, so π̂ = (λ̂ − q)/(p_t − q) is unbiased. Per variant (Warner 1965 for the spinner,
    the truth-or-coin design of Dwork & Roth 2014, Sec. 3.2, for spinner_coin):

    - spinner_coin (p = (e^ε − 1)/(e^ε + 1)): π̂ = (λ̂ − 0.5(1 − p))/p;
    - spinner (p = e^ε/(1 + e^ε)): π̂ = (λ̂ − (1 − p))/(2p − 1).

    Both reduce to the same number at the same ε (p_t − q = tanh(ε/2)).

    Variance (exact, for i.i.d. reports): Var(π̂) = λ(1 − λ)/(n (p_t − q)²). The returned variance is its
    **plug-in** estimate with λ̂ in place of λ, whose expectation is (1 − 1/n) times the exact value. When
    λ̂ is 0 or 1 the plug-in variance is 0 and the interval collapses to the point.

    References
    ----------
    Warner, "Randomized response", JASA 60(309), 1965.
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Sec. 3.2.
    """
    _require(mechanism, BinaryRandomizedResponse, "reports")
    total = _check_count_n(n)
    counts = _check_counts(yes, "yes", total)
    q, slope = mechanism.p_other, mechanism.p_true_minus_other
    share = counts / total
    value = (share - q) / slope
    variance = share * (1.0 - share) / (total * slope**2)
    low, high = _interval(value, variance, level, 0.0, 1.0)
    return Estimate(_out(value), _out(variance), _out(low), _out(high), level)


def _binary_counts(reports: Any, axis: int | None) -> tuple[NDArray[np.float64], int]:
    array = check_binary(reports, "reports")
    if axis is None:
        return np.asarray(np.count_nonzero(array), dtype=float), int(array.size)
    is_int = isinstance(axis, numbers.Integral) and not isinstance(axis, bool)
    if not (is_int and -array.ndim <= axis < array.ndim):
        raise InvalidParameterError(f"'axis' must be None or an axis of 'reports', got {axis!r}", "axis")
    return np.count_nonzero(array, axis=int(axis)).astype(float), int(array.shape[axis])


def rr_share(
    reports: Any, mechanism: BinaryRandomizedResponse, *, axis: int | None = 0, level: float = 0.95
) -> Estimate:
    """Unbiased estimate of the true "yes" share from binary randomized-response reports.

    Parameters
    ----------
    reports : array-like of 0/1 or bool
        The randomised reports. With ``axis=0`` (default) a 1-D array gives one share and an ``(n, m)``
        array (n respondents, m items of a multiple-choice question) gives m shares.
    mechanism : BinaryRandomizedResponse
        The mechanism that produced the reports.
    axis : int or None
        The respondents' axis; None pools every report.
    level : float
        Interval coverage, 0.95 by default.

    Returns
    -------
    Estimate
        π̂ = (λ̂ − q)/(p_t − q) with plug-in variance λ̂(1 − λ̂)/(n (p_t − q)²); see
        :func:`rr_share_from_counts` for the formulas.
    """
    _require(mechanism, BinaryRandomizedResponse, "reports")
    yes, n = _binary_counts(reports, axis)
    return rr_share_from_counts(yes, n, mechanism, level=level)


def _fixed_count_variance(
    count: NDArray[np.float64], total: float, p: float, q: float, slope: float
) -> NDArray[np.float64]:
    """Var(n̂) = (n p(1 − p) + (N − n) q(1 − q))/(p − q)² of the unbiased count n̂ = (N_v − Nq)/(p − q) of N
    fixed respondents of whom n hold the value, evaluated at n = the estimate clipped to [0, N]; ``slope``
    is p − q (as the mechanism computes it, without cancellation).

    N_v is a sum of independent Bernoulli reports: n with P(report v) = p, N − n with q. The variance is
    linear in n, so at the unbiased estimate it is unbiased, except where clipping (which keeps it
    positive) moves it.
    """
    held = np.clip(count, 0.0, total)
    return (held * (p * (1.0 - p)) + (total - held) * (q * (1.0 - q))) / slope**2


def rr_count(
    reports: Any, mechanism: BinaryRandomizedResponse, *, axis: int | None = 0, level: float = 0.95
) -> Estimate:
    """Unbiased estimate of how many of these respondents truly answered yes: n·π̂, with its exact variance.

    Same arguments as :func:`rr_share`; the interval is clipped to [0, n].

    Notes
    -----
    The n respondents are fixed and c of them hold yes; the reports are independent, c of them 1 with
    probability p_t and n − c with q = 1 − p_t, so Var(n·π̂) = (c·p_t(1 − p_t) + (n − c)·q(1 − q))/(p_t − q)²
    = n·q(1 − q)/(p_t − q)², the same for every c (p_t(1 − p_t) = q(1 − q)): exact, no plug-in. It is
    n·π(1 − π) below the i.i.d. variance n²·Var(π̂) of a sampled population (Wang et al. 2017).
    """
    _require(mechanism, BinaryRandomizedResponse, "reports")
    yes, n = _binary_counts(reports, axis)
    share = rr_share_from_counts(yes, n, mechanism, level=level)
    value = np.asarray(share.value, dtype=float) * float(n)
    p, q, slope = mechanism.p_true, mechanism.p_other, mechanism.p_true_minus_other
    variance = _fixed_count_variance(value, float(n), p, q, slope)
    low, high = _interval(value, variance, level, 0.0, n)
    return Estimate(_out(value), _out(variance), _out(low), _out(high), level)


# ------------------------------------------------------------------------------------------------------------
# k-ary randomized response
# ------------------------------------------------------------------------------------------------------------


def krr_counts_from_tally(counts: Any, mechanism: KRandomizedResponse, *, level: float = 0.95) -> Estimate:
    """Unbiased per-category counts from the tally N_v of k-RR reports (in the mechanism's category order).

    Parameters
    ----------
    counts : array-like of int, length k
        N_v, the number of reports saying each category (``mechanism.tally(reports)``).
    mechanism : KRandomizedResponse
        The mechanism that produced the reports.
    level : float
        Interval coverage, 0.95 by default.

    Returns
    -------
    Estimate
        Labelled by category: n̂_v, the variances of the counts among these N respondents and intervals
        clipped to [0, N].

    Notes
    -----
    With N = Σ N_v, E[N_v] = p n_v + q(N − n_v), so n̂_v = (N_v − Nq)/(p − q) is unbiased.
    Variance, for these N respondents (fixed; the reports independent): N_v is n_v Bernoulli(p) reports
    plus N − n_v Bernoulli(q) ones, so Var(n̂_v) = (n_v p(1 − p) + (N − n_v) q(1 − q))/(p − q)². It is
    linear in n_v; the returned variance evaluates it at n̂_v clipped to [0, N] (unbiased wherever the
    estimate lies in [0, N]). Wang et al.'s N λ_v(1 − λ_v)/(p − q)² (λ_v = q + (p − q)n_v/N) is the
    variance for respondents sampled from a population, larger by N f(1 − f) with f = n_v/N.

    References
    ----------
    Wang, Blocki, Li & Jha, "Locally differentially private protocols for frequency estimation",
    USENIX Security 2017.
    """
    _require(mechanism, KRandomizedResponse, "reports")
    tally = _check_counts(counts, "counts", None)
    if tally.shape != (mechanism.k,):
        raise InvalidParameterError(
            f"'counts' must have one entry per category ({mechanism.k}), got shape {tally.shape}", "counts"
        )
    total = float(tally.sum())
    if total == 0:
        raise InvalidParameterError("'counts' are all zero: no reports to estimate from", "counts")
    value = (tally - total * mechanism.q) / mechanism.p_minus_q
    variance = _fixed_count_variance(value, total, mechanism.p, mechanism.q, mechanism.p_minus_q)
    low, high = _interval(value, variance, level, 0.0, total)
    return Estimate(value, variance, low, high, level, labels=mechanism.categories)


def krr_counts(reports: Any, mechanism: KRandomizedResponse, *, level: float = 0.95) -> Estimate:
    """Unbiased per-category counts from k-RR reports, with their variances and intervals.

    ``reports`` holds categories (any shape; all are counted). The result is labelled by category:
    ``krr_counts(r, m)["a"].value``. See :func:`krr_counts_from_tally` for the formulas;
    ``Estimate.value`` equals :meth:`KRandomizedResponse.estimate_counts`.
    """
    _require(mechanism, KRandomizedResponse, "reports")
    return krr_counts_from_tally(mechanism.tally(reports), mechanism, level=level)


# ------------------------------------------------------------------------------------------------------------
# Means from the bounded mechanisms
# ------------------------------------------------------------------------------------------------------------


def _monotone_advice(mechanism: Any, ts: NDArray[np.float64]) -> str:
    """For a bounded staircase: the smallest γ (on a 0.01 grid) at the same ε whose E[Y | t] is strictly
    increasing on the same grid; BoundedLaplace always is."""
    from dp_pipeline.mechanisms import BoundedStaircase

    if isinstance(mechanism, BoundedStaircase):
        for step in range(math.ceil(mechanism.gamma * 100), 100):
            candidate = BoundedStaircase(**{**mechanism.model_dump(), "gamma": step / 100})
            if np.all(np.diff(np.asarray(candidate.expected_output(ts), dtype=float)) > 0):
                return (
                    f"at ε = {mechanism.epsilon:g} use gamma ≥ {step / 100:.2f}, or BoundedLaplace (always "
                    "supported)"
                )
    return "use another mechanism (BoundedLaplace is always supported)"


def ldp_mean(reports: Any, mechanism: Any, *, level: float = 0.95, grid: int = 2001) -> Estimate:
    """Mean of the true values behind reports of a bounded mechanism, by matching the mean report.

    Parameters
    ----------
    reports : array-like of float
        Outputs of ``mechanism.randomize``; all lie in [lower, upper].
    mechanism : BoundedLaplace or BoundedStaircase
        Any mechanism with ``lower``, ``upper`` and ``expected_output(t)`` = E[Y | t].
    level : float
        Interval coverage, 0.95 by default.
    grid : int
        Points of the grid on [lower, upper] on which g(t) = E[Y | t] is checked to be strictly increasing.

    Returns
    -------
    Estimate
        θ̂ with g(θ̂) = ȳ (θ̂ = lower or upper when ȳ lies beyond g's range), the delta-method variance
        s²/(n g'(θ̂)²) with s² the sample variance of the reports (plug-in), and an interval clipped to
        [lower, upper].

    Notes
    -----
    The mean report ȳ is an unbiased estimate of (1/n) Σ g(t_i). The truncation makes g non-linear (outputs
    are pulled toward the middle of the range), so an estimate of the mean of the t_i built from ȳ cannot be
    unbiased in general; for the bounded Laplace no function h of a report has E[h(Y) | t] = t for every t
    (F(t) = C_b(t)·E[h(Y) | t] is a Laplace-kernel integral over [l, u], so F' = F/b at l; for F = t·C_b(t),
    F'(l) = F(l)/b + C_b(l) instead).
    θ̂ = g⁻¹(ȳ) is therefore **not unbiased**. It converges to g⁻¹((1/n) Σ g(t_i)), which equals the mean of
    the t_i when they are all equal or placed symmetrically about the middle of the range (g is odd about
    it); otherwise the difference is of second order in the spread of the t_i, scaled by g''/g'. Its
    interval accounts for the noise only, not for that difference.
    When g is not strictly increasing (the bounded staircase for many γ and ε), the mean report does not
    identify the mean and the function refuses with InvalidParameterError naming ``mechanism``.
    """
    expected = getattr(mechanism, "expected_output", None)
    lower, upper = getattr(mechanism, "lower", None), getattr(mechanism, "upper", None)
    if not callable(expected) or lower is None or upper is None:
        got = type(mechanism).__name__
        raise InvalidParameterError(
            f"'mechanism' must be a bounded mechanism with expected_output(t), got {got}", "mechanism"
        )
    if isinstance(grid, bool) or not isinstance(grid, numbers.Integral) or grid < 3:
        raise InvalidParameterError(f"'grid' must be an integer ≥ 3, got {grid!r}", "grid")
    values = check_array(reports, "reports").ravel()
    outside = int(np.count_nonzero((values < lower) | (values > upper)))
    if outside:
        problem = f"outside the mechanism's range [{lower}, {upper}], so not its outputs"
        raise data_value_error("'reports'", outside, problem, "reports")
    n = values.size
    ts = np.linspace(lower, upper, int(grid))
    g = np.asarray(expected(ts), dtype=float)
    if not np.all(np.diff(g) > 0):
        raise InvalidParameterError(
            f"E[Y | t] of {type(mechanism).__name__} is not strictly increasing in t on [{lower}, {upper}], "
            f"so the mean report does not identify the mean input; {_monotone_advice(mechanism, ts)}",
            "mechanism",
        )
    mean = float(values.mean())
    if mean <= g[0]:
        theta = float(lower)
    elif mean >= g[-1]:
        theta = float(upper)
    else:
        i = int(np.searchsorted(g, mean))
        tolerance = 1e-13 * (upper - lower)
        theta = float(optimize.brentq(lambda t: float(expected(t)) - mean, ts[i - 1], ts[i], xtol=tolerance))
    step = (upper - lower) / (int(grid) - 1)
    a, b = max(lower, theta - step), min(upper, theta + step)
    slope = (float(expected(b)) - float(expected(a))) / (b - a)
    sample_variance = float(values.var(ddof=1)) if n > 1 else math.inf
    variance = sample_variance / (n * slope**2)
    low, high = _interval(np.asarray(theta), np.asarray(variance), level, lower, upper)
    return Estimate(theta, variance, float(low), float(high), level)
