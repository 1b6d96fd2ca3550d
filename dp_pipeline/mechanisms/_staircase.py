"""The staircase mechanism (Geng & Viswanath 2016) and its exact noise density and distribution function.

:func:`staircase_pdf` and :func:`staircase_cdf` are shared with the bounded staircase mechanism.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field
from scipy import special

from dp_pipeline._validation import FiniteFloat, check_real
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import ContinuousMechanism

__all__ = ["Staircase", "optimal_gamma", "staircase_cdf", "staircase_pdf"]


def _check_staircase(epsilon: float, sensitivity: float, gamma: float) -> tuple[float, float, float]:
    eps = check_real(epsilon, "epsilon")
    delta_f = check_real(sensitivity, "sensitivity")
    g = check_real(gamma, "gamma")
    if eps <= 0.0:
        raise InvalidParameterError(f"'epsilon' must be > 0, got {eps}", "epsilon")
    if delta_f <= 0.0:
        raise InvalidParameterError(f"'sensitivity' must be > 0, got {delta_f}", "sensitivity")
    if not 0.0 <= g <= 1.0:
        raise InvalidParameterError(f"'gamma' must lie in [0, 1], got {g}", "gamma")
    return eps, delta_f, g


def _height(epsilon: float, gamma: float) -> float:
    """a·Δ = (1 − e^{−ε}) / (2(γ + e^{−ε}(1 − γ))), the density at 0 times Δ."""
    denominator = gamma + math.exp(-epsilon) * (1.0 - gamma)
    if denominator == 0.0:  # γ = 0 and e^{−ε} underflows: the first step has no finite height
        raise InvalidParameterError(
            f"'epsilon' = {epsilon} is too large for gamma = 0: e^(-ε) underflows and the staircase density "
            "has no finite height; use gamma > 0 or a smaller epsilon",
            "epsilon",
        )
    return -math.expm1(-epsilon) / (2.0 * denominator)


def _steps(x: NDArray[np.float64], sensitivity: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """|x| = (k + r)Δ with an integer k ≥ 0 and r in [0, 1); infinities give k = inf."""
    u = np.abs(x) / sensitivity
    with np.errstate(invalid="ignore"):
        k = np.floor(u)
        r = np.where(np.isfinite(u), u - k, 0.0)
    return k, np.clip(r, 0.0, 1.0)


def staircase_pdf(x: ArrayLike, epsilon: float, sensitivity: float, gamma: float) -> NDArray[np.float64]:
    """Density of staircase noise at ``x`` (vectorised, exact).

    f(x) = a·e^{−kε} on |x| ∈ [kΔ, kΔ + γΔ) and a·e^{−(k+1)ε} on |x| ∈ [kΔ + γΔ, (k+1)Δ), k = 0, 1, …,
    with a = (1 − e^{−ε}) / (2Δ(γ + e^{−ε}(1 − γ))); symmetric about 0.

    Parameters
    ----------
    x : array_like
        Points at which to evaluate the density (any shape; ±inf gives 0).
    epsilon : float
        ε > 0.
    sensitivity : float
        Δ > 0, the width of one step.
    gamma : float
        γ in [0, 1], the fraction of each step spent at the higher level.

    Returns
    -------
    ndarray
        f(x), of the shape of ``x``.

    References
    ----------
    Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf.
    Theory 62(2), 2016.
    """
    eps, delta_f, g = _check_staircase(epsilon, sensitivity, gamma)
    k, r = _steps(np.asarray(x, dtype=np.float64), delta_f)
    level = k + (r >= g)  # number of factors e^{−ε}
    with np.errstate(invalid="ignore"):
        value = (_height(eps, g) / delta_f) * np.exp(-eps * level)
    return np.where(np.isfinite(level), value, 0.0)


def _survival_abs(x: NDArray[np.float64], eps: float, delta_f: float, g: float) -> NDArray[np.float64]:
    """P(X > |x|), computed without cancellation: e^{−kε}(1/2 − aΔ·m(r)) with m the mass in the step."""
    k, r = _steps(x, delta_f)
    b = math.exp(-eps)
    within = np.where(r < g, r, g + b * (r - g))  # ∫ of f/(a e^{−kε}) over [kΔ, kΔ + rΔ), in units of Δ
    tail = 0.5 - _height(eps, g) * within  # ≥ e^{−ε}/2 > 0
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(np.isfinite(k), np.exp(-eps * k) * tail, 0.0)


def staircase_cdf(x: ArrayLike, epsilon: float, sensitivity: float, gamma: float) -> NDArray[np.float64]:
    """Distribution function P(X ≤ x) of staircase noise (vectorised, exact).

    For x ≥ 0 with x = (k + r)Δ, r ∈ [0, 1): P(X > x) = e^{−kε}(1/2 − aΔ·m(r)) where m(r) = r for r < γ
    and γ + e^{−ε}(r − γ) otherwise; P(X ≤ −x) = P(X > x) by symmetry. Both tails are computed
    directly, so small tail probabilities keep full relative precision.

    Parameters are as for :func:`staircase_pdf`.
    """
    eps, delta_f, g = _check_staircase(epsilon, sensitivity, gamma)
    array = np.asarray(x, dtype=np.float64)
    tail = _survival_abs(array, eps, delta_f, g)
    return np.where(array < 0, tail, 1.0 - tail)


def optimal_gamma(epsilon: float) -> float:
    """γ* = 1/(1 + e^{ε/2}), the γ that minimises the expected absolute noise E|X| (Geng & Viswanath 2016).

    This is the optimum for the ℓ1 cost |x|. The variance-minimising γ (cost x²) is different; it is the
    root of a cubic and can be found by minimising :attr:`Staircase.variance` over ``gamma``.
    """
    eps = check_real(epsilon, "epsilon")
    if eps <= 0.0:
        raise InvalidParameterError(f"'epsilon' must be > 0, got {eps}", "epsilon")
    return float(special.expit(-eps / 2.0))


class Staircase(ContinuousMechanism):
    """Add staircase noise (Geng & Viswanath 2016): the optimal ε-DP noise for the ℓ1 cost.

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    sensitivity : float
        Global L1 sensitivity Δ > 0 of the query. Required: there is no default.
    gamma : float or None
        γ in [0, 1], the fraction of each step of width Δ spent at the higher level. ``None`` (default)
        takes γ* = 1/(1 + e^{ε/2}) from :func:`optimal_gamma`, which minimises E|X|.

    Notes
    -----
    Noise density (:func:`staircase_pdf`): f(x) = a on |x| ∈ [0, γΔ), e^{−ε}a on [γΔ, Δ),
    f(x) = e^{−kε} f(x − kΔ) on [kΔ, (k+1)Δ), symmetric, with a = (1 − e^{−ε}) / (2Δ(γ + e^{−ε}(1 − γ))).
    Since f is non-increasing in |x| and f(x + Δ) = e^{−ε} f(x) for x ≥ 0, the ratio of output densities
    for inputs at distance ≤ Δ is at most e^ε for every γ in [0, 1]: the release is ε-DP.

    Exact sampler (the paper's construction): with b = e^{−ε}, a sign S = ±1, G ≥ 0 geometric with
    P(G = i) = (1 − b)bⁱ, U uniform on [0, 1) and B Bernoulli with P(B = 1) = (1 − γ)b/(γ + (1 − γ)b),
    X = S·Δ·(G + V) where V = γU if B = 0 and V = γ + (1 − γ)U if B = 1.

    Variance (from that representation, G and V independent):
    Var X = Δ²(E[G²] + 2E[G]E[V] + E[V²]) with E[G] = b/(1 − b), E[G²] = b(1 + b)/(1 − b)²,
    E[V] = p₀γ/2 + p₁(1 + γ)/2, E[V²] = p₀γ²/3 + p₁(1 + γ + γ²)/3, p₁ = P(B = 1), p₀ = 1 − p₁.
    Likewise E|X| = Δ(E[G] + E[V]).

    **Secure path (default).** With λ = 2^k, 2^{k+12} ≤ Δ < 2^{k+13}, the release is the centre
    (m + ½)λ of the lattice cell that holds the ideal output Y = t + X, with m = ⌊Y/λ⌋ drawn from its exact
    law with a CSPRNG: G is an exact geometric, the Bernoulli is decided against exact bounds of its
    probability, and U is a lazy uniform with as many bits as the cell needs
    (:mod:`~dp_pipeline.mechanisms.sampling`). A deterministic function of Y, so ε-DP exactly as above,
    for any input; floating-point safe (outputs on λ(ℤ + ½)). Integer input: λ = 1, t + ⌊X + ½⌋. Neither
    OpenDP nor Tumult Analytics ships a staircase mechanism; this follows their practice for Laplace
    (exact sampling, CSPRNG, a fixed output lattice).

    **Fast path** (``rng=fast_rng(...)``): the construction above in float64 with PCG64, **not
    floating-point safe**.

    References
    ----------
    Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf.
    Theory 62(2):925–951, 2016.

    Examples
    --------
    >>> round(Staircase(epsilon=1.0, sensitivity=1.0).effective_gamma, 4)
    0.3775
    """

    event_kind = "staircase"
    integer_queries = True
    epsilon: FiniteFloat = Field(gt=0.0)
    sensitivity: FiniteFloat = Field(gt=0.0)
    gamma: FiniteFloat | None = Field(default=None, ge=0.0, le=1.0)

    @property
    def effective_gamma(self) -> float:
        """The γ in use: ``gamma``, or the ℓ1-optimal γ* = 1/(1 + e^{ε/2}) when it is None."""
        return optimal_gamma(self.epsilon) if self.gamma is None else self.gamma

    def _moments(self) -> tuple[float, float, float, float]:
        """E[G], E[G²], E[V], E[V²] of the representation X = S·Δ·(G + V)."""
        g, b = self.effective_gamma, math.exp(-self.epsilon)
        one_minus_b = -math.expm1(-self.epsilon)
        p1 = (1.0 - g) * b / (g + (1.0 - g) * b)
        p0 = 1.0 - p1
        mean_g = b / one_minus_b
        second_g = b * (1.0 + b) / one_minus_b**2
        mean_v = p0 * g / 2.0 + p1 * (1.0 + g) / 2.0
        second_v = p0 * g * g / 3.0 + p1 * (1.0 + g + g * g) / 3.0
        return mean_g, second_g, mean_v, second_v

    @property
    def variance(self) -> float:
        """Variance of the noise, Δ²(E[G²] + 2E[G]E[V] + E[V²]) (see Notes)."""
        mean_g, second_g, mean_v, second_v = self._moments()
        return self.sensitivity**2 * (second_g + 2.0 * mean_g * mean_v + second_v)

    @property
    def mean_absolute_error(self) -> float:
        """E|X| = Δ(E[G] + E[V]), the ℓ1 cost that γ* minimises."""
        mean_g, _, mean_v, _ = self._moments()
        return self.sensitivity * (mean_g + mean_v)

    @property
    def guarantee(self) -> PureDP:
        """ε-DP (for every γ in [0, 1])."""
        return PureDP(self.epsilon)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"gamma": self.effective_gamma}

    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """f(y − t) with f the staircase density."""
        x = np.asarray(y, float) - np.asarray(t, float)
        return staircase_pdf(x, self.epsilon, self.sensitivity, self.effective_gamma)

    def _randomize_secure(
        self, values: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        k = sampling.lattice_exponent(self.sensitivity)
        return sampling.staircase_cells(
            rng, values, self.epsilon, self.sensitivity, self.effective_gamma, k
        )

    def _integer_noise(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        return sampling.staircase_integers(
            rng, self.epsilon, self.sensitivity, self.effective_gamma, n
        )

    def _randomize_fast(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        shape = values.shape
        g, b = self.effective_gamma, math.exp(-self.epsilon)
        negative = sampling.bernoulli(rng, 0.5, shape)
        steps = sampling.geometric(rng, -self.epsilon, shape)
        upper = sampling.bernoulli(rng, (1.0 - g) * b / (g + (1.0 - g) * b), shape)
        u = sampling.uniform(rng, shape)
        offset = np.where(upper, g + (1.0 - g) * u, g * u)
        magnitude = self.sensitivity * (steps + offset)
        return values + np.where(negative, -magnitude, magnitude)
