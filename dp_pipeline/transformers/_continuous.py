"""The shared base of the transformers that add continuous noise: declared bounds, clipping, sensitivity."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.utils.validation import check_is_fitted

from dp_pipeline._release import clip_columns, declared_bounds, declared_sensitivity
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline.mechanisms._base import ContinuousMechanism
from dp_pipeline.transformers._base import DPTransformer

__all__ = ["ContinuousNoise"]

_BOUNDS = ("declared", "data")


class ContinuousNoise(DPTransformer):
    """Base of the continuous-noise transformers (see :class:`~dp_pipeline.transformers.LaplaceNoise`).

    Subclasses implement :meth:`_calibrate`, returning one mechanism per feature and the release's event.
    """

    epsilon: Any
    lower: Any
    upper: Any
    bounds: Any
    _bounds_required = False  # the bounded mechanisms need finite bounds on every feature
    _sensitivity_param = True  # whether the transformer takes a ``sensitivity`` parameter

    lower_: NDArray[np.float64]
    upper_: NDArray[np.float64]
    sensitivity_: NDArray[np.float64]
    mechanisms_: list[ContinuousMechanism]
    noise_std_: NDArray[np.float64]
    _clip_log: dict[str, NDArray[np.int64]]
    _one_mechanism: bool

    def _calibrate(
        self, lower: NDArray[np.float64], upper: NDArray[np.float64], sensitivity: NDArray[np.float64]
    ) -> tuple[list[ContinuousMechanism], PrivacyEvent]:
        raise NotImplementedError  # pragma: no cover

    def _validate_input(self, X: Any, *, reset: bool) -> NDArray[Any]:
        return self._validate_numeric(X, reset=reset)

    def _names(self, n: int) -> list[str]:
        names = getattr(self, "feature_names_in_", None)
        return [str(name) for name in names] if names is not None else [f"x{j}" for j in range(n)]

    def _resolve_bounds(self, X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if not (isinstance(self.bounds, str) and self.bounds in _BOUNDS):
            raise InvalidParameterError(
                f"'bounds' must be 'declared' or 'data', got {self.bounds!r}", "bounds"
            )
        if self.bounds == "declared":
            return declared_bounds(
                self.lower, self.upper, self._names(X.shape[1]), required=self._bounds_required
            )
        if self.lower is not None or self.upper is not None:
            raise InvalidParameterError(
                "bounds='data' learns lower and upper from X; leave 'lower' and 'upper' as None, or "
                "declare them with bounds='declared'",
                "bounds",
            )
        warnings.warn(
            f"{type(self).__name__}(bounds='data') takes each feature's lower and upper bound from the "
            "minimum and maximum of the training data. Those bounds (and the noise calibrated to them) "
            "depend on individual values and are not differentially private; declare 'lower' and 'upper' "
            "from public knowledge instead",
            PrivacyLeakWarning,
            stacklevel=3,
        )
        lower, upper = X.min(axis=0), X.max(axis=0)
        flat = np.flatnonzero(upper <= lower)
        if flat.size:
            raise InvalidParameterError(
                f"bounds='data': feature {self._feature_name(int(flat[0]))} is constant in X, so its learned "
                "range is empty; declare its bounds",
                "bounds",
            )
        return lower, upper

    def _fit_release(self, X: NDArray[Any]) -> None:
        lower, upper = self._resolve_bounds(X)
        declared = getattr(self, "sensitivity", None) if self._sensitivity_param else None
        sensitivity = declared_sensitivity(declared, lower, upper, self._names(X.shape[1]))
        mechanisms, event = self._calibrate(lower, upper, sensitivity)
        self.lower_, self.upper_, self.sensitivity_ = lower, upper, sensitivity
        self.mechanisms_ = mechanisms
        self._one_mechanism = all(m == mechanisms[0] for m in mechanisms[1:])
        self.cost_ = event
        self.noise_std_ = np.sqrt(np.array([_noise_variance(m) for m in mechanisms], dtype=np.float64))
        self._clip_log = {"n_clipped": np.zeros(X.shape[1], dtype=np.int64)}

    @property
    def n_clipped_(self) -> NDArray[np.int64]:
        """How many values of each feature the latest ``transform`` clipped (zeros after ``fit``)."""
        check_is_fitted(self)
        return self._clip_log["n_clipped"].copy()

    def _prepare(self, X: NDArray[Any]) -> NDArray[Any]:
        finite_lower, finite_upper = np.isfinite(self.lower_).any(), np.isfinite(self.upper_).any()
        clipped, counts = clip_columns(
            X, self.lower_ if finite_lower else None, self.upper_ if finite_upper else None
        )
        # A log, not fitted state: the entry is replaced in place, so transform leaves the estimator's
        # parameters and fitted attributes as they were.
        self._clip_log["n_clipped"] = counts
        return clipped

    def _randomize(self, X: NDArray[Any], rng: np.random.Generator) -> NDArray[Any]:
        # X is checked (finite) and clipped, so the mechanisms' own entry point for validated values is used.
        if self._one_mechanism:  # the same noise on every feature: one vectorised draw
            return self.mechanisms_[0]._randomize(X, rng)
        out = np.empty_like(X)
        for j, mechanism in enumerate(self.mechanisms_):
            out[:, j] = mechanism._randomize(np.ascontiguousarray(X[:, j]), rng)
        return out


def _noise_variance(mechanism: ContinuousMechanism) -> float:
    """The noise variance; for a bounded mechanism, whose error depends on the input t, the largest
    mean-squared error E[(Y − t)² | t] over 101 points of its range."""
    variance = getattr(mechanism, "variance", None)
    if callable(variance):
        grid = np.linspace(mechanism.lower, mechanism.upper, 101)  # type: ignore[attr-defined]
        return float(np.max(mechanism.mse(grid)))  # type: ignore[attr-defined]
    return float(variance)  # type: ignore[arg-type]
