"""What every DP transformer shares: the ledger, the random generator, input checks and the release order.

A transformer's ``transform`` is a release. It runs in this order, which is the privacy contract:

1. check the input (shape, dtype, NaN, categories) and prepare it (clip to the declared bounds) — a bad input
   raises InvalidParameterError before anything is charged;
2. charge the release's cost to ``accountant`` under ``dataset`` — a refusal raises BudgetExceededError, and
   nothing is randomised or returned;
3. draw the noise and return the noisy data.

``fit`` reads only the shape, the feature names and the dtypes of X, and charges nothing, unless the
transformer learns something from X with differential privacy (``bounds="dp"``): then ``fit`` is a release
too, charged before it reads X (``fit_cost_``), and ``fit_transform`` charges that and the release of X as
one event.

Each release is charged on its own, just before its noise, also inside a composite estimator (Pipeline,
ColumnTransformer, FeatureUnion): when a later step of a call is refused, the earlier steps stay charged (the
ledger may count more than was released, never less). To charge a call's DP steps all or none, wrap the
composite in :class:`~dp_pipeline.transformers.AllOrNothing`, which points clones of the steps at a
reservation of the call's total.

With ``random_state=None`` a fitted transformer holds no random state: each ``transform`` draws its noise
from a generator keyed from OS entropy at that moment, so copies of the transformer (pickling, ``deepcopy``,
``clone``, joblib workers, ``ColumnTransformer``/``FeatureUnion`` with ``n_jobs > 1``, one saved pipeline
loaded twice) never add the same noise. A seeded transformer (an int or a Generator) keeps its generator
from ``fit``, with a PrivacyLeakWarning: every copy of it repeats its noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils import Tags
from sklearn.utils.validation import check_is_fitted, validate_data

from dp_pipeline._spending import as_spender
from dp_pipeline._splitting import declared_cost
from dp_pipeline._tabular import missing_mask
from dp_pipeline._validation import check_positive_int
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.mechanisms.sampling import drawn_event, kept_rng, release_rng

__all__ = ["DPTransformer"]


class DPTransformer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Base class: each ``transform`` is one release, charged to the ledger before its output exists.

    Subclasses store their keyword-only parameters in ``__init__`` (which must include ``group_size``,
    ``accountant``, ``dataset`` and ``random_state``) and implement :meth:`_validate_input`,
    :meth:`_fit_release` (which sets ``cost_``, and returns the event it charged when it reads X),
    :meth:`_prepare` and :meth:`_randomize`. A family of subclasses shares docstring sections through
    ``_doc_sections``: each ``{name}`` marker in a subclass's docstring is replaced by its text.
    """

    _doc_sections: ClassVar[Mapping[str, str]] = {}

    accountant: Any
    dataset: Any
    group_size: Any
    random_state: Any
    cost_: PrivacyEvent
    fit_cost_: PrivacyEvent | None
    _rng: np.random.Generator | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__doc__:
            for name, text in cls._doc_sections.items():
                cls.__doc__ = cls.__doc__.replace("{" + name + "}", text)

    # -- subclass hooks ---------------------------------------------------------------------------------

    def _validate_input(self, X: Any, *, reset: bool) -> NDArray[Any]:
        raise NotImplementedError  # pragma: no cover

    def _fit_release(self, X: NDArray[Any], joint: bool) -> PrivacyEvent | None:
        """Calibrate the release (set ``cost_``). When fit reads X (``bounds="dp"``), charge that first and
        return the charged event, which includes the release's own cost when ``joint`` (``fit_transform``);
        None when fit reads no values."""
        raise NotImplementedError  # pragma: no cover

    def _prepare(self, X: NDArray[Any]) -> NDArray[Any]:
        return X

    def _randomize(self, X: NDArray[Any], rng: np.random.Generator) -> NDArray[Any]:
        raise NotImplementedError  # pragma: no cover

    def declared_cost(self) -> PrivacyEvent:
        """What one ``transform`` costs at most, from the parameters alone (before ``fit``, whatever the
        number of features): ``PureDP(epsilon)`` for the pure mechanisms (d features get ε/d each, rounded
        down). AllOrNothing and reserve_search reserve it for a step that a call fits first."""
        return declared_cost("pure", getattr(self, "epsilon", None))

    def declared_fit_cost(self, joint: bool) -> PrivacyEvent | None:
        """What ``fit`` (``joint``: ``fit_transform``) charges at most, from the parameters alone; None when
        ``fit`` charges nothing. Without learning from X: nothing, and one transform."""
        return self.declared_cost() if joint else None

    # -- the scikit-learn API ------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None) -> DPTransformer:
        """Check the parameters and X, and calibrate the noise of one release.

        Charges nothing, unless the transformer learns from X with differential privacy (``bounds="dp"``):
        then the learning is charged first, and ``fit_cost_`` is its event.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            The data the transformer will release (only its shape, feature names and dtypes are used,
            unless bounds or categories are learned from the data).
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self._fit(X, joint=False)
        return self

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """Fit to X, then release X with noise: one charge, ``cost_`` (with the learning of ``fit_cost_``
        when the transformer learns from X).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            The data to learn from and release; one row is one person.
        y : None
            Ignored.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The noisy data (a DataFrame after ``set_output(transform="pandas")``).
        """
        array = self._fit(X, joint=True)
        prepared = self._prepare(array)
        rng = self._release_rng()
        if self.fit_cost_ is None:  # fit read no values: the release is charged as any transform
            self._charge(rng)
        return self._randomize(prepared, rng)

    def _fit(self, X: Any, joint: bool) -> NDArray[Any]:
        as_spender(self.accountant, self.dataset)
        check_positive_int(self.group_size, "group_size")
        array = self._validate_input(X, reset=True)
        self._rng = kept_rng(self.random_state, type(self).__name__)
        self.fit_cost_ = self._fit_release(array, joint)
        return array

    def transform(self, X: Any) -> Any:
        """Release X with noise: check X, charge the ledger, then randomise.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            The data to release; one row is one person.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            The noisy data (a DataFrame after ``set_output(transform="pandas")``).

        Raises
        ------
        InvalidParameterError
            For a bad X (nothing is charged).
        BudgetExceededError
            When the ledger refuses the release (nothing is charged, nothing is returned).
        """
        check_is_fitted(self)
        as_spender(self.accountant, self.dataset)
        array = self._prepare(self._validate_input(X, reset=False))
        rng = self._release_rng()
        self._charge(rng)
        return self._randomize(array, rng)

    def _charge(self, rng: np.random.Generator) -> None:
        """Charge one release of ``cost_`` whose noise ``rng`` draws (marked when it is the fast path)."""
        k = check_positive_int(self.group_size, "group_size")
        with as_spender(self.accountant, self.dataset).hold(
            drawn_event(self.cost_, rng), label=self._label(), group_size=k
        ):
            pass  # X was read and checked already: the release is paid now, before its noise is drawn

    def _release_rng(self) -> np.random.Generator:
        """The kept generator of a seeded transformer, else a fresh one keyed from OS entropy now."""
        if self.random_state is not None and self._rng is not None:
            return self._rng
        return release_rng(None, type(self).__name__)

    def _label(self) -> str:
        return f"{type(self).__name__}.transform ({self.n_features_in_} feature(s))"

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True  # every transform draws fresh noise
        tags.input_tags.allow_nan = False
        return tags

    # -- helpers for subclasses -------------------------------------------------------------------------

    def _validate_data(self, X: Any, **kwargs: Any) -> NDArray[Any]:
        """scikit-learn's ``validate_data``; its refusals are InvalidParameterErrors naming X, without the
        data its messages quote (:func:`_without_values`)."""
        refusal: InvalidParameterError | None = None
        try:
            array: NDArray[Any] = validate_data(self, X, **kwargs)
        except ValueError as exc:
            if isinstance(exc, InvalidParameterError):
                raise
            text = _without_values(str(exc))
            if text.startswith("could not convert"):  # numpy's message quotes the value
                message = "X must be numeric: some values cannot be read as numbers"
            elif "0 sample" in text or "0 feature" in text:
                message = f"X is empty: {text}"
            else:
                message = f"X: {text}"
            refusal = InvalidParameterError(message, "X")
        if refusal is not None:  # raised outside the handler: the original error may quote the data
            raise refusal
        return array

    def _feature_name(self, j: int) -> str:
        names = getattr(self, "feature_names_in_", None)
        return f"{names[j]!r}" if names is not None else f"x{j} (column {j})"

    def _check_missing(self, X: NDArray[Any]) -> None:
        """InvalidParameterError naming the first feature with a missing value."""
        if X.dtype.kind == "f":
            with np.errstate(over="ignore", invalid="ignore"):
                if np.isfinite(X.sum()):  # fast path: a NaN or an infinity would make the sum non-finite
                    return
            bad = ~np.isfinite(X).all(axis=0)
        else:
            bad = np.array([missing_mask(X[:, j]).any() for j in range(X.shape[1])], dtype=bool)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise InvalidParameterError(
                f"X: feature {self._feature_name(j)} contains NaN, infinite or missing values; impute or "
                "drop them before the release (missingness itself would be released otherwise)",
                "X",
            )

    def _validate_numeric(self, X: Any, *, reset: bool) -> NDArray[np.float64]:
        """X as a finite float64 array; non-numeric columns and NaN are refused, naming the feature."""
        dtypes = getattr(X, "dtypes", None)
        columns = getattr(X, "columns", None)
        if dtypes is not None and columns is not None and hasattr(dtypes, "__iter__"):
            bad = [
                str(c) for c, t in zip(columns, dtypes, strict=False) if getattr(t, "kind", "O") not in "biuf"
            ]
            if bad:
                raise InvalidParameterError(
                    f"X: feature(s) {bad} are not numeric; {type(self).__name__} adds noise to numbers "
                    "(encode categories with KRandomizedResponseEncoder, or select the numeric columns "
                    "with a ColumnTransformer)",
                    "X",
                )
        try:
            array = self._validate_data(X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        except TypeError as exc:  # a type or a sparse matrix: no value quoted
            text = str(exc)
            if not ("convert" in text or "argument must be" in text):
                raise
            raise InvalidParameterError(f"X must be numeric: {text}", "X") from exc
        self._check_missing(array)
        return array


def _without_values(message: str) -> str:
    """A scikit-learn validation message on one line, without the data it quotes: the array printed after
    "Complex data not supported", and "array=…" (one or more lines) up to "Reshape your data"."""
    lines = message.split("\n")
    if lines[0].startswith("Complex data not supported"):
        return lines[0]
    kept: list[str] = []
    quoting = False
    for line in lines:
        quoting = line.startswith("array=") or (quoting and not line.startswith("Reshape"))
        if not quoting and line.strip():
            kept.append(line.strip())
    return " ".join(kept).rstrip(": ")
