"""Checks of tabular input: missing values, categories learned from data, and declared per-feature bounds.

The scikit-learn transformers and the pandas functions release the columns of a table. What they declare
about each column (its bounds, its sensitivity) is checked here, before any data is read, and the data
only ever meets those declarations through :func:`clip_columns`. This module needs neither scikit-learn
nor pandas.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._exact import subtract_up
from dp_pipeline._validation import check_real
from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning, data_value_error

__all__ = [
    "clip_columns",
    "declared_bounds",
    "declared_sensitivity",
    "learn_categories",
    "missing_mask",
    "per_feature",
]


def _is_missing(value: Any) -> bool:
    """None, NaN (float or numpy float), pandas.NA and NaT count as missing."""
    if value is None:
        return True
    if isinstance(value, (float, np.floating)):
        return bool(math.isnan(value))
    return type(value).__name__ in {"NAType", "NaTType"}


def missing_mask(column: NDArray[Any]) -> NDArray[np.bool_]:
    """Which entries of a 1-d array are missing (see :func:`_is_missing`)."""
    if column.dtype.kind == "f":
        return np.isnan(column)
    if column.dtype.kind == "O":
        return np.fromiter(map(_is_missing, column), dtype=bool, count=column.size)
    return np.zeros(column.shape, dtype=bool)


def learn_categories(columns: Iterable[NDArray[Any]], warning: str, *, stacklevel: int) -> list[list[Any]]:
    """``categories="data"``: each column's distinct non-missing values, in the order they first occur.

    Which values occur is not differentially private, so this raises PrivacyLeakWarning with the text
    ``warning``; ``stacklevel`` counts from the caller, as for :func:`warnings.warn`.
    """
    warnings.warn(warning, PrivacyLeakWarning, stacklevel=stacklevel + 1)
    learned = []
    for column in columns:
        values = column[~missing_mask(column)].tolist()
        unhashable = sum(not _hashable(v) for v in values)
        if unhashable:
            raise data_value_error(
                "categories='data'", unhashable, "unhashable (e.g. lists), so not categories", "categories"
            )
        learned.append(list(dict.fromkeys(values)))
    return learned


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def per_feature(
    value: Any, names: Sequence[str], name: str, *, default: float | None = None
) -> NDArray[np.float64]:
    """One finite real per feature: a scalar, a sequence aligned with ``names``, or a mapping name → value.

    A mapping may leave features out; they get ``default`` (an error when ``default`` is None).
    """
    n = len(names)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return np.full(n, check_real(value, name))
    if isinstance(value, Mapping):
        unknown = [key for key in value if key not in names]
        if unknown:
            raise InvalidParameterError(
                f"{name!r} names unknown feature(s) {unknown}; features are {list(names)}", name
            )
        missing = [key for key in names if key not in value]
        if missing and default is None:
            raise InvalidParameterError(f"{name!r} gives no value for feature(s) {missing}", name)
        return np.array(
            [check_real(value[key], name) if key in value else default for key in names], dtype=np.float64
        )
    if isinstance(value, (str, bytes)) or not np.iterable(value):
        raise InvalidParameterError(
            f"{name!r} must be a real number or one per feature ({n}), got {value!r}", name
        )
    items = list(value)
    if len(items) != n:
        raise InvalidParameterError(f"{name!r} has {len(items)} entries for {n} feature(s)", name)
    return np.array([check_real(item, name) for item in items], dtype=np.float64)


def declared_bounds(
    lower: Any, upper: Any, names: Sequence[str], *, required: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The declared bounds of each feature (±inf where a side is None), checked: lower < upper everywhere.

    With ``required`` both bounds must be finite for every feature (InvalidParameterError naming the missing
    side otherwise).
    """
    low = (
        per_feature(lower, names, "lower", default=-np.inf)
        if lower is not None
        else np.full(len(names), -np.inf)
    )
    high = (
        per_feature(upper, names, "upper", default=np.inf)
        if upper is not None
        else np.full(len(names), np.inf)
    )
    if required:
        for side, array in (("lower", low), ("upper", high)):
            if not np.isfinite(array).all():
                feature = names[int(np.flatnonzero(~np.isfinite(array))[0])]
                raise InvalidParameterError(
                    f"declare a finite {side!r} bound for feature {feature!r}: this release needs both "
                    "bounds of every feature, known without looking at the data",
                    side,
                )
    bad = np.flatnonzero(~(high > low))
    if bad.size:
        j = int(bad[0])
        raise InvalidParameterError(
            f"'upper' must exceed 'lower' for every feature; {names[j]!r} has [{low[j]}, {high[j]}]", "upper"
        )
    return low, high


def declared_sensitivity(
    sensitivity: Any, lower: NDArray[np.float64], upper: NDArray[np.float64], names: Sequence[str]
) -> NDArray[np.float64]:
    """Δⱼ of each feature: the declared ``sensitivity``, or upperⱼ − lowerⱼ (rounded up) when it is None."""
    if sensitivity is None:
        width = upper - lower
        if not np.isfinite(width).all():
            feature = names[int(np.flatnonzero(~np.isfinite(width))[0])]
            raise InvalidParameterError(
                "declare 'sensitivity' (the most one person can change a value), or both 'lower' and "
                f"'upper' (the sensitivity is then upper − lower); feature {feature!r} has neither",
                "sensitivity",
            )
        return np.array([subtract_up(float(u), float(lo)) for lo, u in zip(lower, upper, strict=True)])
    values = per_feature(sensitivity, names, "sensitivity")
    if not (values > 0).all():
        raise InvalidParameterError(f"'sensitivity' must be > 0, got {sensitivity!r}", "sensitivity")
    return values


def _scalar_if_constant(bounds: NDArray[np.float64] | None) -> NDArray[np.float64] | float | None:
    """One number when every feature has the same bound (a scalar clips faster than a broadcast array)."""
    if bounds is not None and bounds.size and np.all(bounds == bounds[0]):
        return float(bounds[0])
    return bounds


def clip_columns(
    X: NDArray[np.float64], lower: NDArray[np.float64] | None, upper: NDArray[np.float64] | None
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Clip each column of ``X`` to [lowerⱼ, upperⱼ] (a bound may be None) and count the clipped values.

    Returns the clipped array (``X`` itself when there are no bounds; ``X`` is never modified) and the number
    of values clipped in each column.
    """
    if lower is None and upper is None:
        return X, np.zeros(X.shape[1], dtype=np.int64)
    clipped = np.clip(X, _scalar_if_constant(lower), _scalar_if_constant(upper))
    changed = clipped != X
    if not np.count_nonzero(changed):  # the usual case: nothing to count per column
        return clipped, np.zeros(X.shape[1], dtype=np.int64)
    # column by column: faster than count_nonzero(axis=0), which reduces across a C-ordered array slowly
    counts = [np.count_nonzero(changed[:, j]) for j in range(X.shape[1])]
    return clipped, np.array(counts, dtype=np.int64)
