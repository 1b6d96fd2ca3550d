"""The Gaussian mechanism, calibrated exactly (analytic), by the tail bound, classically, or to μ-GDP."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field, PrivateAttr, ValidationInfo, field_validator
from scipy import optimize, special

from dp_pipeline._exact import divide_up
from dp_pipeline._validation import FiniteFloat
from dp_pipeline.guarantees import ApproxDP, GaussianDP, gaussian_log_delta
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import ContinuousMechanism

__all__ = ["Calibration", "Gaussian", "analytic_sigma", "classic_sigma", "tail_bound_sigma"]

Calibration = Literal["analytic", "tail_bound", "classic", "gdp"]
"""How σ is derived: the exact (ε, δ) condition, the tail bound P(L > ε) ≤ δ, the classic bound, or μ-GDP."""

_UNIT = 2.0**-52  # double precision unit roundoff (times 2)
_CLASSIC_MARGIN = 2.0**-45  # relative margin of the classic σ over its rounding error (see classic_sigma)


def _log_tail(epsilon: float, x: float) -> float:
    """ln Φ(1/(2x) − εx) with x = σ/S: the log of the privacy loss's tail P(L > ε)."""
    return float(special.log_ndtr(0.5 / x - epsilon * x))


def _tail_bound_ratio(epsilon: float, delta: float) -> float:
    """The x = σ/S that solves Φ(1/(2x) − εx) = δ: the positive root of εx² + zx − 1/2 = 0, z = Φ⁻¹(δ)."""
    z = float(special.ndtri(delta))
    root = math.sqrt(z * z + 2.0 * epsilon)
    # two algebraically equal forms of the root; each is free of cancellation on its side of z = 0
    return (root - z) / (2.0 * epsilon) if z < 0.0 else 1.0 / (z + root)


def _term_error(epsilon: float, x: float) -> float:
    """A bound, with a wide margin, on the absolute error of ln Φ(±1/(2x) − εx) as evaluated here.

    The arguments carry an absolute error of about u·(1/(2x) + εx), which moves ln Φ by up to that times
    |d ln Φ/dA| ≲ 1 + |A|; log_ndtr is accurate to a few u relative to |ln Φ| ≈ A²/2 (measured: 1e-13
    absolute at A = −25). 64·u·(1 + (1/(2x) + εx)²) covers both.
    """
    return 64.0 * _UNIT * (1.0 + (0.5 / x + epsilon * x) ** 2)


def _round_up_until(sigma: float, sensitivity: float, holds: Callable[[float], bool]) -> float:
    """A float ≥ ``sigma`` with ``holds(σ/S)`` true, searched upward by steps that double from one ulp."""
    step = _UNIT
    while not holds(sigma / sensitivity):
        sigma = math.nextafter(sigma * (1.0 + step), math.inf)
        step *= 2.0
    return sigma


def _solve_analytic_ratio(epsilon: float, log_aim: float, x_tail: float) -> float:
    """The x = σ/S with ln δ(ε) = ``log_aim``: Brent's method on ln x, in a bracket found by doubling."""

    def excess(log_x: float) -> float:
        return gaussian_log_delta(math.exp(-log_x), epsilon) - log_aim

    hi = math.log(x_tail)
    while excess(hi) > 0.0:  # only when the tail bound is tight to within the aim's slack
        hi += math.log(2.0)
    lo = hi - math.log(2.0)
    while excess(lo) <= 0.0:  # δ(ε) → 1 as σ → 0, so this ends
        lo -= math.log(2.0)
    return math.exp(float(optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps)))


def analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The least σ for which Gaussian noise is (ε, δ)-DP (Balle & Wang 2018), rounded up.

    Solves δ(ε) = Φ(S/(2σ) − εσ/S) − e^ε Φ(−S/(2σ) − εσ/S) = δ for σ with Brent's method on ln σ,
    bracketed by the tail-bound σ (which always satisfies the condition). ln δ(ε) is
    :func:`~dp_pipeline.guarantees.gaussian_log_delta` at μ = S/σ, an upper bound on the curve. After a
    first solve the root is aimed below ln δ by a margin for the rounding of σ/S and of the terms
    (:func:`_term_error`, amplified by up to 2Φ(A)/δ, A = S/(2σ) − εσ/S, as for a difference of the two
    terms), and σ is then raised until the condition holds for the returned σ in floating point. The exact
    δ(ε) of the returned σ is therefore at most δ.
    """
    log_target = math.log(delta)
    x_tail = _tail_bound_ratio(epsilon, delta)
    x = _solve_analytic_ratio(epsilon, log_target, x_tail)
    # the difference of the two terms amplifies their error by (Φ(A) + e^ε Φ(B))/δ ≤ 2Φ(A)/δ
    amplification = 1.0 + 2.0 * math.exp(min(_log_tail(epsilon, x) - log_target, 700.0))
    slack = min(1e-13 + _term_error(epsilon, x) * amplification, 1.0)
    aim = log_target - slack
    sigma = sensitivity * _solve_analytic_ratio(epsilon, aim, x_tail)
    return _round_up_until(sigma, sensitivity, lambda ratio: gaussian_log_delta(1.0 / ratio, epsilon) <= aim)


def tail_bound_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ solving the tail-bound condition δ = Φ(S/(2σ) − εσ/S) in closed form, rounded up.

    With x = σ/S the condition reads 1/(2x) − εx = z, z = Φ⁻¹(δ), a quadratic εx² + zx − 1/2 = 0 whose
    positive root is x = (√(z² + 2ε) − z)/(2ε) = 1/(z + √(z² + 2ε)). σ is then raised until the
    evaluated Φ is below δ by more than its rounding error, so that the condition holds exactly.
    """
    x = _tail_bound_ratio(epsilon, delta)
    aim = math.log(delta) - 1e-13 - _term_error(epsilon, x)
    sigma = sensitivity * x
    return _round_up_until(sigma, sensitivity, lambda ratio: _log_tail(epsilon, ratio) <= aim)


def classic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ = S·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1; proven for ε < 1), rounded up.

    ln and √ are not correctly rounded, so no exact comparison certifies the last bit: the float
    expression is within about 4·2⁻⁵³ (relative) of the exact σ (ln(1.25/δ) ≥ ln 1.25 > 0.2 keeps the
    logarithm's relative error small), and σ is raised by 2⁻⁴⁵ relative, 64 times that.
    """
    sigma = sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    return math.nextafter(sigma * (1.0 + _CLASSIC_MARGIN), math.inf)


def _classic_is_private(epsilon: float, delta: float) -> bool:
    """Whether the classic σ is (ε, δ)-DP: always for ε < 1 (its theorem); for ε ≥ 1 when it is at least
    the exact analytic σ (δ(ε) decreases in σ), which holds up to ε ≈ 5 at δ = 10⁻⁵ and fails beyond.

    σ/S does not depend on S, so S = 1 decides for every S; the classic float is lowered by 2⁻⁴⁴ relative
    (more than its upward margin) so that the exact classic ratio, not its rounding, is compared.
    """
    if epsilon < 1.0:
        return True
    return classic_sigma(epsilon, delta, 1.0) * (1.0 - 2.0**-44) >= analytic_sigma(epsilon, delta, 1.0)


class Gaussian(ContinuousMechanism):
    """Add Gaussian noise N(0, σ²) to a real-valued query with L2 sensitivity S.

    Parameters
    ----------
    epsilon : float
        ε > 0 (not used with ``calibration="gdp"``).
    delta : float
        δ in (0, 1). The Gaussian mechanism is never (ε, 0)-DP, so δ = 0 is refused (use
        :class:`~dp_pipeline.mechanisms.Laplace` or :class:`~dp_pipeline.mechanisms.Staircase` for pure DP).
    sensitivity : float
        Global L2 sensitivity S > 0 of the query. Required: there is no default.
    calibration : {"analytic", "tail_bound", "classic", "gdp"}
        How σ is derived from the privacy parameters (see Notes). ``"gdp"`` is what
        :meth:`from_mu` builds; it takes ``mu`` instead of ``epsilon`` and ``delta``.
    mu : float
        μ > 0, only with ``calibration="gdp"``.

    Notes
    -----
    For neighbouring inputs at distance S the privacy loss is L ~ N(η, 2η) with η = S²/(2σ²).

    ``"analytic"`` (default, exact): the least σ with
    δ(ε) = Φ(S/(2σ) − εσ/S) − e^ε Φ(−S/(2σ) − εσ/S) ≤ δ, which is necessary and sufficient for
    (ε, δ)-DP (Balle & Wang 2018, Thm 8). Solved numerically in log space; σ is rounded up.
    For ε = 1, δ = 1e-5, S = 1: σ ≈ 3.73.

    ``"tail_bound"``: σ solving Φ(S/(2σ) − εσ/S) = δ, i.e. P(L > ε) = δ. Sufficient for (ε, δ)-DP but not
    tight (the sufficient condition of the classical analysis, Balle & Wang 2018, Sec. 3); closed form
    from a quadratic in σ. ε = 1, δ = 1e-5, S = 1: σ ≈ 4.38.

    ``"classic"``: σ = S·√(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1). Its proof needs ε < 1; for
    ε ≥ 1 it is accepted where it is at least the analytic σ (so the exact condition certifies it: up to
    ε ≈ 5 at δ = 10⁻⁵) and refused beyond. ε = 1, δ = 1e-5: σ ≈ 4.84.

    ``"gdp"``: σ = S/μ, which is exactly μ-GDP (Dong, Roth & Su 2022, Thm 2.7).

    Whatever the calibration, noise of standard deviation σ is exactly (S/σ)-GDP; :attr:`gdp` gives that
    guarantee, which composes exactly (√(Σμᵢ²)).

    **Secure path (default).** With λ = 2^k, 2^{k+12} ≤ σ < 2^{k+13}, the release is the centre
    (m + ½)λ of the lattice cell that holds the ideal output Y = t + N, N ~ N(0, σ²), with m = ⌊Y/λ⌋
    drawn from its exact law with a CSPRNG: |N|/λ by exact rejection sampling from a piecewise-uniform
    proposal (blocks of width about σ/100 picked by an alias table of dyadic probabilities, with an
    exponential tail; acceptance above 0.99), every comparison certified or decided in exact arithmetic
    (:mod:`~dp_pipeline.mechanisms.sampling`). The release is a deterministic function of Y, so
    :attr:`guarantee`, :attr:`gdp` and :attr:`event` (σ and S unchanged) hold exactly, for any input and
    any number of values. Rounding moves the output by at most λ/2 ≤ σ·2⁻¹³. Floating-point safe: outputs
    lie on λ(ℤ + ½) whatever t. Integer input: λ = 1, t + ⌊N + ½⌋ (the Gaussian rounded to the nearest
    integer), with the same guarantee and event; for σ < 2¹⁰ there, |N| is drawn by exact rejection from
    an exponential proposal instead (acceptance about 0.76), with the same exact law.

    Difference from OpenDP and Canonne, Kamath & Steinke (2020): they add a discrete Gaussian N_ℤ(0, σ²)
    to an integer (or a lattice-rounded) input. That is ρ-zCDP with ρ = S²/(2σ²) like the continuous
    Gaussian, but its (ε, δ) curve can lie above the continuous one (their Thm 7 bounds the gap), and it
    is not μ-GDP with μ = S/σ in general (for σ small against the lattice step it is close to releasing
    the input). Rounding a continuous Gaussian keeps every guarantee of the continuous mechanism, so the
    accounting of :attr:`event` stays exact; and no input rounding means no sensitivity inflation, even for
    vectors.

    **Fast path** (``rng=fast_rng(...)``): t + numpy's float normal sample (PCG64), **not floating-point
    safe** (Mironov 2012).

    References
    ----------
    Balle & Wang, "Improving the Gaussian mechanism for differential privacy: analytical calibration and
    optimal denoising", ICML 2018.
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, Appendix A.
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
    Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
    Mironov, "On significance of the least significant bits for differential privacy", CCS 2012.

    Examples
    --------
    >>> round(Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0).sigma, 2)
    3.73
    >>> Gaussian.from_mu(mu=0.5, sensitivity=1.0).sigma
    2.0
    """

    event_kind = "gaussian"
    integer_queries = True
    # calibration is validated first so that the checks of the other fields can depend on it
    calibration: Calibration = "analytic"
    epsilon: FiniteFloat | None = Field(default=None, validate_default=True)
    delta: FiniteFloat | None = Field(default=None, validate_default=True)
    sensitivity: FiniteFloat = Field(gt=0.0)
    mu: FiniteFloat | None = Field(default=None, validate_default=True)

    _sigma: float = PrivateAttr(default=math.nan)

    @field_validator("epsilon")
    @classmethod
    def _check_epsilon(cls, value: float | None, info: ValidationInfo) -> float | None:
        calibration = info.data.get("calibration")
        if calibration is None:  # the calibration itself was invalid and is reported
            return value
        if calibration == "gdp":
            if value is not None:
                raise ValueError("is not used with calibration='gdp' (σ = S/μ); pass mu only")
            return value
        if value is None:
            raise ValueError(
                f"is required with calibration={calibration!r}; use Gaussian.from_mu(mu) for μ-GDP"
            )
        if value <= 0.0:
            raise ValueError(f"must be > 0, got {value}")
        return value

    @field_validator("delta")
    @classmethod
    def _check_delta(cls, value: float | None, info: ValidationInfo) -> float | None:
        calibration = info.data.get("calibration")
        if calibration is None:
            return value
        if calibration == "gdp":
            if value is not None:
                raise ValueError("is not used with calibration='gdp' (σ = S/μ); pass mu only")
            return value
        if value is None:
            raise ValueError(f"is required with calibration={calibration!r}")
        if not 0.0 < value < 1.0:
            raise ValueError(
                f"must lie in (0, 1), got {value}: Gaussian noise is never (ε, 0)-DP; use Laplace or "
                "Staircase for pure ε-DP, or Gaussian.from_mu for μ-GDP"
            )
        epsilon = info.data.get("epsilon")
        if calibration == "classic" and epsilon is not None and not _classic_is_private(epsilon, value):
            raise ValueError(
                f"calibration='classic' (σ = S·√(2 ln(1.25/δ))/ε, Dwork & Roth 2014, Thm A.1) is not "
                f"(ε, δ)-DP at ε = {epsilon}, δ = {value} (its σ is below the exact one); use "
                "calibration='analytic', which is exact for every ε"
            )
        return value

    @field_validator("mu")
    @classmethod
    def _check_mu(cls, value: float | None, info: ValidationInfo) -> float | None:
        calibration = info.data.get("calibration")
        if calibration is None:
            return value
        if calibration != "gdp":
            if value is not None:
                raise ValueError(
                    f"is only used with calibration='gdp' (got {calibration!r}); use Gaussian.from_mu(mu)"
                )
            return value
        if value is None:
            raise ValueError("is required with calibration='gdp'")
        if value <= 0.0:
            raise ValueError(f"must be > 0, got {value}")
        return value

    def model_post_init(self, context: Any, /) -> None:
        """Compute σ once, from the validated parameters."""
        if self.calibration == "gdp":
            assert self.mu is not None
            sigma = divide_up(self.sensitivity, self.mu)
        else:
            assert self.epsilon is not None and self.delta is not None
            solve = {"analytic": analytic_sigma, "tail_bound": tail_bound_sigma, "classic": classic_sigma}
            try:
                sigma = solve[self.calibration](self.epsilon, self.delta, self.sensitivity)
            except (ZeroDivisionError, OverflowError):  # σ beyond the largest double
                sigma = math.inf
        if not math.isfinite(sigma):
            raise ValueError(  # pydantic reports it as an InvalidParameterError of Gaussian
                f"the noise σ for sensitivity {self.sensitivity} at this privacy level is beyond the largest "
                "float; the release would be pure noise. Lower the sensitivity (tighter bounds) or raise "
                "the privacy parameters"
            )
        self._sigma = sigma

    @classmethod
    def from_mu(cls, mu: float, sensitivity: float) -> Gaussian:
        """The Gaussian mechanism that is exactly μ-GDP: σ = Δ/μ (rounded up), guarantee GaussianDP(μ).

        Parameters
        ----------
        mu : float
            μ > 0.
        sensitivity : float
            L2 sensitivity Δ > 0.
        """
        return cls(calibration="gdp", mu=mu, sensitivity=sensitivity)

    @property
    def sigma(self) -> float:
        """The noise standard deviation σ."""
        return self._sigma

    @property
    def variance(self) -> float:
        """Variance of the noise, σ²."""
        return self._sigma**2

    @property
    def gdp(self) -> GaussianDP:
        """The exact μ-GDP guarantee of this noise, μ = S/σ (rounded up); ``mu`` itself for ``"gdp"``."""
        if self.mu is not None:
            return GaussianDP(self.mu)
        return GaussianDP(divide_up(self.sensitivity, self._sigma))

    @property
    def guarantee(self) -> ApproxDP | GaussianDP:
        """(ε, δ)-DP for the (ε, δ) calibrations; μ-GDP for ``"gdp"``."""
        if self.calibration == "gdp":
            return self.gdp
        assert self.epsilon is not None and self.delta is not None
        return ApproxDP(self.epsilon, self.delta)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"sigma": self._sigma}

    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """exp(−(y − t)²/(2σ²)) / (σ√(2π))."""
        z = (np.asarray(y, float) - np.asarray(t, float)) / self._sigma
        return np.exp(-0.5 * z * z) / (self._sigma * math.sqrt(2.0 * math.pi))

    @property
    def lattice(self) -> float:
        """λ = 2^k, the step of the secure path's output lattice (2^{k+12} ≤ σ < 2^{k+13})."""
        return 2.0 ** sampling.lattice_exponent(self._sigma)

    def _randomize_fast(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        return values + sampling.gaussian(rng, self._sigma, values.shape)

    def _randomize_secure(
        self, values: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        return sampling.gaussian_cells(rng, values, self._sigma, sampling.lattice_exponent(self._sigma))

    def _integer_noise(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        return sampling.gaussian_integers(rng, self._sigma, n)
