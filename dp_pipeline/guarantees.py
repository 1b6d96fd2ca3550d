"""Privacy guarantees as frozen, validated values: pure ε-DP, approximate (ε, δ)-DP and μ-GDP.

Conversions always round toward more privacy loss, so a converted guarantee is never stronger than the
one it came from.

References
----------
Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
Dwork & Roth, "The algorithmic foundations of differential privacy", 2014.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field
from scipy import optimize, special

from dp_pipeline._validation import (
    FiniteFloat,
    ValidatedModel,
    check_array,
    check_positive_int,
    check_real,
    times_up,
)
from dp_pipeline.exceptions import InvalidParameterError, UnsupportedCompositionError

__all__ = ["ApproxDP", "GaussianDP", "Guarantee", "PureDP", "guarantee_from_dict"]


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


_SYMBOLS = {"epsilon": "ε", "delta": "δ", "mu": "μ"}


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
        return ", ".join(f"{_SYMBOLS[name]} = {value:.8g}" for name, value in self.model_dump().items())

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, as stored in the ledger: ``{"type": ..., <parameters>}``."""
        return {"type": self.type_name, **self.model_dump()}


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

        Evaluated as μ = 2√2·erf⁻¹(tanh(ε/2)) for ε < 1 and as μ = −2Φ⁻¹(1/(1+e^ε)) above, so that both
        small and large ε keep full precision; the result is then raised by 1e-14 relative, well above the
        rounding error of either form.
        """
        if self.epsilon < 1.0:
            mu = 2.0 * math.sqrt(2.0) * float(special.erfinv(math.tanh(self.epsilon / 2.0)))
        else:
            mu = -2.0 * float(special.ndtri(special.expit(-self.epsilon)))
        return GaussianDP(mu * (1.0 + 1e-14))


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
    Group privacy for k individuals: (kε, k e^{(k−1)ε} δ) (Dwork & Roth 2014, Thm 2.2 generalised).
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
        """(kε, k·e^{(k−1)ε}·δ)-DP for groups of ``k``; an error if the group δ reaches 1."""
        k = check_positive_int(k, "k")
        if self.delta == 0.0:
            return ApproxDP(times_up(k, self.epsilon), 0.0)
        log_delta = math.log(k) + (k - 1) * self.epsilon + math.log(self.delta)
        if log_delta >= 0.0:
            raise InvalidParameterError(
                f"group privacy for k={k} of {self!r} gives δ ≥ 1, which guarantees nothing", "k"
            )
        return ApproxDP(times_up(k, self.epsilon), math.nextafter(math.exp(log_delta), math.inf))

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
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Corollary 2.13), evaluated here in log space.
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
        mu = self.mu
        log_a = float(special.log_ndtr(-epsilon / mu + mu / 2.0))
        log_b = epsilon + float(special.log_ndtr(-epsilon / mu - mu / 2.0))
        diff = log_b - log_a
        if diff >= 0.0:  # only by rounding, when δ(ε) is below what doubles resolve
            return -math.inf
        return log_a + math.log(-math.expm1(diff))

    def delta(self, epsilon: float) -> float:
        """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), the least δ with (ε, δ)-DP; computed in log space."""
        eps = check_real(epsilon, "epsilon")
        if eps < 0:
            raise InvalidParameterError("'epsilon' must be ≥ 0", "epsilon")
        if self.mu == 0.0:
            return 0.0
        return math.exp(self._log_delta(eps))

    def to_approx_dp(self, delta: float) -> ApproxDP:
        """The least ε with (ε, δ)-DP, rounded up so that δ(ε) ≤ ``delta`` holds in floating point."""
        target = check_real(delta, "delta")
        if not 0.0 < target < 1.0:
            raise InvalidParameterError("'delta' must lie in (0, 1) to convert μ-GDP to (ε, δ)-DP", "delta")
        if self.mu == 0.0:
            return ApproxDP(0.0, target)
        log_target = math.log(target)
        upper = self.mu * (self.mu / 2.0 - float(special.ndtri(target)))
        epsilon = self._solve_log_delta(log_target, upper)
        # The computed δ(ε) carries a relative rounding error of about u·Φ(−ε/μ + μ/2)/δ(ε) (cancellation
        # when μ is small); aim below the target by a generous multiple of it so that ε rounds up.
        log_first = float(special.log_ndtr(-epsilon / self.mu + self.mu / 2.0))
        slack = 1e-13 + 256 * 2.2e-16 * math.exp(min(log_first - log_target, 700.0))
        aim = log_target + math.log1p(-min(slack, 0.5))
        epsilon = self._solve_log_delta(aim, upper)
        while self._log_delta(epsilon) > aim:
            epsilon = math.nextafter(epsilon, math.inf) + 1e-15 * epsilon
        return ApproxDP(epsilon, target)

    def _solve_log_delta(self, log_target: float, upper: float) -> float:
        if self._log_delta(0.0) <= log_target:
            return 0.0
        return float(
            optimize.brentq(lambda e: self._log_delta(e) - log_target, 0.0, upper, xtol=1e-14, rtol=1e-15)
        )


_GUARANTEE_TYPES: dict[str, type[Guarantee]] = {
    cls.type_name: cls for cls in (PureDP, ApproxDP, GaussianDP)
}


def guarantee_from_dict(data: dict[str, Any]) -> Guarantee:
    """Rebuild a guarantee from :meth:`Guarantee.to_dict` output, through a fixed type table."""
    if not isinstance(data, dict) or data.get("type") not in _GUARANTEE_TYPES:
        raise InvalidParameterError(f"not a stored guarantee: {data!r}", "guarantee")
    fields = {key: value for key, value in data.items() if key != "type"}
    cls = _GUARANTEE_TYPES[data["type"]]
    return cls(**fields)

