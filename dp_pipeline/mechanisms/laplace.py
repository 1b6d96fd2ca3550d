"""The Laplace mechanism."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import Field

from dp_pipeline._validation import FiniteFloat
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import _sampling
from dp_pipeline.mechanisms._base import ContinuousMechanism

__all__ = ["Laplace"]


class Laplace(ContinuousMechanism):
    """Add Laplace noise of scale b = Δ/ε to a real-valued query.

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    sensitivity : float
        Global L1 sensitivity Δ > 0 of the query (1 for a count).

    Notes
    -----
    Output density p(y | t) = exp(−|y − t| / b) / (2b) with b = Δ/ε. For neighbouring inputs
    |t − t'| ≤ Δ the density ratio is at most e^{|t − t'|/b} ≤ e^ε, so the release is ε-DP.
    Variance 2b².

    References
    ----------
    Dwork, McSherry, Nissim & Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006.

    Examples
    --------
    >>> Laplace(epsilon=1.0, sensitivity=1.0).scale
    1.0
    """

    event_kind = "laplace"
    epsilon: FiniteFloat = Field(gt=0.0)
    sensitivity: FiniteFloat = Field(default=1.0, gt=0.0)

    @property
    def scale(self) -> float:
        """b = Δ/ε."""
        return self.sensitivity / self.epsilon

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

    def _randomize(self, values: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        return values + _sampling.laplace(rng, self.scale, values.shape)
