"""Transformers that add Laplace, Gaussian or staircase noise to numeric features."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._release import plan_noise
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.mechanisms._base import ContinuousMechanism
from dp_pipeline.transformers._base import fill_doc
from dp_pipeline.transformers._continuous import ContinuousNoise

__all__ = ["GaussianNoise", "LaplaceNoise", "StaircaseNoise"]

_SHARED_PARAMETERS = """lower, upper : float, array-like of shape (n_features,) or None
        Declared bounds of each feature, known without looking at the data. Values outside are clipped to
        them before the noise is added (counted in ``n_clipped_``). None leaves that side unbounded.
    bounds : {"declared", "data"}
        ``"declared"`` (default) uses ``lower`` and ``upper``. ``"data"`` takes them from the minimum and
        maximum of the training data in ``fit``; this leaks those values and raises PrivacyLeakWarning.
    accountant : PrivacyAccountant or "unaccounted"
        The ledger every release is charged to. It is required: ``"unaccounted"`` is the explicit opt-out
        that releases without charging any ledger.
    dataset : str
        The dataset (the budget) the releases are charged to.
    random_state : None, int or numpy.random.Generator
        The generator is created in ``fit``; every ``transform`` draws fresh noise from it. None (default):
        fresh OS entropy. A seed or a Generator makes the noise reproducible and raises PrivacyLeakWarning
        (anyone with the seed can remove the noise; copies share it): for tests only."""

_SHARED_ATTRIBUTES = """lower_, upper_ : ndarray of shape (n_features,)
        The bounds in use (±inf where none was declared).
    sensitivity_ : ndarray of shape (n_features,)
        Δⱼ, the declared sensitivity of each feature.
    mechanisms_ : list of mechanisms
        The mechanism that adds the noise of each feature.
    noise_std_ : ndarray of shape (n_features,)
        The standard deviation of each feature's noise.
    cost_ : PrivacyEvent
        What one ``transform`` costs one person (one row); charged on every call.
    n_clipped_ : ndarray of shape (n_features,)
        How many values of each feature the latest ``transform`` clipped to the bounds (zeros after ``fit``).
        It is computed from the raw data and is not differentially private: a diagnostic for the data holder,
        not for release.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names seen in ``fit`` (only when X has string column names)."""

_RELEASE_NOTES = """The privacy unit is one row (one person). Each ``transform`` is one release: X is checked,
    clipped to the bounds, and the release's cost ``cost_`` is charged to ``accountant`` under ``dataset``;
    only then is the noise drawn. A bad X raises InvalidParameterError and a refused charge raises
    BudgetExceededError, and in both cases nothing is charged and nothing is returned. ``fit`` charges
    nothing; ``fit_transform`` charges once.

    ``epsilon`` is what one whole ``transform`` costs one row, over all its features: a person's row can
    change every feature at once, so the d features share the budget (see each class's Notes for the split).
    Fit the transformer on the columns that need noise (e.g. inside a ColumnTransformer) to keep d small.

    Under ``clone``, GridSearchCV, cross_val_score and ``n_jobs > 1`` every copy charges the one ledger the
    accountant points to: a PrivacyAccountant on an SQL ledger (``"sqlite:///…"``, PostgreSQL) is copied and
    pickled by its URL. A ``"memory://"`` ledger lives in one process: copies in the same process share it,
    and sending it to worker processes (``n_jobs > 1``) is refused with an error rather than charging a
    copy."""


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
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.sensitivity = sensitivity
        self.lower = lower
        self.upper = upper
        self.bounds = bounds
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    def _calibrate(
        self, lower: NDArray[np.float64], upper: NDArray[np.float64], sensitivity: NDArray[np.float64]
    ) -> tuple[list[ContinuousMechanism], PrivacyEvent]:
        plan = plan_noise("laplace", sensitivity, epsilon=self.epsilon)
        return list(plan.mechanisms), plan.event


class GaussianNoise(ContinuousNoise):
    """Add Gaussian noise to every feature, each calibrated to its own sensitivity; (ε, δ)-DP per release.

    Parameters
    ----------
    epsilon : float
        ε > 0 of one whole ``transform`` (ignored with ``calibration="gdp"``).
    delta : float
        δ in (0, 1) of one whole ``transform`` (ignored with ``calibration="gdp"``).
    mu : float or None
        μ > 0 of one whole ``transform``, used (and required) with ``calibration="gdp"``.
    calibration : {"analytic", "tail_bound", "classic", "gdp"}
        How σ follows from the privacy parameters; see :class:`~dp_pipeline.mechanisms.Gaussian`.
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
        epsilon: float = 1.0,
        delta: float = 1e-5,
        mu: float | None = None,
        calibration: str = "analytic",
        sensitivity: Any = None,
        lower: Any = None,
        upper: Any = None,
        bounds: str = "declared",
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
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    def _calibrate(
        self, lower: NDArray[np.float64], upper: NDArray[np.float64], sensitivity: NDArray[np.float64]
    ) -> tuple[list[ContinuousMechanism], PrivacyEvent]:
        if self.calibration == "gdp":
            plan = plan_noise("gaussian", sensitivity, mu=self.mu, calibration="gdp")
        else:
            plan = plan_noise(
                "gaussian", sensitivity, epsilon=self.epsilon, delta=self.delta, calibration=self.calibration
            )
        return list(plan.mechanisms), plan.event


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
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    def _calibrate(
        self, lower: NDArray[np.float64], upper: NDArray[np.float64], sensitivity: NDArray[np.float64]
    ) -> tuple[list[ContinuousMechanism], PrivacyEvent]:
        plan = plan_noise("staircase", sensitivity, epsilon=self.epsilon, gamma=self.gamma)
        return list(plan.mechanisms), plan.event


for _cls in (LaplaceNoise, GaussianNoise, StaircaseNoise):
    fill_doc(
        _cls,
        shared_parameters=_SHARED_PARAMETERS,
        shared_attributes=_SHARED_ATTRIBUTES,
        release_notes=_RELEASE_NOTES,
    )
