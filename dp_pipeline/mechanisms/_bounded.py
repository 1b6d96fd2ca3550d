"""Bounded mechanisms for local DP: input and output both lie in a declared range [lower, upper].

Both mechanisms add noise to the true value t and keep only outputs inside [l, u], renormalising the noise
density by its mass on [l − t, u − t]. That mass depends on t, so the noise parameter that would give ε-DP
without the bounds is not enough: each mechanism calibrates its noise so that the worst-case density ratio
sup_{t, t', y} p(y | t) / p(y | t') over the whole range stays at most e^ε.

References
----------
Holohan, Antonatos, Braghin & Mac Aonghusa, "The bounded Laplace mechanism in differential privacy",
Journal of Privacy and Confidentiality 10(1), 2020 (arXiv:1808.10410).
Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf. Theory
62(2), 2016.
Kim, Park & Lee, "A study on bounded staircase mechanism for local differential privacy" (KAIST).
"""

from __future__ import annotations

import functools
import math
from abc import abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field, ValidationInfo, field_validator
from scipy import optimize

from dp_pipeline._exact import subtract_up
from dp_pipeline._validation import FiniteFloat, check_array
from dp_pipeline.exceptions import InvalidParameterError, data_value_error
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import ContinuousMechanism
from dp_pipeline.mechanisms._staircase import staircase_pdf

__all__ = ["BoundedLaplace", "BoundedStaircase"]

_SAFETY = 1e-12
"""Relative margin by which a calibration aims below ε, far above the rounding error of the loss formulas."""


# --------------------------------------------------------------------------------------------------------
# Bounded Laplace: calibration of the scale
# --------------------------------------------------------------------------------------------------------


def _bounded_laplace_loss(scale: float, sensitivity: float, width: float) -> float:
    """ln sup p(y|t)/p(y|t') over |t − t'| ≤ Δ: Δ/b + ln(C_b(l + Δ) / C_b(l)), to a few ulps (relative).

    With x = e^{−Δ/b}, y = e^{−(w−Δ)/b}: C_b(l) = (1 − xy)/2 and C_b(l + Δ) − C_b(l) = (1 − x)(1 − y)/2, so
    the logarithm is log1p((1 − x)(1 − y)/(1 − xy)), each factor an expm1: no cancellation, even when the
    ratio is within rounding of 1 (small ε), where ln of the quotient of the two masses would be off by
    ulps of 1 rather than of the loss.
    """
    excess = math.expm1(-sensitivity / scale) * math.expm1(-(width - sensitivity) / scale)
    return sensitivity / scale + math.log1p(excess / -math.expm1(-width / scale))


@functools.lru_cache(maxsize=1024)
def _bounded_laplace_scale(epsilon: float, sensitivity: float, width: float) -> float:
    """The least b (rounded up) with Δ/b + ln(C_b(l + Δ)/C_b(l)) ≤ ε."""
    aim = epsilon * (1.0 - _SAFETY)

    def excess(log_b: float) -> float:
        return _bounded_laplace_loss(math.exp(log_b), sensitivity, width) - aim

    low = math.log(sensitivity / epsilon)  # the loss there is ≥ ε: ln(C(l+Δ)/C(l)) ≥ 0
    high = low + 1.0
    while excess(high) > 0.0:
        low, high = high, high + 1.0
    if excess(low) <= 0.0:
        scale = math.exp(low)
    else:
        scale = math.exp(optimize.brentq(excess, low, high, xtol=1e-15, rtol=4 * np.finfo(float).eps))
    while _bounded_laplace_loss(scale, sensitivity, width) > aim:
        scale = math.nextafter(scale, math.inf) * (1.0 + 1e-15)
    return scale


# --------------------------------------------------------------------------------------------------------
# Bounded staircase: calibration of ε̂
# --------------------------------------------------------------------------------------------------------


def _bounded_staircase_loss(epsilon_hat: float, gamma: float) -> float:
    """ln sup p(y|t)/p(y|t') of the bounded staircase run with ε̂: ε̂ + ln((c + m)/(c + γ)).

    c = 1/(e^{ε̂} − 1) and m = min(2γ, 1); see :class:`BoundedStaircase` for the derivation.
    """
    if epsilon_hat == 0.0 or gamma == 0.0:
        return epsilon_hat  # γ = 0: n(t) = 0 for every t
    m = min(2.0 * gamma, 1.0)
    if epsilon_hat <= 1.0:
        w = math.expm1(epsilon_hat)  # 1/c
        return epsilon_hat + math.log1p(m * w) - math.log1p(gamma * w)
    c = math.exp(-epsilon_hat) / -math.expm1(-epsilon_hat)
    return epsilon_hat + math.log((c + m) / (c + gamma))


@functools.lru_cache(maxsize=1024)
def _bounded_staircase_epsilon_hat(epsilon: float, gamma: float) -> float:
    """The largest ε̂ (rounded down) whose bounded staircase has worst-case log density ratio ≤ ε."""
    aim = epsilon * (1.0 - _SAFETY)

    def excess(epsilon_hat: float) -> float:
        return _bounded_staircase_loss(epsilon_hat, gamma) - aim

    # the loss is increasing in ε̂, 0 at ε̂ = 0 and at least ε̂, so the root lies in (0, ε]
    if excess(epsilon) <= 0.0:
        value = epsilon
    else:
        value = optimize.brentq(excess, 0.0, epsilon, xtol=1e-300, rtol=4 * np.finfo(float).eps)
    while _bounded_staircase_loss(value, gamma) > aim:
        value = math.nextafter(value, 0.0) * (1.0 - 1e-15)
    return value


# --------------------------------------------------------------------------------------------------------
# Shared validation
# --------------------------------------------------------------------------------------------------------


class _BoundedMechanism(ContinuousMechanism):
    """Common fields and input checks of the bounded mechanisms."""

    epsilon: FiniteFloat = Field(gt=0.0)
    lower: FiniteFloat
    upper: FiniteFloat

    @field_validator("upper")
    @classmethod
    def _upper_above_lower(cls, value: float, info: ValidationInfo) -> float:
        lower = info.data.get("lower")
        if lower is not None and not value > lower:
            raise ValueError(f"must be greater than 'lower' = {lower}, got {value}")
        if lower is not None and not math.isfinite(value - lower):
            raise ValueError(f"upper − lower must be finite, got {value} − {lower}")
        return value

    @property
    def width(self) -> float:
        """u − l, the length of the declared range, rounded up (no two inputs differ by more)."""
        return subtract_up(self.upper, self.lower)

    def _check_in_range(self, values: Any, name: str) -> NDArray[np.float64]:
        array = check_array(values, name)
        outside = int(np.count_nonzero((array < self.lower) | (array > self.upper)))
        if outside:
            raise data_value_error(
                repr(name),
                outside,
                f"outside the declared range [lower, upper] = [{self.lower}, {self.upper}]",
                name,
                "clip or drop them before randomising: the range is part of the privacy guarantee and is "
                "never widened from the data",
            )
        return array

    def _randomize_fast(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        return self._sample(self._check_in_range(values, "values"), rng)

    def _randomize_secure(
        self, values: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        t = self._check_in_range(values, "values")
        return np.clip(self._sample_secure(t, rng), self.lower, self.upper)

    def _lattice_exponent(self, scale: float) -> int:
        """k of the output lattice 2^k·ℤ: about scale·2⁻¹², and coarse enough that |l|, |u| < 2⁵¹·2^k."""
        _, exponent = math.frexp(max(abs(self.lower), abs(self.upper)))
        return max(sampling.lattice_exponent(scale), exponent - 51)

    @abstractmethod
    def _sample(self, t: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        """Fast path: draw one output for each input in ``t`` (already checked to lie in [l, u])."""

    @abstractmethod
    def _sample_secure(self, t: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        """Secure path: the lattice release of each input in ``t`` (before clipping to [l, u])."""

    @abstractmethod
    def _moments(self, t: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """E[Y − t | t] and E[(Y − t)² | t], exact."""

    def expected_output(self, t: ArrayLike) -> NDArray[np.float64]:
        """E[Y | t] = t + E[Y − t | t], exact (the formula is in the mechanism's ``_moments``)."""
        first, _ = self._moments(t)
        return self._out(np.asarray(t, dtype=float) + first, t)

    def mse(self, t: ArrayLike) -> NDArray[np.float64]:
        """E[(Y − t)² | t], exact (the formula is in the mechanism's ``_moments``)."""
        _, second = self._moments(t)
        return self._out(second, t)

    def variance_at(self, t: ArrayLike) -> NDArray[np.float64]:
        """Var[Y | t] = E[(Y − t)² | t] − (E[Y | t] − t)², the output's variance for the input ``t``.

        A method of the input, unlike the ``variance`` property of the additive mechanisms, whose noise does
        not depend on it: a bounded mechanism has no ``variance`` of its own.
        """
        first, second = self._moments(t)
        return self._out(np.maximum(second - first**2, 0.0), t)

    def _grid(self, y: ArrayLike, t: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        y_arr = check_array(y, "y")
        t_arr = self._check_in_range(t, "t")
        try:
            return np.broadcast_arrays(y_arr, t_arr)  # type: ignore[return-value]
        except ValueError as exc:
            raise InvalidParameterError(f"'y' and 't' do not broadcast: {exc}", "y") from None

    @staticmethod
    def _out(value: NDArray[np.float64], *inputs: Any) -> Any:
        return float(value) if all(np.ndim(v) == 0 for v in inputs) else value


# --------------------------------------------------------------------------------------------------------
# Bounded Laplace
# --------------------------------------------------------------------------------------------------------


class BoundedLaplace(_BoundedMechanism):
    """Laplace noise truncated to the declared range and renormalised (Holohan et al.).

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    lower, upper : float
        The declared range [l, u] of both the inputs and the outputs; l < u.
    sensitivity : float, optional
        Δ in (0, u − l]: the largest change of one input that must be hidden. Defaults to u − l (rounded
        up), the local model, where any input may be replaced by any other.

    Notes
    -----
    Output density for input t in [l, u]:

        p(y | t) = e^{−|y − t|/b} / (2b C_b(t))  for y in [l, u],  0 elsewhere,
        C_b(t) = 1 − (e^{−(t − l)/b} + e^{−(u − t)/b}) / 2.

    Calibration. For inputs with |t − t'| ≤ Δ the density ratio is
    e^{(|y − t'| − |y − t|)/b} · C_b(t')/C_b(t) ≤ e^{|t − t'|/b} C_b(t')/C_b(t), with equality at the boundary
    y = l (or y = u) on the side of the smaller input. C_b is a convolution of two log-concave functions,
    hence log-concave, and (ln C_b)' ≥ −1/b, so over all pairs the bound is largest at t = l, t' = l + Δ
    (and mirrored): the mechanism is ε-DP exactly when

        Δ/b + ln(C_b(l + Δ) / C_b(l)) ≤ ε,

    which is Holohan et al.'s condition. The left side decreases in b; ``scale`` is the least b satisfying it,
    found by root finding and rounded up. For Δ = u − l, C_b(u) = C_b(l) and b = Δ/ε; a smaller Δ needs more
    than Δ/ε.

    Guarantee: ε-DP with respect to changes of at most Δ in one input (ε-LDP for Δ = u − l).

    Inputs outside [l, u] are rejected with :class:`~dp_pipeline.exceptions.InvalidParameterError` naming
    ``values``: clipping silently would move the privacy unit, so it is left to the caller.

    Closed forms with A = t − l, B = u − t (used by :meth:`expected_output`, :meth:`mse`):
    E[Y − t | t] = ((A + b)e^{−A/b} − (B + b)e^{−B/b}) / (2C_b(t)) and
    E[(Y − t)² | t] = (G(A) + G(B)) / (2C_b(t)), G(s) = 2b² − (s² + 2bs + 2b²)e^{−s/b}.

    **Secure path (default).** The bounded Laplace law is the Laplace law conditioned on [l, u], so the
    secure path draws the ideal Laplace output Y = t + L exactly (lazily, with a CSPRNG), decides l ≤ Y ≤ u
    exactly and redraws until it holds (acceptance C_b(t) ≥ (1 − e^{−(u−l)/b})/2), then releases the centre
    of the cell of the lattice λℤ (λ = 2^k ≈ b·2⁻¹²) that holds Y, clipped to [l, u]: a deterministic
    function of the ideal output, so ε-DP exactly as calibrated, and floating-point safe (outputs on
    λ(ℤ + ½) ∪ {l, u} whatever t). See :class:`~dp_pipeline.mechanisms.Laplace`; neither OpenDP nor
    Tumult Analytics ships a bounded Laplace. Integer input is released like float input.

    **Fast path** (``rng=fast_rng(...)``): inverse-CDF sampling in float64 with PCG64 (a side of t with
    probability proportional to its mass, then −b·log1p(U·expm1(−s/b))), **not floating-point safe**.

    References
    ----------
    Holohan, Antonatos, Braghin & Mac Aonghusa, "The bounded Laplace mechanism in differential privacy",
    Journal of Privacy and Confidentiality 10(1), 2020 (arXiv:1808.10410).

    Examples
    --------
    >>> round(BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0).scale, 6)
    10.0
    >>> round(BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0, sensitivity=3.0).scale, 4)
    4.6236
    """

    event_kind = "bounded_laplace"
    event_relation = "replace_one"
    sensitivity: FiniteFloat = Field(default=None, gt=0.0, validate_default=True)

    @field_validator("sensitivity", mode="before")
    @classmethod
    def _default_sensitivity(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            lower, upper = info.data.get("lower"), info.data.get("upper")
            return None if lower is None or upper is None else subtract_up(upper, lower)
        return value

    @field_validator("sensitivity")
    @classmethod
    def _sensitivity_within_range(cls, value: float, info: ValidationInfo) -> float:
        lower, upper = info.data.get("lower"), info.data.get("upper")
        if lower is not None and upper is not None and value > subtract_up(upper, lower):
            raise ValueError(
                f"must not exceed upper − lower = {subtract_up(upper, lower)} (no two inputs in the range "
                f"differ by more), got {value}"
            )
        return value

    @property
    def scale(self) -> float:
        """b: the least scale with Δ/b + ln(C_b(l + Δ)/C_b(l)) ≤ ε, rounded up."""
        return _bounded_laplace_scale(self.epsilon, self.sensitivity, self.width)

    @property
    def guarantee(self) -> PureDP:
        """ε-DP for changes of at most Δ (ε-LDP for Δ = u − l)."""
        return PureDP(self.epsilon)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"scale": self.scale, "lower": self.lower, "upper": self.upper}

    def _mass(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        b = self.scale
        return -0.5 * (np.expm1(-(t - self.lower) / b) + np.expm1(-(self.upper - t) / b))

    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """e^{−|y − t|/b} / (2b C_b(t)) on [l, u], 0 elsewhere (broadcast over ``y`` and ``t``)."""
        yy, tt = self._grid(y, t)
        b = self.scale
        inside = (yy >= self.lower) & (yy <= self.upper)
        density = np.exp(-np.abs(yy - tt) / b) / (2.0 * b * self._mass(tt))
        return self._out(np.where(inside, density, 0.0), y, t)

    def cdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """P(Y ≤ y | t) = (F(y) − F(l)) / C_b(t) on [l, u], with F the Laplace(t, b) distribution function."""
        yy, tt = self._grid(y, t)
        b = self.scale
        z = np.clip(yy, self.lower, self.upper)
        # mass of [l, z]: from l up to min(z, t) on the left of t, plus from t up to z on the right
        left = 0.5 * (np.exp(-(tt - np.minimum(z, tt)) / b) - np.exp(-(tt - self.lower) / b))
        right = np.where(z > tt, -0.5 * np.expm1(-(z - tt) / b), 0.0)
        value = np.clip((left + right) / self._mass(tt), 0.0, 1.0)
        return self._out(value, y, t)

    def _moments(self, t: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """E[Y − t | t] = ((A + b)e^{−A/b} − (B + b)e^{−B/b}) / (2C_b(t)) and
        E[(Y − t)² | t] = (G(A) + G(B)) / (2C_b(t)), with G(s) = 2b² − (s² + 2bs + 2b²)e^{−s/b},
        A = t − l and B = u − t.
        """
        tt = self._check_in_range(t, "t")
        b = self.scale
        a_dist, b_dist = tt - self.lower, self.upper - tt
        mass = self._mass(tt)
        ea, eb = np.exp(-a_dist / b), np.exp(-b_dist / b)
        first = ((a_dist + b) * ea - (b_dist + b) * eb) / (2.0 * mass)
        g_a = 2 * b**2 - (a_dist**2 + 2 * b * a_dist + 2 * b**2) * ea
        g_b = 2 * b**2 - (b_dist**2 + 2 * b * b_dist + 2 * b**2) * eb
        return first, (g_a + g_b) / (2.0 * mass)

    def _sample_secure(self, t: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        b = self.scale
        return sampling.laplace_cells(rng, t, b, self._lattice_exponent(b), (self.lower, self.upper))

    def _sample(self, t: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        b = self.scale
        below, above = np.expm1(-(t - self.lower) / b), np.expm1(-(self.upper - t) / b)  # −2 × side mass
        side = sampling.uniform(rng, t.shape) * (below + above) > below  # True: draw below t
        u = sampling.uniform(rng, t.shape)
        distance = -b * np.log1p(u * np.where(side, below, above))
        out = np.where(side, t - distance, t + distance)
        return np.clip(out, self.lower, self.upper)


# --------------------------------------------------------------------------------------------------------
# Bounded staircase
# --------------------------------------------------------------------------------------------------------


class BoundedStaircase(_BoundedMechanism):
    """Staircase noise truncated to the declared range and renormalised, for ε-LDP.

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0 of the whole mechanism.
    lower, upper : float
        The declared range [l, u] of both the inputs and the outputs; l < u.
    gamma : float
        γ in [0, 1], the staircase shape: the fraction of each step spent at the higher level.

    Notes
    -----
    With Δ = u − l (the local model: any input may be replaced by any other) and f the staircase density of
    parameter ε̂ (:func:`~dp_pipeline.mechanisms.staircase_pdf`), the output Y = t + X has density

        p(y | t) = f(y − t) / â_t  for y in [l, u],  0 elsewhere,   â_t = ∫_{l−t}^{u−t} f(x) dx.

    Calibration of ε̂. On [−Δ, Δ] the staircase takes two values: a for |x| < γΔ and a e^{−ε̂} for
    γΔ ≤ |x| ≤ Δ. Writing n(t) = |(t − γΔ, t + γΔ) ∩ [l, u]| for the length of the high part inside the range,
    â_t = a (e^{−ε̂}Δ + (1 − e^{−ε̂}) n(t)), so for every t, t', y

        p(y | t) / p(y | t') ≤ e^{ε̂} · (c + n(t')) / (c + n(t)),   c = Δ / (e^{ε̂} − 1).

    n ranges over [γΔ, min(2γ, 1)Δ] (its least value at t = l and t = u). The bound is attained in the limit:
    for γ < 1/2 by t = l, t' = (l + u)/2, y near l; for 1/2 ≤ γ < 1 by t = l, t' ↓ l + γΔ, y near l. Hence
    the mechanism is ε-LDP exactly when, in units of Δ,

        ε̂ + ln((1 + m(e^{ε̂} − 1)) / (1 + γ(e^{ε̂} − 1))) ≤ ε,   m = min(2γ, 1).

    The left side increases with ε̂, so ``epsilon_hat`` is its root, found by root finding and rounded down
    (a smaller ε̂ means more noise). In z = e^{ε̂} the condition is the quadratic
    m z² + (1 − m − γe^ε) z − (1 − γ)e^ε ≤ 0.

    Comparison with Table 1 of Kim, Park & Lee, whose closed forms come without a proof. For 0 ≤ γ < 1/2
    the table's closed form is the same root (the example t = 18, l = 10, u = 20, γ = 0.3, ε = 1 gives
    ε̂ ≈ 0.7703 both ways). For 1/2 ≤ γ < 1 the table's value z = (γe^ε + √(γ²e^{2ε} + 4γ(1 − γ)e^ε)) / (2γ)
    is at least e^ε, i.e. ε̂ ≥ ε, and the mechanism run with it has worst-case ratio
    e^{ε̂}/(γ + (1 − γ)e^{−ε̂}) > e^ε: it is not ε-LDP (γ = 0.6, ε = 1: the table gives ε̂ ≈ 1.185 and a
    worst-case ratio ≈ 4.53 = e^{1.51}). This class uses the certified root
    z = (γe^ε + √(γ²e^{2ε} + 4(1 − γ)e^ε)) / 2 instead (γ = 0.6, ε = 1: ε̂ ≈ 0.760). At γ = 0 and γ = 1 the
    output is uniform on [l, u] up to a null set (no information, privacy loss 0); ε̂ = ε (less the 1e-12
    relative margin) is used there, as in the table.

    Guarantee: ε-LDP for inputs in [l, u]. Inputs outside the range are rejected with
    :class:`~dp_pipeline.exceptions.InvalidParameterError` naming ``values``.

    Moments are exact: on [l − t, u − t] the density is constant on at most three pieces split at ±γΔ, so
    E[Y | t], E[(Y − t)² | t] and the distribution function are sums over the pieces.

    **Secure path (default).** The law is the staircase law (parameter ε̂) conditioned on [l, u]: the ideal
    output Y = t + X is drawn exactly (see :class:`~dp_pipeline.mechanisms.Staircase`), l ≤ Y ≤ u is
    decided exactly and the draw repeated until it holds (acceptance â_t ≥ (1 − e^{−ε̂})/2), then the
    centre of the cell of λℤ (λ = 2^k ≈ Δ·2⁻¹²) that holds Y is released, clipped to [l, u]: ε-LDP exactly
    as calibrated (post-processing) and floating-point safe. Integer input is released like float input.

    **Fast path** (``rng=fast_rng(...)``): the piecewise-linear distribution function of one float64
    uniform draw (PCG64) is inverted, **not floating-point safe**.

    References
    ----------
    Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf. Theory
    62(2), 2016.
    Kim, Park & Lee, "A study on bounded staircase mechanism for local differential privacy" (KAIST).

    Examples
    --------
    >>> round(BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3).epsilon_hat, 4)
    0.7703
    """

    event_kind = "bounded_staircase"
    event_relation = "replace_one"
    gamma: FiniteFloat = Field(ge=0.0, le=1.0)

    @property
    def epsilon_hat(self) -> float:
        """ε̂: the largest staircase parameter with an ε-LDP bounded mechanism, rounded down."""
        return _bounded_staircase_epsilon_hat(self.epsilon, self.gamma)

    @property
    def guarantee(self) -> PureDP:
        """ε-LDP."""
        return PureDP(self.epsilon)

    def _event_sensitivity(self) -> float | None:
        return self.width

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {
            "gamma": self.gamma,
            "epsilon_hat": self.epsilon_hat,
            "lower": self.lower,
            "upper": self.upper,
        }

    def _pieces(self, t: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Breakpoints (4, …) of [l − t, u − t] at ±γΔ and the density level (3, …) on each piece."""
        lo, hi = self.lower - t, self.upper - t
        edge = self.gamma * self.width
        points = np.stack([lo, np.clip(-edge, lo, hi), np.clip(edge, lo, hi), hi])
        middles = 0.5 * (points[1:] + points[:-1])
        levels = staircase_pdf(middles, self.epsilon_hat, self.width, self.gamma)
        return points, levels

    def _normaliser(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        points, levels = self._pieces(t)
        return np.sum(levels * np.diff(points, axis=0), axis=0)

    def normaliser(self, t: ArrayLike) -> NDArray[np.float64]:
        """â_t = ∫_{l−t}^{u−t} f(x) dx, the staircase mass kept for input ``t``."""
        return self._out(self._normaliser(self._check_in_range(t, "t")), t)

    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """f(y − t) / â_t on [l, u], 0 elsewhere (broadcast over ``y`` and ``t``)."""
        yy, tt = self._grid(y, t)
        inside = (yy >= self.lower) & (yy <= self.upper)
        density = staircase_pdf(yy - tt, self.epsilon_hat, self.width, self.gamma) / self._normaliser(tt)
        return self._out(np.where(inside, density, 0.0), y, t)

    def cdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """P(Y ≤ y | t) = ∫_{l−t}^{y−t} f / â_t on [l, u] (exact: f is piecewise constant there)."""
        yy, tt = self._grid(y, t)
        points, levels = self._pieces(tt)
        x = np.clip(yy - tt, points[0], points[-1])
        covered = np.clip(x - points[:-1], 0.0, np.diff(points, axis=0))
        value = np.sum(levels * covered, axis=0) / np.sum(levels * np.diff(points, axis=0), axis=0)
        return self._out(np.clip(value, 0.0, 1.0), y, t)

    def _moments(self, t: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """E[Y − t | t] = Σ_pieces f_i (x_{i+1}² − x_i²)/2 / â_t and
        E[(Y − t)² | t] = Σ_pieces f_i (x_{i+1}³ − x_i³)/3 / â_t, over the pieces of the truncated density.
        """
        tt = self._check_in_range(t, "t")
        points, levels = self._pieces(tt)
        x0, x1 = points[:-1], points[1:]
        length = x1 - x0
        mass = np.sum(levels * length, axis=0)
        first = np.sum(levels * length * (x1 + x0), axis=0) / (2.0 * mass)
        second = np.sum(levels * length * (x1**2 + x1 * x0 + x0**2), axis=0) / (3.0 * mass)
        return first, second

    def _sample_secure(self, t: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        k = self._lattice_exponent(self.width)
        return sampling.staircase_cells(
            rng, t, self.epsilon_hat, self.width, self.gamma, k, (self.lower, self.upper)
        )

    def _sample(self, t: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        points, levels = self._pieces(t)
        masses = levels * np.diff(points, axis=0)
        before = np.concatenate([np.zeros((1, *t.shape)), np.cumsum(masses, axis=0)])  # (4, …)
        v = sampling.uniform(rng, t.shape) * before[-1]
        piece = np.minimum((v >= before[1]).astype(np.intp) + (v >= before[2]), 2)[None]
        start = np.take_along_axis(points, piece, axis=0)[0]
        end = np.take_along_axis(points, piece + 1, axis=0)[0]
        level = np.take_along_axis(levels, piece, axis=0)[0]
        spent = v - np.take_along_axis(before, piece, axis=0)[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            offset = np.where(level > 0, spent / level, 0.0)
        x = np.clip(start + offset, start, end)
        return np.clip(t + x, self.lower, self.upper)
