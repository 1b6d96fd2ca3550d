"""Transformers whose noisy output stays inside the declared range: bounded Laplace and bounded staircase."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._splitting import NoisePlan, basic_composition
from dp_pipeline.mechanisms import BoundedLaplace, BoundedStaircase
from dp_pipeline.mechanisms._staircase import optimal_gamma
from dp_pipeline.transformers._continuous import ContinuousNoise

__all__ = ["BoundedLaplaceNoise", "BoundedStaircaseNoise"]


class BoundedLaplaceNoise(ContinuousNoise):
    """Bounded Laplace noise (Holohan et al.): outputs stay in [lower, upper]; ε-DP per ``transform``.

    Parameters
    ----------
    epsilon : float
        ε > 0 of one whole ``transform``.
    sensitivity : float, array-like of shape (n_features,) or None
        Δⱼ in (0, upperⱼ − lowerⱼ], the largest change of one value to hide. None (default) takes
        upper − lower: any value may be replaced by any other (the local model).
    {shared_parameters}

    Attributes
    ----------
    {shared_attributes}

    Notes
    -----
    Both bounds are required (finite, or ``bounds="dp"`` or ``"data"``). Since the error depends on the true
    value t, ``noise_std_`` is the root of the largest mean-squared error E[(Y − t)² | t] over 101 points of
    the range.

    With d features, feature j is released by ``BoundedLaplace(epsilon=ε/d, lower=lⱼ, upper=uⱼ,
    sensitivity=Δⱼ)`` (ε/d rounded down), whose scale is calibrated so that the truncation to [lⱼ, uⱼ] keeps
    it ε/d-DP. The d features compose to ε-DP (basic composition, exact for pure DP); ``cost_`` is
    ``PureDP(ε)`` (the feature's own event when d = 1).

    {release_notes}

    References
    ----------
    Holohan, Antonatos, Braghin & Mac Aonghusa, "The bounded Laplace mechanism in differential privacy",
    Journal of Privacy and Confidentiality 10(1), 2020.
    """

    _bounds_required = True

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        lower: Any = None,
        upper: Any = None,
        sensitivity: Any = None,
        bounds: str = "declared",
        outer: Any = None,
        bounds_epsilon: float | None = None,
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.lower = lower
        self.upper = upper
        self.sensitivity = sensitivity
        self.bounds = bounds
        self.outer = outer
        self.bounds_epsilon = bounds_epsilon
        self.group_size = group_size
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    def _calibrate(
        self, lower: NDArray[np.float64], upper: NDArray[np.float64], sensitivity: NDArray[np.float64]
    ) -> NoisePlan:
        def build(share: float) -> list[BoundedLaplace]:
            return [
                BoundedLaplace(epsilon=share, lower=lo, upper=hi, sensitivity=s)
                for lo, hi, s in zip(lower.tolist(), upper.tolist(), sensitivity.tolist(), strict=True)
            ]

        return basic_composition(self.epsilon, len(lower), build)


class BoundedStaircaseNoise(ContinuousNoise):
    """Bounded staircase noise: outputs stay in [lower, upper]; ε-LDP per ``transform``.

    Parameters
    ----------
    epsilon : float
        ε > 0 of one whole ``transform``.
    gamma : float or None
        γ in [0, 1], the staircase shape. None (default) takes 1/(1 + e^{ε'/2}) with ε' = ε/d, the γ that
        minimises the unbounded staircase's E|X| (Geng & Viswanath).
    {shared_parameters}

    Attributes
    ----------
    {shared_attributes}

    Notes
    -----
    Both bounds are required (finite, or ``bounds="dp"`` or ``"data"``). The sensitivity is always upper −
    lower (the local model: any value may be replaced by any other). Since the error depends on the true value
    t, ``noise_std_`` is the root of the largest mean-squared error E[(Y − t)² | t] over 101 points of the
    range.

    With d features, feature j is released by ``BoundedStaircase(epsilon=ε/d, lower=lⱼ, upper=uⱼ, gamma=γ)``
    (ε/d rounded down), which is ε/d-LDP for values in [lⱼ, uⱼ]. The d features compose to ε-DP (basic
    composition); ``cost_`` is ``PureDP(ε)`` (the feature's own event when d = 1).

    {release_notes}

    References
    ----------
    Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf. Theory
    62(2), 2016.
    Kim, Park & Lee, "A study on bounded staircase mechanism for local differential privacy" (KAIST).
    """

    _bounds_required = True
    _sensitivity_param = False

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        lower: Any = None,
        upper: Any = None,
        gamma: float | None = None,
        bounds: str = "declared",
        outer: Any = None,
        bounds_epsilon: float | None = None,
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.lower = lower
        self.upper = upper
        self.gamma = gamma
        self.bounds = bounds
        self.outer = outer
        self.bounds_epsilon = bounds_epsilon
        self.group_size = group_size
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    def _calibrate(
        self, lower: NDArray[np.float64], upper: NDArray[np.float64], sensitivity: NDArray[np.float64]
    ) -> NoisePlan:
        def build(share: float) -> list[BoundedStaircase]:
            gamma = optimal_gamma(share) if self.gamma is None else self.gamma
            return [
                BoundedStaircase(epsilon=share, lower=lo, upper=hi, gamma=gamma)
                for lo, hi in zip(lower.tolist(), upper.tolist(), strict=True)
            ]

        return basic_composition(self.epsilon, len(lower), build)
