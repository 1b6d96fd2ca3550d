"""The shared base of the transformers that add continuous noise: declared bounds, clipping, sensitivity.

It also owns the docstring sections those transformers share (their common parameters and attributes, and
the release notes), filled into each subclass's ``{name}`` markers.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.utils.validation import check_is_fitted

from dp_pipeline._learned_bounds import BoundsSearch, check_outer, search_share
from dp_pipeline._splitting import NoisePlan, check_epsilon, declared_cost
from dp_pipeline._tabular import clip_columns, declared_bounds, declared_sensitivity
from dp_pipeline.events import PrivacyEvent, composite_event
from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline.mechanisms import ContinuousMechanism
from dp_pipeline.mechanisms.sampling import drawn_event
from dp_pipeline.transformers._base import DPTransformer

__all__ = ["ContinuousNoise"]

_BOUNDS = ("declared", "data", "dp")

_SHARED_PARAMETERS = """lower, upper : float, array-like of shape (n_features,) or None
        Declared bounds of each feature, known without looking at the data. Values outside are clipped to
        them before the noise is added (counted in ``n_clipped_``). None leaves that side unbounded.
    bounds : {"declared", "data", "dp"}
        ``"declared"`` (default) uses ``lower`` and ``upper``. ``"dp"`` learns them in ``fit`` with
        differential privacy, inside ``outer``: each feature's 1st and 99th percentiles, released by the
        exponential mechanism (:mod:`dp_pipeline._learned_bounds`); ``lower``, ``upper`` and ``sensitivity``
        stay None and Δⱼ = upperⱼ − lowerⱼ. That ``fit`` is a release, charged before it reads X (see the
        Notes). ``"data"`` takes them from the minimum and maximum of the training data in ``fit``; this
        leaks those values and raises PrivacyLeakWarning.
    outer : (lo, hi) or None
        With ``bounds="dp"``: the declared range each feature's bounds are learned in, known without
        looking at the data; lo and hi are numbers, one per feature, or dicts feature → number.
    bounds_epsilon : float or None
        With ``bounds="dp"``: what ``fit`` costs, ε of the bound search over all features (2 quantiles per
        feature share it). None (default): a tenth of ``epsilon``.
    group_size : int, default 1
        k ≥ 1: one person contributes up to k rows, and every ``transform`` is charged for a group of k
        (the ledger scales the sensitivity of Laplace and Gaussian noise by k, exact, and uses group privacy
        otherwise). Shown with the charge in refusals and the history.
    accountant : PrivacyAccountant or "unaccounted"
        The ledger every release is charged to. It is required: ``"unaccounted"`` is the explicit opt-out
        that releases without charging any ledger.
    dataset : str
        The dataset (the budget) the releases are charged to.
    random_state : None, int or numpy.random.Generator
        None (default): every ``transform`` draws from a generator keyed from OS entropy at that moment, and
        the fitted transformer holds no random state, so its copies (pickling, ``deepcopy``, joblib workers,
        ``n_jobs > 1``) never share noise. A seed or a Generator is kept from ``fit`` and raises
        PrivacyLeakWarning: the noise is reproducible (anyone with the seed can remove it) and every copy
        of the fitted transformer repeats it. For tests only."""

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
    fit_cost_ : PrivacyEvent or None
        What the latest ``fit`` charged: the bound search with ``bounds="dp"`` (its 2d exponential
        mechanisms, with ``cost_`` too after ``fit_transform``); None otherwise.
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
    nothing (unless ``bounds="dp"``, below); ``fit_transform`` charges once.

    With ``bounds="dp"`` the bounds are learned in ``fit``, which reads X and so is a release: every ``fit``
    charges ``bounds_epsilon`` (``fit_cost_``) before it reads X, and ``fit_transform`` charges that and
    ``cost_`` as one event. The cost is fixed by the parameters alone, never by the learned bounds. Every
    fit pays: a refit, each copy made by ``clone``, and every fold and candidate of GridSearchCV or
    cross_val_score (whose ``fit_transform`` on a training part is one charge, and each ``transform`` of
    a held-out part another). The learned ``lower_`` and ``upper_`` are differentially private; the noise
    of each ``transform`` is calibrated to them (Δⱼ = upperⱼ − lowerⱼ) at ``epsilon``.

    ``epsilon`` is what one whole ``transform`` costs one row, over all its features: a person's row can
    change every feature at once, so the d features share the budget (see each class's Notes for the split).
    Fit the transformer on the columns that need noise (e.g. inside a ColumnTransformer) to keep d small.

    Under ``clone``, GridSearchCV, cross_val_score and ``n_jobs > 1`` every copy charges the one ledger the
    accountant points to: a PrivacyAccountant on an SQL ledger (``"sqlite:///…"``, PostgreSQL) is copied and
    pickled by its URL. A ``"memory://"`` ledger lives in one process: copies in the same process share it,
    and sending it to worker processes (``n_jobs > 1``) is refused with an error rather than charging a
    copy."""


class ContinuousNoise(DPTransformer):
    """Base of the continuous-noise transformers (see :class:`~dp_pipeline.transformers.LaplaceNoise`).

    Subclasses implement :meth:`_calibrate`, returning the noise plan: one mechanism per feature and the
    release's event.
    """

    _doc_sections: ClassVar[Mapping[str, str]] = {
        "shared_parameters": _SHARED_PARAMETERS,
        "shared_attributes": _SHARED_ATTRIBUTES,
        "release_notes": _RELEASE_NOTES,
    }

    epsilon: Any
    lower: Any
    upper: Any
    bounds: Any
    outer: Any
    bounds_epsilon: Any
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
    ) -> NoisePlan:
        raise NotImplementedError  # pragma: no cover

    def _validate_input(self, X: Any, *, reset: bool) -> NDArray[Any]:
        return self._validate_numeric(X, reset=reset)

    def _names(self, n: int) -> list[str]:
        names = getattr(self, "feature_names_in_", None)
        return [str(name) for name in names] if names is not None else [f"x{j}" for j in range(n)]

    def _resolve_bounds(
        self, X: NDArray[np.float64], joint: bool
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], PrivacyEvent | None]:
        """The bounds in use and the event charged to learn them (None when nothing was charged)."""
        if not (isinstance(self.bounds, str) and self.bounds in _BOUNDS):
            raise InvalidParameterError(
                f"'bounds' must be 'declared', 'data' or 'dp', got {self.bounds!r}", "bounds"
            )
        if self.bounds != "dp":
            unused = [name for name in ("outer", "bounds_epsilon") if getattr(self, name) is not None]
            if unused:
                raise InvalidParameterError(f"{unused[0]!r} is only used with bounds='dp'", unused[0])
        if self.bounds == "declared":
            lower, upper = declared_bounds(
                self.lower, self.upper, self._names(X.shape[1]), required=self._bounds_required
            )
            return lower, upper, None
        if self.lower is not None or self.upper is not None:
            raise InvalidParameterError(
                f"bounds={self.bounds!r} learns lower and upper from X; leave 'lower' and 'upper' as None, "
                "or declare them with bounds='declared'",
                "bounds",
            )
        if self.bounds == "dp":
            return self._learn_bounds(X, joint)
        warnings.warn(
            f"{type(self).__name__}(bounds='data') takes each feature's lower and upper bound from the "
            "minimum and maximum of the training data. Those bounds (and the noise calibrated to them) "
            "depend on individual values and are not differentially private; declare 'lower' and 'upper' "
            "from public knowledge instead, or learn them with bounds='dp'",
            PrivacyLeakWarning,
            stacklevel=4,
        )
        lower, upper = X.min(axis=0), X.max(axis=0)
        flat = np.flatnonzero(upper <= lower)
        if flat.size:
            raise InvalidParameterError(
                f"bounds='data': feature {self._feature_name(int(flat[0]))} is constant in X, so its learned "
                "range is empty; declare its bounds",
                "bounds",
            )
        return lower, upper, None

    def _learn_bounds(
        self, X: NDArray[np.float64], joint: bool
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], PrivacyEvent]:
        """``bounds="dp"``: charge the search (and with ``joint`` the release, priced at the outer range),
        then learn each feature's bounds (see :mod:`dp_pipeline._learned_bounds`)."""
        if self._sensitivity_param and getattr(self, "sensitivity", None) is not None:
            raise InvalidParameterError(
                "bounds='dp' calibrates the noise to the learned bounds; leave 'sensitivity' None",
                "sensitivity",
            )
        names = self._names(X.shape[1])
        outer_lower, outer_upper = check_outer(self.outer, names)
        search = BoundsSearch.plan(self._search_epsilon(), outer_lower, outer_upper, "replace_one")
        # calibrated before the charge, so that a bad parameter charges nothing
        release = self._calibrate(
            outer_lower, outer_upper, declared_sensitivity(None, outer_lower, outer_upper, names)
        )
        what = "fit_transform" if joint else "fit"
        label = f"{type(self).__name__}.{what} (bounds='dp', {X.shape[1]} feature(s))"
        ledger = (self.accountant, self.dataset, label, self.group_size)
        columns = [X[:, j] for j in range(X.shape[1])]
        rng = self._release_rng()
        joint_release = [drawn_event(release.event, rng)] if joint else []
        return search.charge_and_learn(columns, rng, joint_release, ledger)

    def declared_fit_cost(self, joint: bool) -> PrivacyEvent | None:
        """With ``bounds="dp"``: the bound search, ``PureDP(bounds_epsilon)`` (2d quantiles of ε/2d rounded
        down), with ``joint`` composed with one transform's declared cost."""
        if self.bounds != "dp":
            return super().declared_fit_cost(joint)
        search = declared_cost("pure", self._search_epsilon())
        return composite_event([search, self.declared_cost()], "replace_one") if joint else search

    def _search_epsilon(self) -> float:
        """ε of the bound search: ``bounds_epsilon``, or a tenth of ``epsilon``."""
        if self.bounds_epsilon is not None:
            return check_epsilon(self.bounds_epsilon, "bounds_epsilon")
        if self.epsilon is None:
            raise InvalidParameterError(
                "bounds='dp' without 'epsilon' (e.g. with 'mu') needs 'bounds_epsilon', the ε that fit "
                "spends on learning the bounds",
                "bounds_epsilon",
            )
        return search_share(check_epsilon(self.epsilon))[0]

    def _fit_release(self, X: NDArray[Any], joint: bool) -> PrivacyEvent | None:
        lower, upper, charged = self._resolve_bounds(X, joint)
        declared = getattr(self, "sensitivity", None) if self._sensitivity_param else None
        sensitivity = declared_sensitivity(declared, lower, upper, self._names(X.shape[1]))
        plan = self._calibrate(lower, upper, sensitivity)
        self.lower_, self.upper_, self.sensitivity_ = lower, upper, sensitivity
        self.mechanisms_ = list(plan.parts)
        self._one_mechanism = all(m == plan.parts[0] for m in plan.parts[1:])
        self.cost_ = plan.event
        self.noise_std_ = plan.noise_std
        self._clip_log = {"n_clipped": np.zeros(X.shape[1], dtype=np.int64)}
        return charged

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
