"""Randomized response: binary (spinner, spinner + coin) and k-ary (k-RR), for the local model.

Each respondent randomises their own answer before it leaves their hands; the report itself is the release.
Both mechanisms are ε-LDP: for every pair of true answers t, t' and every report y,
P(y | t) ≤ e^ε P(y | t').

Multiple-choice answers
-----------------------
A multiple-choice answer with m items (tick every box that applies) is randomised item by item: encode it as
m bits (shape ``(n, m)`` for n respondents) and pass the whole array to
:meth:`BinaryRandomizedResponse.randomize`, which randomises every bit independently with the same p. Each
item is ε-DP; one person's answer changing between two values that differ in c items changes c independent
ε-DP releases, so the whole answer is cε-DP (basic composition, which is tight here: the worst-case report
ratio multiplies to e^{cε}). For an unrestricted answer c = m; for "tick exactly one of m" c = 2.
:meth:`BinaryRandomizedResponse.multiple_choice_guarantee` returns that guarantee; an accountant can be
charged with it, or with the per-item mechanism c times for tight composition. Each column is estimated
separately by :func:`dp_pipeline.estimation.rr_share` (vectorised along ``axis=0``).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Hashable, Iterable, Mapping
from typing import Annotated, Any, Literal, NoReturn

import numpy as np
from numpy.typing import NDArray
from pydantic import BeforeValidator, Field

from dp_pipeline._exact import times_up
from dp_pipeline._validation import FiniteFloat, check_positive_int
from dp_pipeline.exceptions import InvalidParameterError, data_value_error
from dp_pipeline.guarantees import PureDP
from dp_pipeline.mechanisms import sampling
from dp_pipeline.mechanisms._base import Mechanism

__all__ = ["BinaryRandomizedResponse", "KRandomizedResponse", "check_binary"]

_SHOWN = 5  # how many offending values an error message lists


def _krr_probabilities(epsilon: float, k: int) -> tuple[float, float, float]:
    """(p, q, p − q) of k-RR, without overflow for large ε and without cancellation for small ε.

    p = e^ε/(e^ε + k − 1) = 1/(1 + (k − 1)e^{−ε}), q = e^{−ε}/(1 + (k − 1)e^{−ε}),
    p − q = (1 − e^{−ε})/(1 + (k − 1)e^{−ε}) = −expm1(−ε)/(1 + (k − 1)e^{−ε}).
    """
    tail = math.exp(-epsilon)
    denominator = 1.0 + (k - 1) * tail
    return 1.0 / denominator, tail / denominator, -math.expm1(-epsilon) / denominator


def _shown(values: Iterable[Any]) -> str:
    items = list(values)
    text = ", ".join(repr(v) for v in items[:_SHOWN])
    return f"[{text}{', …' if len(items) > _SHOWN else ''}]"


def check_binary(values: Any, name: str) -> NDArray[Any]:
    """``values`` as an array of 0/1 (bool, integer or float dtype), else InvalidParameterError naming it.

    The check of binary reports, shared by the binary mechanisms and their estimators
    (:mod:`dp_pipeline.estimation`); an error counts the offending values and never quotes them.
    """
    if isinstance(values, (str, bytes)):
        raise InvalidParameterError(f"{name!r} must hold 0/1 or booleans, got a string", name)
    try:
        array = np.asarray(values)
    except (TypeError, ValueError):
        message = f"{name!r} must be an array-like of 0/1 or booleans (a ragged or unreadable sequence)"
        raise InvalidParameterError(message, name) from None
    if array.dtype.kind not in "biuf":
        message = f"{name!r} must hold 0/1 or booleans, got dtype {array.dtype} (no missing values)"
        raise InvalidParameterError(message, name)
    if array.size == 0:
        raise InvalidParameterError(f"{name!r} is empty", name)
    if array.dtype.kind != "b":
        bad = (array != 0) & (array != 1)
        if np.any(bad):
            raise data_value_error(repr(name), int(np.count_nonzero(bad)), "not 0/1 or booleans", name)
    return array


class BinaryRandomizedResponse(Mechanism):
    """Binary randomized response (Warner's spinner), ε-LDP for a yes/no answer.

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    variant : {"spinner", "spinner_coin"}
        ``"spinner"`` (default): report the truth with probability p, otherwise the opposite answer;
        ε = ln(p/(1 − p)), so p = e^ε/(1 + e^ε).
        ``"spinner_coin"``: report the truth with probability p, otherwise the outcome of a fair coin;
        P(yes | yes) = p + (1 − p)/2 and P(yes | no) = (1 − p)/2, whose ratio is e^ε for
        p = (e^ε − 1)/(e^ε + 1) = tanh(ε/2).

    Notes
    -----
    Both variants report the truth with probability p_true = e^ε/(1 + e^ε) and the other answer with
    p_other = 1/(1 + e^ε); at the same ε they are the same output distribution and differ only in what
    :attr:`p` means (the spinner's probability of the truthful sector). The worst-case ratio
    P(y | t)/P(y | t') = p_true/p_other = e^ε for t ≠ t' = y, so the release is ε-LDP (``PureDP(ε)``) and no
    smaller ε holds.

    ``randomize`` takes any array-like of 0/1 or booleans (int, float or bool dtype) and returns an array of
    the same shape and dtype (bools stay bools, 0/1 integers stay integers of the same dtype); a scalar gives
    a Python scalar. Every entry is randomised independently, which is how a multiple-choice answer is
    randomised item by item (see :meth:`multiple_choice_guarantee`).

    Secure path (default): a CSPRNG (AES-128 counter mode) and an exact Bernoulli: a lazy uniform is
    compared with rational bounds of p_true = e^ε/(1 + e^ε), with more random bits drawn while they do not
    decide, so P(report = truth) is e^ε/(1 + e^ε) exactly and the ratio is exactly e^ε (a float threshold
    would make it e^ε only to within 2⁻⁵³ of p_other). Fast path (``rng=fast_rng(...)``, PCG64): one float64
    uniform compared with p_other rounded up to the uniform's 2⁻⁵³ grid, so the ratio stays at most e^ε
    (:func:`~dp_pipeline.mechanisms.sampling.randomized_response_offsets`).

    References
    ----------
    Warner, "Randomized response: a survey technique for eliminating evasive answer bias", JASA 60(309), 1965.
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014, §3.2 (the coin variant at
    p = 1/2 is ln 3-DP).

    Examples
    --------
    >>> round(BinaryRandomizedResponse(epsilon=math.log(3.0), variant="spinner").p, 12)
    0.75
    >>> round(BinaryRandomizedResponse(epsilon=math.log(3.0), variant="spinner_coin").p, 12)
    0.5
    """

    event_kind = "randomized_response"
    event_relation = "replace_one"
    epsilon: FiniteFloat = Field(gt=0.0)
    variant: Literal["spinner", "spinner_coin"] = "spinner"

    @property
    def p(self) -> float:
        """The spinner's truthful sector: e^ε/(1 + e^ε) (spinner), (e^ε − 1)/(e^ε + 1) (spinner_coin)."""
        if self.variant == "spinner":
            return self.p_true
        return self.p_true_minus_other

    @property
    def p_true(self) -> float:
        """P(report = truth) = e^ε/(1 + e^ε), for both variants."""
        return _krr_probabilities(self.epsilon, 2)[0]

    @property
    def p_other(self) -> float:
        """P(report = the other answer) = 1/(1 + e^ε), for both variants."""
        return _krr_probabilities(self.epsilon, 2)[1]

    @property
    def p_true_minus_other(self) -> float:
        """p_true − p_other = (e^ε − 1)/(e^ε + 1) = tanh(ε/2), without cancellation."""
        return math.tanh(self.epsilon / 2.0)

    @property
    def guarantee(self) -> PureDP:
        """ε-LDP for one answer."""
        return PureDP(self.epsilon)

    def multiple_choice_guarantee(self, changed_items: int) -> PureDP:
        """The guarantee of a multiple-choice answer randomised item by item.

        Parameters
        ----------
        changed_items : int
            The most items c that one person's change of answer can flip (m for an unrestricted answer with
            m items, 2 for "tick exactly one").

        Returns
        -------
        PureDP
            cε-DP (the product rounded up): the c changed items are c independent ε-DP releases (basic
            composition, tight here).
        """
        return PureDP(times_up(check_positive_int(changed_items, "changed_items"), self.epsilon))

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"categories": 2, "p_true": self.p_true, "p_other": self.p_other}

    def pmf(self, y: Any, t: Any) -> Any:
        """P(report = y | truth = t): p_true if y = t else p_other; y, t are 0/1 or bools, broadcast."""
        y_array = check_binary(y, "y").astype(bool)
        t_array = check_binary(t, "t").astype(bool)
        try:
            same = np.equal(y_array, t_array)
        except ValueError as exc:
            raise InvalidParameterError(f"'y' and 't' do not broadcast: {exc}", "y") from None
        out = np.where(same, self.p_true, self.p_other)
        return float(out) if out.ndim == 0 else out

    def randomize(self, values: Any, rng: sampling.RNGLike = None) -> Any:
        """Randomise every entry of ``values`` (0/1 or bools) independently; same shape and dtype out."""
        array = check_binary(values, "values")
        generator = sampling.make_rng(rng)
        if sampling.is_fast(generator):
            flip = sampling.randomized_response_offsets(generator, self.epsilon, 2, array.shape)
        else:
            flip = (~sampling.truthful(generator, self.epsilon, 2, array.size)).astype(np.intp)
            flip = flip.reshape(array.shape)
        out = np.not_equal(array != 0, flip != 0).astype(array.dtype)
        return out.item() if out.ndim == 0 else out


def _check_categories(value: Any) -> tuple[Hashable, ...]:
    """Categories as a tuple of distinct hashable Python values (numpy scalars unwrapped), at least two."""
    if isinstance(value, (str, bytes, set, frozenset, Mapping)):
        raise ValueError(
            f"must be an ordered collection (list, tuple, array) of categories, got {type(value).__name__}"
        )
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ValueError(f"must be one-dimensional, got an array of shape {value.shape}")
        value = value.tolist()
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"must be a list or tuple of categories, got {type(value).__name__}") from None
    categories = tuple(item.item() if isinstance(item, np.generic) else item for item in items)
    for item in categories:
        try:
            hash(item)
        except TypeError:
            kind = type(item).__name__
            raise ValueError(f"categories must be hashable, got {item!r} of type {kind}") from None
        if isinstance(item, numbers.Real) and not isinstance(item, numbers.Integral) and math.isnan(item):
            raise ValueError("categories must not contain NaN (NaN is not equal to itself)")
    if len(categories) < 2:
        raise ValueError(f"needs at least 2 categories, got {len(categories)}")
    if len(set(categories)) != len(categories):
        seen: set[Hashable] = set()
        duplicates = []
        for c in categories:
            if c in seen:
                duplicates.append(c)
            seen.add(c)
        raise ValueError(
            "categories must be distinct (values that compare equal, e.g. 1, 1.0 and True, count as one); "
            f"duplicates {_shown(duplicates)}"
        )
    return categories


def _known(value: Any, index: Mapping[Hashable, int]) -> bool:
    try:
        return value in index
    except TypeError:  # unhashable
        return False


def _is_tuple_like(item: Any) -> bool:
    return isinstance(item, tuple)


def _category_array(categories: tuple[Hashable, ...]) -> NDArray[Any]:
    """The categories as a numpy array: a natural dtype when all are str, all bool, all int or all float."""
    kinds = set()
    for c in categories:
        if isinstance(c, bool):
            kinds.add("bool")
        elif isinstance(c, int):
            kinds.add("int")
        elif isinstance(c, float):
            kinds.add("float")
        elif isinstance(c, str):
            kinds.add("str")
        else:
            kinds.add("other")
    if len(kinds) == 1 and "other" not in kinds:
        natural = np.array(categories)
        if natural.ndim == 1 and natural.dtype != object:
            return natural
    out = np.empty(len(categories), dtype=object)
    for i, c in enumerate(categories):
        out[i] = c
    return out


class KRandomizedResponse(Mechanism):
    """k-ary randomized response (k-RR, generalised randomized response), ε-LDP for a categorical answer.

    Report the true category with probability p, otherwise one of the other k − 1 categories uniformly
    (probability q each), with p + (k − 1)q = 1.

    Parameters
    ----------
    epsilon : float
        Privacy-loss bound ε > 0.
    categories : sequence of hashable
        The k ≥ 2 possible answers, of any hashable type (str, int, tuple, mixed), distinct (values that
        compare equal, such as 1, 1.0 and True, count as one). Stored as a tuple; NaN is refused.

    Notes
    -----
    p = e^ε/(e^ε + k − 1), q = (1 − p)/(k − 1) = 1/(e^ε + k − 1). For t ≠ t' the worst-case report ratio
    P(t | t)/P(t | t') = p/q = e^ε, so the release is ε-LDP (``PureDP(ε)``) and no smaller ε holds.

    Unbiased counts from N reports of which N_v say v (:meth:`estimate_counts`): E[N_v] = p n_v + q(N − n_v),
    so n̂_v = (N_v − Nq)/(p − q). :func:`dp_pipeline.estimation.krr_counts` adds variances and intervals.

    ``randomize`` takes a category or an array-like of categories (list, nested list, numpy array, pandas
    Series) and returns the category (scalar in) or a numpy array of categories of the input's shape. The
    output dtype is the natural one when all categories are str, all int, all float or all bool, and object
    otherwise. With tuple categories, pass a flat list of tuples or a numpy object array. Values are mapped
    to category indices through a dict (after ``numpy.unique`` for non-object arrays); each value then takes
    one uniform draw that picks the offset j of the report from the truth (j = 0 with probability p, each
    other j with probability q).

    Secure path (default): a CSPRNG (AES-128 counter mode); the truth is kept with probability exactly
    p = e^ε/(e^ε + k − 1) (a lazy uniform against rational bounds of p), otherwise the offset is uniform on
    {1, …, k − 1} (numpy's unbiased bounded integers). Fast path (``rng=fast_rng(...)``, PCG64): the truth
    is replaced when a float64 uniform falls below (k − 1)q rounded up to its 2⁻⁵³ grid, so every ratio
    stays at most e^ε (:func:`~dp_pipeline.mechanisms.sampling.randomized_response_offsets`).

    References
    ----------
    Kairouz, Oh & Viswanath, "Extremal mechanisms for local differential privacy", JMLR 17, 2016.
    Wang, Blocki, Li & Jha, "Locally differentially private protocols for frequency estimation",
    USENIX Security 2017 (the unbiased estimator and its variance).

    Examples
    --------
    >>> m = KRandomizedResponse(epsilon=math.log(3.0), categories=["yes", "no"])
    >>> round(m.p, 12), round(m.q, 12)
    (0.75, 0.25)
    """

    event_kind = "randomized_response"
    event_relation = "replace_one"
    epsilon: FiniteFloat = Field(gt=0.0)
    categories: Annotated[tuple[Any, ...], BeforeValidator(_check_categories)]

    @property
    def k(self) -> int:
        """The number of categories."""
        return len(self.categories)

    @property
    def p(self) -> float:
        """P(report = truth) = e^ε/(e^ε + k − 1)."""
        return _krr_probabilities(self.epsilon, self.k)[0]

    @property
    def q(self) -> float:
        """P(report = a given other category) = (1 − p)/(k − 1) = 1/(e^ε + k − 1)."""
        return _krr_probabilities(self.epsilon, self.k)[1]

    @property
    def p_minus_q(self) -> float:
        """p − q = (e^ε − 1)/(e^ε + k − 1), computed without cancellation; the estimators divide by it."""
        return _krr_probabilities(self.epsilon, self.k)[2]

    @property
    def guarantee(self) -> PureDP:
        """ε-LDP for one answer."""
        return PureDP(self.epsilon)

    def _event_parameters(self) -> dict[str, float | int | str]:
        return {"categories": self.k, "p_true": self.p, "p_other": self.q}

    @functools.cached_property
    def _index(self) -> dict[Hashable, int]:
        return {c: i for i, c in enumerate(self.categories)}

    @functools.cached_property
    def _array(self) -> NDArray[Any]:
        return _category_array(self.categories)

    @functools.cached_property
    def _tuple_categories(self) -> bool:
        return any(_is_tuple_like(c) for c in self.categories)

    def _as_array(self, values: Any, name: str) -> NDArray[Any]:
        if hasattr(values, "__array__"):
            try:
                return np.asarray(values)
            except (TypeError, ValueError):
                raise InvalidParameterError(f"{name!r} is not array-like", name) from None
        if self._tuple_categories and isinstance(values, (list, tuple)):
            array = np.empty(len(values), dtype=object)
            for i, v in enumerate(values):
                array[i] = v
            return array
        try:
            return np.asarray(values, dtype=object)
        except (TypeError, ValueError):
            raise InvalidParameterError(f"{name!r} is not array-like (ragged?)", name) from None

    def _indices(self, values: Any, name: str) -> NDArray[np.intp]:
        """Category indices of ``values`` (same shape; 0-d for one category), else InvalidParameterError."""
        index = self._index
        try:
            if not isinstance(values, np.ndarray) and values in index:
                return np.asarray(index[values], dtype=np.intp)
        except TypeError:  # unhashable: a list, an array-like
            pass
        array = self._as_array(values, name)
        if array.size == 0:
            raise InvalidParameterError(f"{name!r} is empty", name)
        if array.dtype != object:
            uniques, inverse = np.unique(array, return_inverse=True)
            keys = uniques.tolist()
            found = np.array([index.get(key, -1) for key in keys], dtype=np.intp)[inverse]
            if np.any(found < 0):
                self._raise_unknown(int(np.count_nonzero(found < 0)), name)
            return found.reshape(array.shape)
        flat = array.ravel()
        codes: NDArray[np.intp] | None
        try:
            codes = np.fromiter(map(index.__getitem__, flat), dtype=np.intp, count=flat.size)
        except (KeyError, TypeError):
            codes = None
        if codes is None:  # raised outside the handler: the KeyError would quote the value in the chain
            self._raise_unknown(sum(not _known(v, index) for v in flat), name)
        return codes.reshape(array.shape)

    def _raise_unknown(self, count: int, name: str) -> NoReturn:
        problem = f"not among the {self.k} categories {_shown(self.categories)}"
        raise data_value_error(repr(name), count, problem, name)

    def pmf(self, y: Any, t: Any) -> Any:
        """P(report = y | truth = t): p if y = t else q; y, t are categories or arrays of them, broadcast."""
        y_codes = self._indices(y, "y")
        t_codes = self._indices(t, "t")
        try:
            same = np.equal(y_codes, t_codes)
        except ValueError as exc:
            raise InvalidParameterError(f"'y' and 't' do not broadcast: {exc}", "y") from None
        out = np.where(same, self.p, self.q)
        return float(out) if out.ndim == 0 else out

    def randomize(self, values: Any, rng: sampling.RNGLike = None) -> Any:
        """Randomise each category in ``values``: a category gives a category, an array the same shape."""
        codes = self._indices(values, "values")
        generator = sampling.make_rng(rng)
        if sampling.is_fast(generator):
            offset = sampling.randomized_response_offsets(generator, self.epsilon, self.k, codes.shape)
        else:
            truth = sampling.truthful(generator, self.epsilon, self.k, codes.size)
            other = sampling.other_offset(generator, self.k, codes.size)
            offset = np.where(truth, 0, other).reshape(codes.shape)
        reported = (codes + offset) % self.k
        if reported.ndim == 0:
            return self.categories[int(reported)]
        return self._array[reported]

    def tally(self, reports: Any) -> NDArray[np.int64]:
        """N_v: how many reports say each category, in the order of :attr:`categories`."""
        codes = self._indices(reports, "reports")
        return np.bincount(codes.ravel(), minlength=self.k).astype(np.int64)

    def estimate_counts(self, reports: Any) -> dict[Hashable, float]:
        """Unbiased estimates n̂_v = (N_v − Nq)/(p − q) of how many respondents truly answered each category.

        Parameters
        ----------
        reports : array-like of categories
            The randomised reports (any shape; all are counted).

        Returns
        -------
        dict
            Category → estimated count (a float; it may be negative or exceed N, which keeps it unbiased).
            For variances and 95% intervals use :func:`dp_pipeline.estimation.krr_counts`.
        """
        counts = self.tally(reports)
        estimates = (counts - counts.sum() * self.q) / self.p_minus_q
        return dict(zip(self.categories, estimates.tolist(), strict=True))
