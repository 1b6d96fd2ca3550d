"""Estimates from randomised reports (local DP) for ``DataFrame.pipe``: the share of yes, the distribution.

These functions read reports that were already released (by :func:`~dp_pipeline.frames.randomized_response`,
a :class:`~dp_pipeline.transformers.RandomizedResponseEncoder`, or respondents' own devices). Estimating from
them is post-processing: it costs no privacy budget, so these functions take no accountant. They need the ε
(and categories) the reports were made with: by default they read what randomized_response recorded in
``df.attrs``, and refuse a given value that differs (the estimate would be biased).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dp_pipeline.estimation import Estimate, krr_counts
from dp_pipeline.estimation import rr_share as _rr_share
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import check_frame, check_level, column_list, require_pandas, result_frame
from dp_pipeline.frames._noise import RR_ATTRS
from dp_pipeline.mechanisms import BinaryRandomizedResponse, KRandomizedResponse

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["krr_frequencies", "rr_share"]


def _reports(df: Any, column: Any) -> tuple[Any, np.ndarray[Any, Any]]:
    frame = check_frame(df)
    (name,) = column_list(frame, column, "column")
    series = frame[name]
    if series.isna().any():
        raise InvalidParameterError(
            f"'column': column {name!r} contains missing values, which no randomised report is", "column"
        )
    return name, series.to_numpy()


def _as_arrays(estimate: Estimate) -> tuple[Any, Any, Any, Any]:
    return (
        np.atleast_1d(np.asarray(estimate.value, dtype=float)),
        np.atleast_1d(np.asarray(estimate.std_error, dtype=float)),
        np.atleast_1d(np.asarray(estimate.ci_low, dtype=float)),
        np.atleast_1d(np.asarray(estimate.ci_high, dtype=float)),
    )


def _recorded(df: Any, name: Any, key: str, given: Any, what: str) -> Any:
    """The parameter ``key`` of the reports in column ``name``, from what :func:`randomized_response`
    recorded in ``df.attrs``; a given value must agree with it, and one of the two must exist."""
    record = df.attrs.get(RR_ATTRS, {}).get(name)
    if record is not None and key in record:
        if given is not None and given != record[key]:
            raise InvalidParameterError(
                f"{key!r} does not match the reports: column {name!r} was randomised with {key} = "
                f"{record[key]!r} (recorded in df.attrs), not {given!r}; leave {key!r} out to use the "
                "recorded value",
                key,
            )
        return record[key]
    if given is None:
        raise InvalidParameterError(
            f"give {key!r}: column {name!r} carries no recorded {key} ({what} made outside "
            "dp_pipeline.frames.randomized_response, or whose attrs were dropped)",
            key,
        )
    return given


def rr_share(
    df: Any, column: Any, *, epsilon: float | None = None, variant: str = "spinner", level: float = 0.95
) -> pd.Series:
    """Estimate the true share of yes (1/True) behind binary randomized-response reports in ``column``.

    Parameters
    ----------
    df : DataFrame
        The reports.
    column : column name
        Reports of True/False or 0/1.
    epsilon : float, optional
        The ε the reports were randomised with. Default: the ε that
        :func:`~dp_pipeline.frames.randomized_response` recorded in ``df.attrs``; a given ε that differs from
        the recorded one is refused (the estimate would be biased).
    variant : {"spinner", "spinner_coin"}
        The variant they were randomised with (both give the same estimate at the same ε).
    level : float
        Coverage of the interval, 0.95 by default.

    Returns
    -------
    Series
        ``value`` (unbiased; it may fall outside [0, 1]), ``std_error`` (plug-in), ``ci_low``, ``ci_high``
        (normal approximation, clipped to [0, 1]); ``attrs["n"]`` is the number of reports.

    Notes
    -----
    π̂ = (λ̂ − q)/(p − q) with λ̂ the share of 1s among the n reports, p = e^ε/(1 + e^ε), q = 1 − p; plug-in
    variance λ̂(1 − λ̂)/(n (p − q)²). See :func:`dp_pipeline.estimation.rr_share`.

    References
    ----------
    Warner, "Randomized response", JASA 60(309), 1965.
    """
    name, reports = _reports(df, column)
    if "categories" in df.attrs.get(RR_ATTRS, {}).get(name, {}):
        raise InvalidParameterError(
            f"'column': column {name!r} holds k-ary reports; estimate them with krr_frequencies", "column"
        )
    eps = _recorded(df, name, "epsilon", epsilon, "reports")
    mechanism = BinaryRandomizedResponse(epsilon=eps, variant=variant)  # type: ignore[arg-type]
    try:
        estimate = _rr_share(reports, mechanism, axis=None, level=check_level(level))
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"'column': column {name!r}: {exc}", "column") from None
    value, std, low, high = _as_arrays(estimate)
    attrs = {"epsilon": mechanism.epsilon, "variant": variant, "level": level, "n": int(reports.size)}
    out: pd.Series = result_frame(value, std, low, high, None, f"share({name})", attrs)
    return out


def krr_frequencies(
    df: Any,
    column: Any,
    *,
    epsilon: float | None = None,
    categories: Any = None,
    normalize: bool = False,
    level: float = 0.95,
) -> pd.DataFrame:
    """Estimate how many respondents truly gave each answer, from k-RR reports in ``column``.

    Parameters
    ----------
    df : DataFrame
        The reports.
    column : column name
        Reports, each one of ``categories``.
    epsilon : float, optional
        The ε the reports were randomised with; default, and checked against: the ε recorded in
        ``df.attrs`` by :func:`~dp_pipeline.frames.randomized_response`.
    categories : list, optional
        The categories they were randomised over, in any order (the result follows it); default: the
        recorded ones (a given list must hold the same categories).
    normalize : bool
        Shares instead of counts (every column divided by the number of reports n), as in
        ``value_counts(normalize=True)``.
    level : float
        Coverage of the intervals, 0.95 by default.

    Returns
    -------
    DataFrame
        Indexed by category: ``value`` (unbiased, may be negative), ``std_error`` (of the count among these
        n respondents, see :func:`dp_pipeline.estimation.krr_counts_from_tally`), ``ci_low``, ``ci_high``
        (normal approximation, clipped to [0, n], or [0, 1] with ``normalize``).

    Notes
    -----
    n̂_v = (N_v − n q)/(p − q) with N_v the reports saying v, p = e^ε/(e^ε + k − 1), q = 1/(e^ε + k − 1); see
    :func:`dp_pipeline.estimation.krr_counts`.

    References
    ----------
    Wang, Blocki, Li & Jha, "Locally differentially private protocols for frequency estimation", USENIX
    Security 2017.
    """
    pandas = require_pandas()
    name, reports = _reports(df, column)
    eps = _recorded(df, name, "epsilon", epsilon, "reports")
    recorded = df.attrs.get(RR_ATTRS, {}).get(name, {}).get("categories")
    if categories is None:
        categories = _recorded(df, name, "categories", None, "reports")
    elif recorded is not None and set(list(categories)) != set(recorded):
        raise InvalidParameterError(
            f"'categories' do not match the reports: column {name!r} was randomised over other categories "
            "(recorded in df.attrs); leave 'categories' out to use the recorded ones",
            "categories",
        )
    try:
        mechanism = KRandomizedResponse(epsilon=eps, categories=categories)
    except InvalidParameterError as exc:
        raise InvalidParameterError(str(exc), exc.parameter) from None
    try:
        estimate = krr_counts(reports, mechanism, level=check_level(level))
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"'column': column {name!r}: {exc}", "column") from None
    value, std, low, high = _as_arrays(estimate)
    n = float(reports.size)
    if normalize:
        value, std, low, high = value / n, std / n, low / n, high / n
    index = pandas.Index(list(mechanism.categories), name=name)
    attrs = {"epsilon": mechanism.epsilon, "level": level, "n": int(n), "normalize": bool(normalize)}
    out: pd.DataFrame = result_frame(value, std, low, high, index, "share" if normalize else "count", attrs)
    return out
