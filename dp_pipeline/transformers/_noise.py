"""Transformers that add Laplace, Gaussian or staircase noise to numeric features."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._splitting import NoisePlan, declared_cost, plan_noise
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.transformers._continuous import ContinuousNoise

__all__ = ["GaussianNoise", "LaplaceNoise", "StaircaseNoise"]


class LaplaceNoise(ContinuousNoise):
    """Add Laplace noise to every feature, each calibrated to its own sensitivity; ε-DP per ``transform``.

    Parameters
    ----------
    epsilon : float
        ε > 0: what one ``transform`` costs one row (the whole row, all features together).
    sensitivity : float, array-like of shape (n_features,) or None
        Δⱼ > 0, the most one person can change feature j (L1). None (default) takes upper − lower, which needs
        both bounds declared.
    {shared_parameters}

    Attributes
    ----------
    {shared_attributes}

    Notes
    -----
    With d features, feature j receives Laplace noise of scale bⱼ = d·Δⱼ/ε, i.e. the noise of
    ``Laplace(epsilon=ε/d, sensitivity=Δⱼ)``. In the units xⱼ/Δⱼ one row changes by at most 1 per feature,
    at most d in L1, and every feature gets noise of scale d/ε: the release is one d-dimensional Laplace
    mechanism with L1 sensitivity d, hence ε-DP (Dwork et al. 2006), and ``cost_`` is that Laplace event.

    {release_notes}

    References
    ----------
    Dwork, McSherry, Nissim & Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006.

    Examples
    --------
    >>> import numpy as np
    >>> noise = LaplaceNoise(epsilon=1.0, lower=0.0, upper=10.0, accountant="unaccounted")
    >>> noise.fit_transform(np.array([[1.0], [4.0], [12.0]])).shape
    (3, 1)
    >>> float(noise.noise_std_[0])  # √2 · Δ/ε with Δ = 10
    14.142135623730951
    >>> noise.n_clipped_.tolist()
    [1]
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        sensitivity: Any = None,
        lower: Any = None,
        upper: Any = None,
        bounds: str = "declared",
        outer: Any = None,
        bounds_epsilon: float | None = None,
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.lower = lower
        self.upper = upper
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
        return plan_noise("laplace", sensitivity, epsilon=self.epsilon)


class GaussianNoise(ContinuousNoise):
    """Add Gaussian noise to every feature, each calibrated to its own sensitivity; (ε, δ)-DP per release.

    Parameters
    ----------
    epsilon : float or None
        ε > 0 of one whole ``transform`` (None: 1.0). Not with ``mu``.
    delta : float or None
        δ in (0, 1) of one whole ``transform`` (None: 1e-5). Not with ``mu``.
    mu : float or None
        μ > 0 of one whole μ-GDP ``transform``; giving it selects ``calibration="gdp"``.
    calibration : {None, "analytic", "tail_bound", "classic", "gdp"}
        How σ follows from the privacy parameters; see :class:`~dp_pipeline.mechanisms.Gaussian`. None
        (default): ``"gdp"`` when ``mu`` is given, else ``"analytic"``. A parameter the calibration does not
        use (``mu`` with an (ε, δ) calibration, ``epsilon`` or ``delta`` with ``"gdp"``) raises
        InvalidParameterError in ``fit``, as does ``"gdp"`` without ``mu``.
    sensitivity : float, array-like of shape (n_features,) or None
        Δⱼ > 0, the most one person can change feature j. None (default) takes upper − lower.
    {shared_parameters}

    Attributes
    ----------
    {shared_attributes}

    Notes
    -----
    With d features, let σ be the noise of the scalar Gaussian mechanism calibrated to (ε, δ) (or μ) at L2
    sensitivity √d. Feature j receives N(0, (σΔⱼ)²). In the units xⱼ/Δⱼ one row moves by at most √d in L2 and
    every coordinate gets N(0, σ²): since Gaussian noise is rotation invariant this is exactly the scalar
    mechanism at sensitivity √d, so the release is (ε, δ)-DP (μ-GDP) and ``cost_`` is that Gaussian event.

    {release_notes}

    References
    ----------
    Balle & Wang, "Improving the Gaussian mechanism for differential privacy", ICML 2018.
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.

    Examples
    --------
    >>> import numpy as np
    >>> noise = GaussianNoise(epsilon=1.0, delta=1e-5, sensitivity=1.0, accountant="unaccounted")
    >>> noise = noise.fit(np.ones((2, 1)))
    >>> round(float(noise.noise_std_[0]), 2)
    3.73
    """

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        mu: float | None = None,
        calibration: str | None = None,
        sensitivity: Any = None,
        lower: Any = None,
        upper: Any = None,
        bounds: str = "declared",
        outer: Any = None,
        bounds_epsilon: float | None = None,
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.mu = mu
        self.calibration = calibration
        self.sensitivity = sensitivity
        self.lower = lower
        self.upper = upper
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
        return plan_noise("gaussian", sensitivity, **self._noise())

    def declared_cost(self) -> PrivacyEvent:
        """What one ``transform`` costs at most, from the parameters alone: the release of one feature of
        unit sensitivity (d features have the same (ε, δ) and at most its μ)."""
        return declared_cost("gaussian", **self._noise())

    def _noise(self) -> dict[str, Any]:
        """ε, δ, μ and the calibration, checked against each other (InvalidParameterError)."""
        calibration = self.calibration or ("analytic" if self.mu is None else "gdp")
        if calibration == "gdp":
            unused = [name for name in ("epsilon", "delta") if getattr(self, name) is not None]
            if unused:
                raise InvalidParameterError(
                    f"GaussianNoise with mu (calibration='gdp') takes no {' or '.join(map(repr, unused))}: "
                    "a μ-GDP release is fixed by mu alone",
                    unused[0],
                )
            if self.mu is None:
                raise InvalidParameterError("calibration='gdp' needs 'mu'", "mu")
            return {"epsilon": None, "mu": self.mu, "calibration": "gdp"}
        if self.mu is not None:
            raise InvalidParameterError(
                f"'mu' is only used with calibration='gdp' (or no calibration), not {calibration!r}; give "
                "epsilon and delta, or mu alone",
                "mu",
            )
        epsilon = 1.0 if self.epsilon is None else self.epsilon
        delta = 1e-5 if self.delta is None else self.delta
        return {"epsilon": epsilon, "delta": delta, "calibration": calibration}


class StaircaseNoise(ContinuousNoise):
    """Add staircase noise (Geng & Viswanath) to every feature; ε-DP per ``transform``.

    Parameters
    ----------
    epsilon : float
        ε > 0 of one whole ``transform``.
    gamma : float or None
        γ in [0, 1], the staircase shape; None (default) takes the optimal γ for each feature's ε/d.
    sensitivity : float, array-like of shape (n_features,) or None
        Δⱼ > 0, the most one person can change feature j. None (default) takes upper − lower.
    {shared_parameters}

    Attributes
    ----------
    {shared_attributes}

    Notes
    -----
    With d features, feature j receives the noise of ``Staircase(epsilon=ε/d, sensitivity=Δⱼ, gamma=γ)``
    (ε/d rounded down). Staircase noise is ε/d-DP for a change of at most Δⱼ in its feature; the d features of
    a row compose to ε-DP (basic composition, exact for pure DP), and ``cost_`` is ``PureDP(ε)``.

    {release_notes}

    References
    ----------
    Geng & Viswanath, "The optimal noise-adding mechanism in differential privacy", IEEE Trans. Inf. Theory
    62(2), 2016.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        gamma: float | None = None,
        sensitivity: Any = None,
        lower: Any = None,
        upper: Any = None,
        bounds: str = "declared",
        outer: Any = None,
        bounds_epsilon: float | None = None,
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.gamma = gamma
        self.sensitivity = sensitivity
        self.lower = lower
        self.upper = upper
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
        return plan_noise("staircase", sensitivity, epsilon=self.epsilon, gamma=self.gamma)
