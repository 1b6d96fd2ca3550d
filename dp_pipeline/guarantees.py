"""Privacy guarantees as frozen, validated values: pure ε-DP, approximate (ε, δ)-DP and μ-GDP.

Conversions always round toward more privacy loss, so a converted guarantee is never stronger than the
one it came from. Beside the values: their basic and μ-GDP composition (:func:`compose_basic`,
:func:`compose_gdp`, exact sums rounded up; the accountants and :mod:`dp_pipeline.accounting._composition`
build on them, and so do composite mechanisms, which never import the accounting) and the one formatter
(:func:`format_guarantee`).

References
----------
Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
Dwork & Roth, "The algorithmic foundations of differential privacy", 2014.
Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy", arXiv:2210.17520, 2022.
"""

from __future__ import annotations

import math
import struct
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field
from scipy import special

from dp_pipeline._exact import root_sum_squares_up, sum_up, times_up
from dp_pipeline._validation import (
    FiniteFloat,
    ValidatedModel,
    check_array,
    check_positive_int,
    check_real,
    check_sequence,
)
from dp_pipeline.exceptions import InvalidParameterError, UnsupportedCompositionError

__all__ = [
    "ApproxDP",
    "GaussianDP",
    "Guarantee",
    "PureDP",
    "check_guarantee",
    "compose_basic",
    "compose_gdp",
    "format_guarantee",
    "gaussian_log_delta",
    "guarantee_from_dict",
]


def _check_alpha(alpha: ArrayLike) -> NDArray[np.float64]:
    array = check_array(alpha, "alpha")
    if np.any((array < 0) | (array > 1)):
        raise InvalidParameterError("'alpha' (type I error) must lie in [0, 1]", "alpha")
    return array


def _approx_tradeoff(epsilon: float, delta: float, alpha: ArrayLike) -> NDArray[np.float64] | float:
    a = _check_alpha(alpha)
    with np.errstate(over="ignore"):
        value = np.maximum.reduce(
            [np.zeros_like(a), 1.0 - delta - math.exp(epsilon) * a, math.exp(-epsilon) * (1.0 - delta - a)]
        )
    return value if value.ndim else float(value)


class Guarantee(ValidatedModel, ABC):
    """Base class of the privacy guarantees. Subclasses are immutable and validated on construction."""

    type_name: ClassVar[str]

    @abstractmethod
    def group(self, k: int) -> Guarantee:
        """The guarantee for groups of ``k`` individuals (group privacy)."""

    @abstractmethod
    def tradeoff(self, alpha: ArrayLike) -> NDArray[np.float64] | float:
        """The trade-off function: least type II error of any test with type I error ``alpha``."""

    def __str__(self) -> str:
        return format_guarantee(self, digits=8)

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, as stored in the ledger: ``{"type": ..., <parameters>}``."""
        return {"type": self.type_name, **self.model_dump()}


# Relative rounding error of the group δ: at most a few units in the last place of log-space terms whose
# magnitudes stay below 1500 whenever the result is below 1, so under 1e-12; ten times that is added.
_GROUP_LOG_MARGIN = 1e-11


def _log_exprel(y: float) -> float:
    """log((e^y − 1)/y) for y ≥ 0 (0 at y = 0)."""
    if y < 700.0:
        return math.log(float(special.exprel(y)))
    return y + math.log1p(-math.exp(-y)) - math.log(y)


class PureDP(Guarantee):
    """Pure ε-differential privacy.

    For all neighbouring D, D' and all events S: P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S].

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε ≥ 0.

    Notes
    -----
    Group privacy: ε-DP for individuals is kε-DP for groups of k. Pure ε-DP implies μ-GDP with
    μ = 2Φ⁻¹(e^ε / (1 + e^ε)) (Dong, Roth & Su 2022, the binary randomized-response trade-off).
    """

    type_name: ClassVar[str] = "pure"
    epsilon: FiniteFloat = Field(ge=0.0)

    def __init__(self, epsilon: float, **kwargs: Any) -> None:
        super().__init__(**{"epsilon": epsilon, **kwargs})

    def group(self, k: int) -> PureDP:
        """kε-DP for groups of ``k``."""
        return PureDP(times_up(check_positive_int(k, "k"), self.epsilon))

    def tradeoff(self, alpha: ArrayLike) -> NDArray[np.float64] | float:
        """f_{ε,0}(α) = max(0, 1 − e^ε α, e^{−ε}(1 − α))."""
        return _approx_tradeoff(self.epsilon, 0.0, alpha)

    def to_approx_dp(self) -> ApproxDP:
        """The same guarantee as (ε, 0)-DP."""
        return ApproxDP(self.epsilon, 0.0)

    def to_gdp(self) -> GaussianDP:
        """The μ-GDP guarantee implied by ε-DP: μ = 2Φ⁻¹(e^ε/(1+e^ε)), rounded up.

        Evaluated as μ = 2√2·erf⁻¹(tanh(ε/2)) for ε < 1 (as √(π/2)·ε, whose relative error is O(ε²), once
        ε/2 could underflow) and as μ = −2Φ⁻¹(exp(−log(1 + e^ε))) above, in log space so that 1/(1+e^ε)
        never underflows. The result is then raised by 1e-14 relative, well above the rounding error of
        any of the forms, and by one more unit in the last place.
        """
        if self.epsilon < 1e-150:
            mu = math.sqrt(math.pi / 2.0) * self.epsilon
        elif self.epsilon < 1.0:
            mu = 2.0 * math.sqrt(2.0) * float(special.erfinv(math.tanh(self.epsilon / 2.0)))
        else:
            log_tail = -self.epsilon - math.log1p(math.exp(-self.epsilon))
            mu = -2.0 * float(special.ndtri_exp(log_tail))
        if mu == 0.0:
            return GaussianDP(0.0)
        return GaussianDP(math.nextafter(mu * (1.0 + 1e-14), math.inf))


class ApproxDP(Guarantee):
    """Approximate (ε, δ)-differential privacy; pure ε-DP when δ = 0.

    For all neighbouring D, D' and all events S: P[M(D) ∈ S] ≤ e^ε P[M(D') ∈ S] + δ.

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    delta : float
        δ in [0, 1).

    Notes
    -----
    Trade-off function (Dong, Roth & Su 2022, Prop. 2.5):
    f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)).
    Group privacy for k individuals: (kε, δ·Σᵢ₌₀ᵏ⁻¹ e^{iε}) = (kε, δ·(e^{kε} − 1)/(e^ε − 1)), by induction
    on k over a chain of neighbours (Vadhan 2017, "The complexity of differential privacy", Lemma 2.2;
    Dwork & Roth 2014, Thm 2.2).
    """

    type_name: ClassVar[str] = "approx"
    epsilon: FiniteFloat = Field(ge=0.0)
    delta: FiniteFloat = Field(default=0.0, ge=0.0, lt=1.0)

    def __init__(self, epsilon: float, delta: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**{"epsilon": epsilon, "delta": delta, **kwargs})

    @property
    def is_pure(self) -> bool:
        """True when δ = 0."""
        return self.delta == 0.0

    def group(self, k: int) -> ApproxDP:
        """(kε, δ·Σᵢ₌₀ᵏ⁻¹ e^{iε})-DP for groups of ``k``, rounded up; an error if the group δ reaches 1.

        Σᵢ₌₀ᵏ⁻¹ e^{iε} = (e^{kε} − 1)/(e^ε − 1) (k when ε = 0) is evaluated in log space as
        log k + log exprel(kε) − log exprel(ε), exprel(y) = (e^y − 1)/y, so that neither small ε nor
        large kε loses precision.
        """
        epsilon = times_up(check_positive_int(k, "k"), self.epsilon)
        if self.delta == 0.0 or k == 1:
            return ApproxDP(epsilon, self.delta)
        log_sum = math.log(k) + _log_exprel(epsilon) - _log_exprel(self.epsilon)
        log_delta = math.log(self.delta) + log_sum + _GROUP_LOG_MARGIN
        delta = math.exp(log_delta) if log_delta < 0.0 else 1.0
        if delta < sys.float_info.min:
            delta = math.nextafter(delta, math.inf)
        if delta >= 1.0:
            raise InvalidParameterError(
                f"group privacy for k={k} of {self!r} gives δ ≥ 1, which guarantees nothing", "k"
            )
        return ApproxDP(epsilon, delta)

    def tradeoff(self, alpha: ArrayLike) -> NDArray[np.float64] | float:
        """f_{ε,δ}(α) = max(0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α))."""
        return _approx_tradeoff(self.epsilon, self.delta, alpha)

    def to_gdp(self) -> GaussianDP:
        """The μ-GDP guarantee of a pure (δ = 0) guarantee; δ > 0 implies no μ-GDP at all."""
        if self.delta > 0.0:
            raise UnsupportedCompositionError(
                f"{self!r} implies no μ-GDP guarantee: f_ε,δ(0) = 1 − δ < 1 = G_μ(0) for every μ"
            )
        return PureDP(self.epsilon).to_gdp()


class GaussianDP(Guarantee):
    """μ-Gaussian differential privacy (Dong, Roth & Su 2022).

    M is μ-GDP if distinguishing M(D) from M(D') is at least as hard as distinguishing N(0, 1) from
    N(μ, 1): T(M(D), M(D')) ≥ G_μ with G_μ(α) = Φ(Φ⁻¹(1 − α) − μ).

    Parameters
    ----------
    mu : float
        μ ≥ 0.

    Notes
    -----
    μ-GDP holds iff (ε, δ(ε))-DP holds for every ε ≥ 0, with
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Corollary 2.13). The two terms nearly cancel when μ is
    small, so the difference is never formed directly: with a = ε/μ − μ/2, b = ε/μ + μ/2 and the Mills
    ratio R(t) = (1 − Φ(t))/φ(t), δ(ε) = φ(a)·(R(a) − R(b)), evaluated for μ ≥ 2 from two well-separated
    Mills ratios and for μ < 2 from its Taylor series about x = ε/μ, whose terms are all positive:
    R(x − μ/2) − R(x + μ/2) = 2 Σ_{k odd} M_k(x)(μ/2)^k/k! with M_k(x) = ∫₀^∞ w^k e^{−xw − w²/2} dw.
    :meth:`delta` is an upper bound within 10⁻¹⁰ relative (2·10⁻³²³ absolute below the normal range), and
    :meth:`to_approx_dp` returns the least double ε whose computed bound is at most δ.
    Composition of μᵢ-GDP is √(Σμᵢ²)-GDP; groups of k are kμ-GDP.
    """

    type_name: ClassVar[str] = "gdp"
    mu: FiniteFloat = Field(ge=0.0)

    def __init__(self, mu: float, **kwargs: Any) -> None:
        super().__init__(**{"mu": mu, **kwargs})

    def group(self, k: int) -> GaussianDP:
        """kμ-GDP for groups of ``k``."""
        return GaussianDP(times_up(check_positive_int(k, "k"), self.mu))

    def tradeoff(self, alpha: ArrayLike) -> NDArray[np.float64] | float:
        """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), vectorised over α."""
        a = _check_alpha(alpha)
        value = special.ndtr(-special.ndtri(a) - self.mu)
        return value if np.ndim(value) else float(value)

    def _log_delta(self, epsilon: float) -> float:
        """An upper bound on log δ(ε) (μ > 0), within 10⁻¹⁰ of the exact value."""
        return gaussian_log_delta(self.mu, epsilon)

    def delta(self, epsilon: float) -> float:
        """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), the least δ with (ε, δ)-DP, rounded up."""
        eps = check_real(epsilon, "epsilon")
        if eps < 0:
            raise InvalidParameterError("'epsilon' must be ≥ 0", "epsilon")
        if self.mu == 0.0:
            return 0.0
        value = math.exp(self._log_delta(eps))
        if value < sys.float_info.min:  # subnormal or zero: exp rounded to an absolute grid
            value = math.nextafter(value, math.inf)
        return min(value, 1.0)

    def to_approx_dp(self, delta: float) -> ApproxDP:
        """The least double ε whose δ(ε), rounded up, is at most ``delta``: a valid, tight (ε, δ)-DP."""
        target = check_real(delta, "delta")
        if not 0.0 < target < 1.0:
            raise InvalidParameterError("'delta' must lie in (0, 1) to convert μ-GDP to (ε, δ)-DP", "delta")
        log_target = math.log(target)
        if self.mu == 0.0 or self._log_delta(0.0) <= log_target:
            return ApproxDP(0.0, target)

        def holds(epsilon: float) -> bool:
            return self._log_delta(epsilon) <= log_target

        # δ(ε) < Φ(−ε/μ + μ/2) = target at ε = μ(μ/2 − Φ⁻¹(target)); widen (boundedly) past rounding.
        upper = self.mu * (self.mu / 2.0 - float(special.ndtri(target)))
        upper = max(upper, sys.float_info.min)
        for _ in range(_MAX_DOUBLINGS):
            if not math.isfinite(upper) or holds(upper):
                break
            upper *= 2.0
        if not math.isfinite(upper):
            raise InvalidParameterError(
                f"μ-GDP with {format_guarantee(self)} implies no finite ε at this 'delta'", "delta"
            )
        return ApproxDP(least_double_where(holds, 0.0, upper), target)


def gaussian_log_delta(mu: float, epsilon: float) -> float:
    """An upper bound, within 10⁻¹⁰ of the exact value, on ln δ(ε) of μ-GDP (μ > 0, ε ≥ 0).

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) is the least δ with (ε, δ)-DP (Dong, Roth & Su 2022,
    Cor. 2.13); for Gaussian noise of σ at L2 sensitivity S, μ = S/σ and it is the exact (ε, δ) condition of
    the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8). Evaluated without cancellation, see
    :class:`GaussianDP`, Notes. The one implementation of this curve: the guarantees and the Gaussian
    mechanism's calibration both use it.
    """
    if mu < _SERIES_BELOW_MU:
        return _log_delta_series(mu, epsilon) + _LOG_DELTA_MARGIN
    return _log_delta_mills(mu, epsilon) + _LOG_DELTA_MARGIN


_SERIES_BELOW_MU = 2.0
# The relative rounding error of both evaluations measured against mpmath stays below 5e-12 (series:
# 3e-13); the bound adds 20 times that.
_LOG_DELTA_MARGIN = 1e-10
_MAX_DOUBLINGS = 2100  # 2^2100 · 2^-1022 exceeds the largest double
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_LOG_SQRT_HALF_PI = 0.5 * math.log(math.pi / 2.0)


def _log_mills(t: float) -> float:
    """log R(t) for t ≥ 0, with R(t) = (1 − Φ(t))/φ(t) = √(π/2)·erfcx(t/√2)."""
    return _LOG_SQRT_HALF_PI + math.log(float(special.erfcx(t / math.sqrt(2.0))))


def _log_phi(t: float) -> float:
    """log φ(t); −inf once t² overflows."""
    return -(t * t) / 2.0 - _LOG_SQRT_2PI


def _log_delta_mills(mu: float, epsilon: float) -> float:
    """log δ(ε) = log[Φ(−a) − φ(a)·R(b)] for μ ≥ 2, where R(b)/R(a) ≤ R(2)/R(0) keeps the terms apart.

    a = ε/μ − μ/2 carries an error of about u·ε/μ, and log δ changes by at most 65 times the error in a
    while a < 64; above ε/μ = 128 it is rounded once from exact rationals instead (both parts may be huge).
    Beyond a = 64, where δ < Φ(−64) < e^{−2000} is far below every double, the first term alone bounds δ.
    """
    b = epsilon / mu + mu / 2.0
    a = epsilon / mu - mu / 2.0
    if epsilon / mu > 128.0:
        a = float(Fraction(epsilon) / Fraction(mu) - Fraction(mu) / 2)
    if a >= _FAR_TAIL:
        return _log_phi(a) + _log_mills(a)
    if a >= 0.0:
        return _log_phi(a) + _log_mills(a) + math.log(-math.expm1(_log_mills(b) - _log_mills(a)))
    log_first = float(special.log_ndtr(-a))
    log_second = _log_phi(a) + _log_mills(b)  # e^ε Φ(−b) = φ(a)·R(b), since b² − a² = 2ε
    return log_first + math.log(-math.expm1(log_second - log_first))


_FAR_TAIL = 64.0


def _log_delta_series(mu: float, epsilon: float) -> float:
    """log δ(ε) = log[2φ(x − h)·Σ_{k odd} M_k(x)·h^k/k!], x = ε/μ, h = μ/2 < 1; every term is positive.

    With r_n = M_n/M_{n−1}, successive terms have the ratio h²·r_{k+1}r_{k+2}/((k+1)(k+2)) ≤ h²/(k+2)
    (r_n r_{n+1} = n − x·r_n ≤ n). That bound fixes the last term in advance (the tail beyond it is below
    1e-18 of the first term, k ≤ 33) and bounds the tail left off, which is added.
    """
    x = epsilon / mu
    h2 = (mu / 2.0) ** 2
    a = x - mu / 2.0
    if math.isinf(a * a):
        return -math.inf
    last, bound = 1, 1.0
    while bound * h2 / (last + 2 - h2) > 1e-18:  # tail after term `last` ≤ bound·q/(1 − q), q = h²/(last+2)
        bound *= h2 / (last + 2)
        last += 2
    log_m0, ratios = _moment_ratios(x, last)
    total, term = 1.0, 1.0
    for k in range(1, last, 2):
        term *= h2 * ratios[k + 1] * ratios[k + 2] / ((k + 1) * (k + 2))
        total += term
    total += term * h2 / (last + 2 - h2)
    log_first = math.log(mu) + log_m0 + math.log(ratios[1])  # log(2·h·M_1)
    return _log_phi(a) + log_first + math.log(total)


def _moment_ratios(x: float, count: int) -> tuple[float, list[float]]:
    """log M_0(x) = log R(x) and the ratios r_n = M_n(x)/M_{n−1}(x), n = 1..count, for x ≥ 0.

    M_{n+1} = n·M_{n−1} − x·M_n (integration by parts). Below x = 2 the forward recurrence loses little;
    above, the ratios come from the backward recurrence r_n = n/(x + r_{n+1}) (Miller's algorithm, of
    which M_n is the minimal solution), started at n = 2·count + (24/x)² + 16, where its start value no
    longer matters (checked against a start at n = 8000: within 5e-16).
    """
    log_m0 = _log_mills(x)
    ratios = [0.0] * (count + 1)
    if x < 2.0:
        previous = math.exp(log_m0)
        current = 1.0 - x * previous
        ratios[1] = current / previous
        for n in range(1, count):
            previous, current = current, n * previous - x * current
            ratios[n + 1] = current / previous
        return log_m0, ratios
    ratio = 0.0
    for n in range(2 * count + math.ceil((24.0 / x) ** 2) + 16, 0, -1):
        ratio = n / (x + ratio)
        if n <= count:
            ratios[n] = ratio
    return log_m0, ratios


def least_double_where(holds: Callable[[float], bool], low: float, high: float) -> float:
    """The least double in (low, high] where a monotone predicate holds, given that it holds at ``high``.

    Bisects the bit patterns of the non-negative doubles, so it ends after at most 64 evaluations and
    the result always satisfies the predicate (it is ``high`` or a point where the predicate held).
    """
    lo, hi = _bits(low), _bits(high)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if holds(_from_bits(mid)):
            hi = mid
        else:
            lo = mid
    return _from_bits(hi)


def _bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def _from_bits(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def format_guarantee(
    guarantee: Guarantee, *, digits: int = 6, compact: bool = False, delta_digits: int | None = None
) -> str:
    """A guarantee's parameters as text: ``ε = 0.5`` (pure), ``ε = 1, δ = 1e-06`` or ``μ = 0.8``.

    The one formatter of guarantees: ``str(guarantee)``, reports, error messages, the command line and the
    Airflow pages all print through it.

    Parameters
    ----------
    guarantee : PureDP, ApproxDP or GaussianDP
    digits : int
        Significant digits of each number (Python's ``g`` format).
    compact : bool
        ``ε=1, δ=1e-06`` without spaces, and without δ when it is 0 (tables, log lines).
    delta_digits : int or None
        Significant digits of δ (default: ``digits``).
    """
    check_guarantee(guarantee)
    equals = "=" if compact else " = "
    if isinstance(guarantee, GaussianDP):
        return f"μ{equals}{guarantee.mu:.{digits}g}"
    assert isinstance(guarantee, (PureDP, ApproxDP))
    text = f"ε{equals}{guarantee.epsilon:.{digits}g}"
    if isinstance(guarantee, ApproxDP) and (guarantee.delta > 0.0 or not compact):
        text += f", δ{equals}{guarantee.delta:.{delta_digits or digits}g}"
    return text


def check_guarantee(value: Any, name: str = "guarantee") -> Guarantee:
    """Return ``value`` if it is a guarantee, or raise InvalidParameterError naming ``name``."""
    if not isinstance(value, Guarantee):
        raise InvalidParameterError(
            f"{name!r} must be a PureDP, ApproxDP or GaussianDP guarantee, got {type(value).__name__}", name
        )
    return value


def compose_basic(guarantees: Sequence[Guarantee]) -> ApproxDP:
    """Basic composition: (Σεᵢ, Σδᵢ), each sum exact and rounded up.

    The parameters are summed exactly at their binary values (the double 0.1 is 0.1000000000000000055…,
    which is what noise calibrated with it can lose) and the result is the least double not below the
    sum. So 40 guarantees of ε = 0.125 compose to exactly 5.0, while 50 of ε = 0.1 compose to
    5.000000000000001: never below the loss, with no float drift.

    Valid under adaptive composition, where each release is chosen after the earlier results are known
    (Dwork & Roth 2014, Thm 3.16). Pure guarantees count as (ε, 0). An empty sequence costs (0, 0).

    Raises
    ------
    UnsupportedCompositionError
        For a GaussianDP guarantee (it has no single (ε, δ); convert it with
        :func:`~dp_pipeline.accounting.as_approx_dp` first),
        or when Σδ ≥ 1 or Σε overflows (the composition guarantees nothing).
    """
    items = check_sequence(guarantees, "guarantees")
    epsilons: list[float] = []
    deltas: list[float] = []
    for index, item in enumerate(items):
        check_guarantee(item, f"guarantees[{index}]")
        if isinstance(item, GaussianDP):
            raise UnsupportedCompositionError(
                f"basic composition takes (ε, δ) guarantees; {item!r} has no single (ε, δ). Convert it "
                "with as_approx_dp(g, delta) or compose in μ-GDP."
            )
        approx = item.to_approx_dp() if isinstance(item, PureDP) else item
        assert isinstance(approx, ApproxDP)
        epsilons.append(approx.epsilon)
        deltas.append(approx.delta)
    epsilon, delta = sum_up(epsilons), sum_up(deltas)
    if not math.isfinite(epsilon) or delta >= 1.0:
        raise UnsupportedCompositionError(
            f"basic composition of {len(items)} guarantees gives ε = {epsilon}, δ = {delta}, which "
            "guarantees nothing"
        )
    return ApproxDP(epsilon, delta)


def compose_gdp(mus: Sequence[GaussianDP]) -> GaussianDP:
    """μ-GDP composition: √(Σμᵢ²), rounded up from its exact value (μᵢ at their exact binary values, as
    in :func:`compose_basic`).

    Exact for a fixed sequence of μᵢ-GDP releases (Dong, Roth & Su 2022, Cor. 3.3), and valid adaptively
    as a privacy filter that stops once Σμᵢ² would exceed the budget's μ² (Smith & Thakurta 2022). An
    empty sequence costs μ = 0.
    """
    items = check_sequence(mus, "mus")
    for index, item in enumerate(items):
        if not isinstance(item, GaussianDP):
            raise InvalidParameterError(
                f"'mus[{index}]' must be a GaussianDP guarantee, got {type(item).__name__} (convert with "
                "as_gdp)",
                "mus",
            )
    return GaussianDP(root_sum_squares_up([g.mu for g in items]))


_GUARANTEE_TYPES: dict[str, type[Guarantee]] = {cls.type_name: cls for cls in (PureDP, ApproxDP, GaussianDP)}


def guarantee_from_dict(data: dict[str, Any]) -> Guarantee:
    """Rebuild a guarantee from :meth:`Guarantee.to_dict` output, through a fixed type table."""
    if not isinstance(data, dict) or data.get("type") not in _GUARANTEE_TYPES:
        raise InvalidParameterError(f"not a stored guarantee: {data!r}", "guarantee")
    fields = {key: value for key, value in data.items() if key != "type"}
    cls = _GUARANTEE_TYPES[data["type"]]
    return cls(**fields)
