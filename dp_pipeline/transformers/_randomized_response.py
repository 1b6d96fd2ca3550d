"""Transformers that randomise categorical features: binary and k-ary randomized response."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import partial
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.utils import Tags

from dp_pipeline._splitting import basic_composition
from dp_pipeline._tabular import learn_categories, missing_mask
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError, data_value_error
from dp_pipeline.mechanisms import BinaryRandomizedResponse, KRandomizedResponse, sampling
from dp_pipeline.transformers._base import DPTransformer

__all__ = ["KRandomizedResponseEncoder", "RandomizedResponseEncoder"]

_LEDGER_PARAMETERS = """group_size : int, default 1
        k ≥ 1: one person contributes up to k rows, and every ``transform`` is charged for a group of k
        (the ledger scales the sensitivity of Laplace and Gaussian noise by k, exact, and uses group privacy
        otherwise). Shown with the charge in refusals and the history.
    accountant : PrivacyAccountant or "unaccounted"
        The ledger every release is charged to; ``"unaccounted"`` is the explicit opt-out.
    dataset : str
        The dataset (the budget) the releases are charged to.
    random_state : None, int or numpy.random.Generator
        None (default): every ``transform`` draws from a generator keyed from OS entropy at that moment, and
        the fitted encoder holds no random state, so its copies (pickling, ``deepcopy``, joblib workers,
        ``n_jobs > 1``) never share randomness. A seed or a Generator is kept from ``fit`` and raises
        PrivacyLeakWarning: every copy of the fitted encoder repeats its reports. For tests only."""

_RELEASE_NOTES = """The privacy unit is one row (one person). Each ``transform`` is one release: X is checked,
    the cost ``cost_`` is charged to ``accountant`` under ``dataset``, and only then is X randomised. A bad X
    raises InvalidParameterError and a refused charge raises BudgetExceededError; in both cases nothing is
    charged and nothing is returned. ``fit`` charges nothing. Copies made by ``clone``, GridSearchCV or joblib
    workers charge the same ledger (see :class:`LaplaceNoise`)."""


class _ResponseEncoder(DPTransformer):
    """Base of the randomized-response encoders: one mechanism per feature at ε/d, and unknown values.

    A value the mechanism of its feature cannot randomise (not 0/1, not a declared category, or missing) is
    refused with ``handle_unknown="error"``, naming the feature before anything is charged, and reported
    uniformly at random with ``handle_unknown="uniform"``. Subclasses implement :meth:`_mechanisms`,
    :meth:`_answers`, :meth:`_uniform` and :meth:`_hint`.
    """

    _doc_sections: ClassVar[Mapping[str, str]] = {
        "ledger_parameters": _LEDGER_PARAMETERS,
        "release_notes": _RELEASE_NOTES,
    }
    _unknown: ClassVar[str]  # what the values a mechanism cannot randomise are, in the refusal
    _string_input: ClassVar[bool] = False
    _preserves_dtype: ClassVar[tuple[str, ...]] = ()

    epsilon: Any
    handle_unknown: Any
    mechanisms_: list[Any]

    def _mechanisms(self, X: NDArray[Any], share: float) -> list[Any]:
        """One mechanism per feature of X, each ``share``-DP."""
        raise NotImplementedError  # pragma: no cover

    def _answers(self, X: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        """What the mechanisms randomise, and where X holds a value they can randomise."""
        raise NotImplementedError  # pragma: no cover

    def _uniform(self, mechanism: Any, rng: np.random.Generator, n: int) -> NDArray[Any]:
        """``n`` reports drawn uniformly over the mechanism's answers."""
        raise NotImplementedError  # pragma: no cover

    def _hint(self, j: int) -> str:
        """What feature j must hold, for the refusal of its unknown values."""
        raise NotImplementedError  # pragma: no cover

    def _validate_input(self, X: Any, *, reset: bool) -> NDArray[Any]:
        array: NDArray[Any] = self._validate_data(X, reset=reset, dtype=None, ensure_all_finite=False)
        return array

    def _fit_release(self, X: NDArray[Any], joint: bool) -> PrivacyEvent | None:
        _check_handle_unknown(self.handle_unknown)
        release = basic_composition(self.epsilon, X.shape[1], partial(self._mechanisms, X))
        self.mechanisms_, self.cost_ = list(release.parts), release.event
        return None  # fit charges nothing (categories="data" warns instead)

    def _prepare(self, X: NDArray[Any]) -> NDArray[Any]:
        if self.handle_unknown == "error":
            known = self._answers(X)[1]
            bad = ~known.all(axis=0)
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                values = X[:, j][~known[:, j]]
                what = "missing" if missing_mask(values).any() else self._unknown
                where = f"X: feature {self._feature_name(j)}"
                raise data_value_error(where, values.size, what, "X", self._hint(j))
        return X

    def _randomize(self, X: NDArray[Any], rng: np.random.Generator) -> NDArray[Any]:
        answers, known = self._answers(X)
        columns = [
            self._report(mechanism, answers[:, j], known[:, j], rng)
            for j, mechanism in enumerate(self.mechanisms_)
        ]
        dtypes = {c.dtype for c in columns}
        dtype = dtypes.pop() if len(dtypes) == 1 else np.dtype(object)
        result = np.empty(X.shape, dtype=dtype)
        for j, column in enumerate(columns):
            result[:, j] = column
        return result

    def _report(
        self, mechanism: Any, answers: NDArray[Any], known: NDArray[np.bool_], rng: np.random.Generator
    ) -> NDArray[Any]:
        """One feature's reports: the mechanism's for the known values, uniform ones for the others."""
        if known.all():
            return np.asarray(mechanism.randomize(answers, rng))
        out = np.empty(answers.shape, dtype=object)
        if known.any():
            out[known] = mechanism.randomize(answers[known], rng)
        out[~known] = self._uniform(mechanism, rng, int((~known).sum()))
        return out

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = self._string_input
        assert tags.transformer_tags is not None
        tags.transformer_tags.preserves_dtype = list(self._preserves_dtype)
        return tags


def _check_handle_unknown(value: Any) -> None:
    if value not in ("error", "uniform"):
        raise InvalidParameterError(
            f"'handle_unknown' must be 'error' or 'uniform', got {value!r}", "handle_unknown"
        )


class RandomizedResponseEncoder(_ResponseEncoder):
    """Binary randomized response on 0/1 (or boolean) features; ε-DP per ``transform``.

    Parameters
    ----------
    epsilon : float
        ε > 0 of one whole ``transform`` (the whole row).
    variant : {"spinner", "spinner_coin"}
        Which randomized response describes the mechanism (both give the same output distribution at the
        same ε; see :class:`~dp_pipeline.mechanisms.BinaryRandomizedResponse`).
    handle_unknown : {"error", "uniform"}
        A value other than 0/1 or True/False (including a missing value). ``"error"`` (default) raises
        InvalidParameterError naming the feature, before anything is charged. ``"uniform"`` reports a fair
        coin instead, which keeps the release ε-DP (see Notes).
    {ledger_parameters}

    Attributes
    ----------
    mechanisms_ : list of BinaryRandomizedResponse
        The mechanism that randomises each feature.
    cost_ : PrivacyEvent
        What one ``transform`` costs one row.
    fit_cost_ : None
        None: ``fit`` charges nothing.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names seen in ``fit`` (only when X has string column names).

    Notes
    -----
    Each value is reported truthfully with probability p = e^{ε'}/(1 + e^{ε'}) and flipped otherwise, with
    ε' = ε/d for d features (rounded down): each feature is ε'-DP and the row is ε-DP by basic composition
    (exact here: the worst-case report ratios multiply). With ``handle_unknown="uniform"`` an unknown value is
    reported as 1 with probability 1/2; since p/(1/2) ≤ e^{ε'} and (1/2)/(1 − p) ≤ e^{ε'}, the release stays
    ε'-DP per feature on the domain extended by "unknown".

    The output has the input's dtype when that is bool, integer or float, and holds 0/1 as int64 otherwise.
    Estimate the true share of 1s from the reports with :func:`dp_pipeline.estimation.rr_share` and
    ``mechanisms_[j]``.

    {release_notes}

    References
    ----------
    Warner, "Randomized response: a survey technique for eliminating evasive answer bias", JASA 60(309), 1965.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        variant: str = "spinner",
        handle_unknown: str = "error",
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.variant = variant
        self.handle_unknown = handle_unknown
        self.group_size = group_size
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    _unknown = "not 0/1"
    _preserves_dtype = ("float64", "float32")

    mechanisms_: list[BinaryRandomizedResponse]

    def _mechanisms(self, X: NDArray[Any], share: float) -> list[Any]:
        return [
            BinaryRandomizedResponse(epsilon=share, variant=self.variant)  # type: ignore[arg-type]
            for _ in range(X.shape[1])
        ]

    def _answers(self, X: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        codes = _binary_codes(X)
        return codes, codes >= 0

    def _uniform(self, mechanism: Any, rng: np.random.Generator, n: int) -> NDArray[Any]:
        return sampling.bernoulli(rng, 0.5, (n,))  # exact: 1/2 = 2⁵²·2⁻⁵³

    def _hint(self, j: int) -> str:
        return (
            "it must hold only 0/1 or True/False (use KRandomizedResponseEncoder for labelled answers, or "
            "handle_unknown='uniform')"
        )

    def _randomize(self, X: NDArray[Any], rng: np.random.Generator) -> NDArray[Any]:
        dtype = X.dtype if X.dtype.kind in "biuf" else np.dtype(np.int64)
        return super()._randomize(X, rng).astype(dtype)


def _binary_codes(X: NDArray[Any]) -> NDArray[np.int8]:
    """1 where X is 1/True, 0 where it is 0/False, −1 anywhere else (NaN, None, other values)."""
    if X.dtype.kind == "b":
        return X.astype(np.int8)
    values = X if X.dtype.kind in "iufO" else X.astype(object)
    with np.errstate(invalid="ignore"):
        ones, zeros = values == 1, values == 0
    return np.where(ones, 1, np.where(zeros, 0, -1)).astype(np.int8)


def _is_per_feature(categories: Any) -> bool:
    """Categories per feature: a list whose items are all lists or 1-d arrays (tuples are categories)."""
    return (
        isinstance(categories, (list, tuple))
        and len(categories) > 0
        and all(isinstance(c, (list, np.ndarray)) for c in categories)
    )


class KRandomizedResponseEncoder(_ResponseEncoder):
    """k-ary randomized response (k-RR) on features with declared categories; ε-DP per ``transform``.

    Parameters
    ----------
    epsilon : float
        ε > 0 of one whole ``transform`` (the whole row).
    categories : list, list of lists or "data"
        The possible values, declared without looking at the data: one list shared by every feature, or one
        list per feature (a list of lists or 1-d arrays, as in OneHotEncoder; tuples count as categories).
        ``"data"`` takes each feature's categories from the values seen in ``fit``; that reveals which values
        occur (a rare category can single out a person) and raises PrivacyLeakWarning.
    handle_unknown : {"error", "uniform"}
        A value that is not a declared category (including a missing value). ``"error"`` (default) raises
        InvalidParameterError naming the feature, before anything is charged. ``"uniform"`` reports a
        category drawn uniformly at random instead, which keeps the release ε-DP (see Notes).
    {ledger_parameters}

    Attributes
    ----------
    categories_ : list of tuples
        The categories of each feature, in the order the mechanisms use.
    mechanisms_ : list of KRandomizedResponse
        The mechanism that randomises each feature.
    cost_ : PrivacyEvent
        What one ``transform`` costs one row.
    fit_cost_ : None
        None: ``fit`` charges nothing.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Feature names seen in ``fit`` (only when X has string column names).

    Notes
    -----
    With d features and kⱼ categories, each value is reported truthfully with probability
    p = e^{ε'}/(e^{ε'} + kⱼ − 1) and as each other category with q = 1/(e^{ε'} + kⱼ − 1), with ε' = ε/d
    (rounded down): each feature is ε'-DP and the row ε-DP by basic composition.

    ``handle_unknown="uniform"`` is ε'-DP on the domain extended by "unknown": the report of an unknown value
    has probability 1/k for every category, and p/(1/k) = k e^{ε'}/(e^{ε'} + k − 1) ≤ e^{ε'} and
    (1/k)/q = (e^{ε'} + k − 1)/k ≤ e^{ε'}.

    The output is an array of categories (dtype object unless every feature's categories share one numpy
    dtype). Estimate the distribution from the reports with :func:`dp_pipeline.estimation.krr_counts` and
    ``mechanisms_[j]``.

    {release_notes}

    References
    ----------
    Kairouz, Oh & Viswanath, "Extremal mechanisms for local differential privacy", JMLR 17, 2016.
    Wang, Blocki, Li & Jha, "Locally differentially private protocols for frequency estimation", USENIX
    Security 2017.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        categories: Any = None,
        handle_unknown: str = "error",
        group_size: int = 1,
        accountant: Any = None,
        dataset: str | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.categories = categories
        self.handle_unknown = handle_unknown
        self.group_size = group_size
        self.accountant = accountant
        self.dataset = dataset
        self.random_state = random_state

    _unknown = "not a declared category"
    _string_input = True

    categories_: list[tuple[Hashable, ...]]
    mechanisms_: list[KRandomizedResponse]

    def _declared_categories(self, X: NDArray[Any]) -> list[Any]:
        d = X.shape[1]
        categories = self.categories
        if isinstance(categories, str) and categories == "data":
            return learn_categories(
                (X[:, j] for j in range(d)),
                "KRandomizedResponseEncoder(categories='data') takes the categories from the values seen in "
                "fit; which values occur is not differentially private. Declare the categories instead",
                stacklevel=6,  # DPTransformer.fit, as for the other warnings of fit
            )
        if categories is None or isinstance(categories, str):
            raise InvalidParameterError(
                "declare 'categories': the possible values (one list, or one list per feature), known "
                "without looking at the data; categories='data' learns them with a PrivacyLeakWarning. "
                f"Got {categories!r}",
                "categories",
            )
        if _is_per_feature(categories):
            if len(categories) != d:
                raise InvalidParameterError(
                    f"'categories' has {len(categories)} lists but X has {d} feature(s)", "categories"
                )
            return list(categories)
        return [categories] * d

    def _mechanisms(self, X: NDArray[Any], share: float) -> list[Any]:
        mechanisms = []
        for j, cats in enumerate(self._declared_categories(X)):
            try:
                mechanisms.append(KRandomizedResponse(epsilon=share, categories=cats))
            except InvalidParameterError as exc:
                raise InvalidParameterError(
                    f"'categories' of feature {self._feature_name(j)}: {exc}", "categories"
                ) from None
        return mechanisms

    def _fit_release(self, X: NDArray[Any], joint: bool) -> PrivacyEvent | None:
        charged = super()._fit_release(X, joint)
        self.categories_ = [m.categories for m in self.mechanisms_]
        return charged

    def _answers(self, X: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        known = [_known(X[:, j], mechanism) for j, mechanism in enumerate(self.mechanisms_)]
        return X, np.column_stack(known)

    def _uniform(self, mechanism: Any, rng: np.random.Generator, n: int) -> NDArray[Any]:
        # exactly uniform over the k categories: an offset uniform in {1, …, k} (of k + 1), less 1
        picks = sampling.other_offset(rng, mechanism.k + 1, n) - 1
        return _object_array(mechanism.categories)[picks]

    def _hint(self, j: int) -> str:
        categories = list(self.mechanisms_[j].categories)
        if isinstance(self.categories, str):  # learned from the data in fit: data values, never shown
            return f"its {len(categories)} categories were learned in fit; pass handle_unknown='uniform'"
        return f"its categories are {categories[:10]}. Declare them, or pass handle_unknown='uniform'"


def _object_array(categories: tuple[Hashable, ...]) -> NDArray[Any]:
    """The categories as a 1-d object array (tuples stay single entries)."""
    out = np.empty(len(categories), dtype=object)
    out[:] = list(categories)
    return out


def _known(column: NDArray[Any], mechanism: KRandomizedResponse) -> NDArray[np.bool_]:
    """Which values of a column are declared categories of the mechanism."""
    index = set(mechanism.categories)

    def known(value: Any) -> bool:
        try:
            return value in index and not (isinstance(value, float) and value != value)
        except TypeError:
            return False

    if column.dtype.kind != "O":
        uniques, inverse = np.unique(column, return_inverse=True)
        return np.array([known(u) for u in uniques.tolist()], dtype=bool)[inverse.ravel()]
    return np.fromiter(map(known, column), dtype=bool, count=column.size)
