"""Estimates from randomised reports (local DP) for ``DataFrame.pipe``: the share of yes, the distribution.

These functions read reports that were already released (by :func:`~dp_pipeline.frames.randomized_response`,
a :class:`~dp_pipeline.transformers.RandomizedResponseEncoder`, or respondents' own devices). Estimating from
them is post-processing: it costs no privacy budget, so these functions take no accountant. They need the ε
(and categories) the reports were made with; the estimates are wrong if those differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dp_pipeline.estimation import Estimate, krr_counts
from dp_pipeline.estimation import rr_share as _rr_share
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import check_frame, check_level, column_list, require_pandas, result_frame
from dp_pipeline.mechanisms.randomized_response import BinaryRandomizedResponse, KRandomizedResponse

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


def rr_share(
    df: Any, column: Any, *, epsilon: float, variant: str = "spinner", level: float = 0.95
) -> pd.Series:
    """Estimate the true share of yes (1/True) behind binary randomized-response reports in ``column``.

    Parameters
    ----------
    df : DataFrame
        The reports.
    column : column name
        Reports of True/False or 0/1.
    epsilon : float
        The ε the reports were randomised with.
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
    mechanism = BinaryRandomizedResponse(epsilon=epsilon, variant=variant)  # type: ignore[arg-type]
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
    epsilon: float,
    categories: Any,
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
    epsilon : float
        The ε the reports were randomised with.
    categories : list
        The categories they were randomised over, in any order (the result follows it).
    normalize : bool
        Shares instead of counts (every column divided by the number of reports n), as in
        ``value_counts(normalize=True)``.
    level : float
        Coverage of the intervals, 0.95 by default.

    Returns
    -------
    DataFrame
        Indexed by category: ``value`` (unbiased, may be negative), ``std_error`` (plug-in), ``ci_low``,
        ``ci_high`` (normal approximation, clipped to [0, n], or [0, 1] with ``normalize``).

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
    try:
        mechanism = KRandomizedResponse(epsilon=epsilon, categories=categories)
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
