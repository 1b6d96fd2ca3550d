"""The Laplace mechanism."""

from __future__ import annotations

import math
from typing import Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field, model_validator

from dp_pipeline._exact import divide_up
from dp_pipeline._validation import FiniteFloat
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import ContinuousMechanism

__all__ = ["Laplace"]


class Laplace(ContinuousMechanism):
    """Add Laplace noise of scale b = Δ/ε to a real-valued query.

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    sensitivity : float
        Global L1 sensitivity Δ > 0 of the query (1 for a count). Required: there is no default.

    Notes
    -----
    Output density p(y | t) = exp(−|y − t| / b) / (2b) with b = Δ/ε. For neighbouring inputs
    |t − t'| ≤ Δ the density ratio is at most e^{|t − t'|/b} ≤ e^ε, so the release is ε-DP.
    Variance 2b².

    **Secure path (default).** With λ = 2^k, 2^{k+12} ≤ b < 2^{k+13}, the release is the centre
    (m + ½)λ of the cell [mλ, (m + 1)λ) that holds the ideal output Y = t + L, L ~ Lap(b), where
    m = ⌊Y/λ⌋ is drawn from its exact law with a CSPRNG (:mod:`~dp_pipeline.mechanisms.sampling`). The
    release is a deterministic function of Y, so it is ε-DP exactly as above (post-processing), for any
    input and any number of values: the lattice does not change the sensitivity, and :attr:`event`
    (``scale`` = b, ``sensitivity`` = Δ) describes it exactly. Rounding moves the output by at most
    λ/2 ≤ b·2⁻¹³ (variance 2b² + λ²/12). It is floating-point safe: every output lies on λ(ℤ + ½),
    whatever t, and no floating-point approximation of the noise decides it. Integer input (a count):
    λ = 1 and the output is t + ⌊L + ½⌋, the Laplace noise rounded to the nearest integer, again a
    post-processing with the same guarantee and event.

    Difference from OpenDP: OpenDP's ``make_laplace`` samples a discrete Laplace on the lattice 2⁻¹⁰⁷⁴ℤ
    (which holds every float) with arbitrary-precision integers and rounds the result to a float; here the
    continuous Laplace is located exactly in a coarser cell with machine integers and certified float
    comparisons, which is much faster and gives exactly the continuous mechanism's guarantee. (A discrete
    Laplace at the same scale is ε-DP too, but its privacy-loss distribution is not dominated by the
    continuous one's — at sensitivity 1, δ(0) = tanh(ε/2) against 1 − e^{−ε/2} — so it could not be
    accounted as a ``"laplace"`` event in tight composition.)

    **Fast path** (``rng=fast_rng(...)``): t + numpy's float Laplace sample (PCG64). Same distribution up
    to floating-point error, **not floating-point safe**: the set of floats it can reach depends on t
    (Mironov 2012).

    References
    ----------
    Dwork, McSherry, Nissim & Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006.
    Mironov, "On significance of the least significant bits for differential privacy", CCS 2012.

    Examples
    --------
    >>> Laplace(epsilon=1.0, sensitivity=1.0).scale
    1.0
    """

    event_kind = "laplace"
    integer_queries = True
    epsilon: FiniteFloat = Field(gt=0.0)
    sensitivity: FiniteFloat = Field(gt=0.0)

    @model_validator(mode="after")
    def _check_scale(self) -> Self:
        if not math.isfinite(self.scale):
            raise ValueError(
                f"the noise scale Δ/ε = {self.sensitivity}/{self.epsilon} is beyond the largest float; the "
                "release would be pure noise. Lower the sensitivity (tighter bounds) or raise epsilon"
            )
        return self

    @property
    def scale(self) -> float:
        """b = Δ/ε, rounded up (the least double ≥ Δ/ε), so that the noise's exact ε = Δ/b is at most ε."""
        return divide_up(self.sensitivity, self.epsilon)

    @property
    def variance(self) -> float:
        """Variance of the noise, 2b²."""
        return 2.0 * self.scale**2

    @property
    def guarantee(self) -> PureDP:
        """ε-DP."""
        return PureDP(self.epsilon)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"scale": self.scale}

    def pdf(self, y: ArrayLike, t: ArrayLike) -> NDArray[np.float64]:
        """exp(−|y − t|/b) / (2b)."""
        b = self.scale
        return np.exp(-np.abs(np.asarray(y, float) - np.asarray(t, float)) / b) / (2.0 * b)

    @property
    def lattice(self) -> float:
        """λ = 2^k, the step of the secure path's output lattice (2^{k+12} ≤ b < 2^{k+13})."""
        return 2.0 ** sampling.lattice_exponent(self.scale)

    def _randomize_fast(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        return values + sampling.laplace(rng, self.scale, values.shape)

    def _randomize_secure(
        self, values: NDArray[np.float64], rng: np.random.Generator
    ) -> NDArray[np.float64]:
        return sampling.laplace_cells(rng, values, self.scale, sampling.lattice_exponent(self.scale))

    def _integer_noise(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        return sampling.laplace_integers(rng, self.scale, n)
