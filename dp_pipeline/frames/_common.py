"""Shared checks of the pandas functions: the lazy pandas import, columns, the privacy unit, group keys."""

from __future__ import annotations

import importlib
import math
import numbers
import warnings
from collections.abc import Hashable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dp_pipeline._validation import check_real
from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline.mechanisms import _sampling

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "bound_contributions",
    "bound_partitions",
    "check_frame",
    "check_level",
    "column_list",
    "group_index",
    "interval_half_width",
    "numeric_values",
    "require_pandas",
    "result_frame",
]


def require_pandas() -> ModuleType:
    """Import pandas, or raise ImportError naming the extra to install."""
    try:
        return importlib.import_module("pandas")
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError('dp_pipeline.frames needs pandas: pip install "dp-pipeline[pandas]"') from exc


def check_frame(df: Any) -> pd.DataFrame:
    """``df`` itself if it is a DataFrame, else InvalidParameterError naming ``df``."""
    pandas = require_pandas()
    if not isinstance(df, pandas.DataFrame):
        raise InvalidParameterError(f"'df' must be a pandas DataFrame, got {type(df).__name__}", "df")
    return df


def column_list(df: pd.DataFrame, columns: Any, name: str) -> list[Hashable]:
    """``columns`` (one name or a list of names) as a list; every one must be a column of ``df``."""
    items = [columns] if isinstance(columns, str) or not isinstance(columns, (list, tuple)) else list(columns)
    if not items:
        raise InvalidParameterError(f"{name!r} names no column", name)
    for column in items:
        try:
            present = column in df.columns
        except TypeError:
            present = False
        if not present:
            raise InvalidParameterError(
                f"{name!r}: column {column!r} is not in the DataFrame; its columns are {list(df.columns)}",
                name,
            )
    if len(set(items)) != len(items):
        raise InvalidParameterError(f"{name!r} names a column twice: {items}", name)
    return items


def numeric_values(df: pd.DataFrame, column: Hashable, name: str) -> NDArray[np.float64]:
    """A numeric column as a float array; non-numeric dtypes (bools included) and missing values raise,
    naming the column."""
    series = df[column]
    kind = getattr(series.dtype, "kind", "O")
    if kind == "b":
        raise InvalidParameterError(
            f"{name!r}: column {column!r} holds bools, not numbers; cast it with .astype(int) if 0/1 is "
            "meant (e.g. to sum or average a yes/no answer)",
            name,
        )
    if kind not in "iuf":
        raise InvalidParameterError(
            f"{name!r}: column {column!r} has dtype {series.dtype}, not a number", name
        )
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(values).all():
        raise InvalidParameterError(
            f"{name!r}: column {column!r} contains NaN, infinite or missing values; drop or fill them before "
            "the release",
            name,
        )
    return values


def check_level(level: Any) -> float:
    """A confidence level in (0, 1)."""
    value = check_real(level, "level")
    if not 0.0 < value < 1.0:
        raise InvalidParameterError(f"'level' must lie in (0, 1), got {value}", "level")
    return value


def bound_contributions(
    df: pd.DataFrame, privacy_unit: Any, max_contributions: Any, rng: np.random.Generator
) -> pd.DataFrame:
    """Keep at most ``max_contributions`` rows per privacy unit, chosen uniformly at random.

    Without a privacy unit every row is its own person and ``max_contributions`` must be 1. The rows kept
    for a person are a uniform random sample of that person's rows (random priorities, the smallest
    ``max_contributions`` kept), so that which rows survive does not depend on the row order.
    """
    if isinstance(max_contributions, bool) or not isinstance(max_contributions, numbers.Integral):
        raise InvalidParameterError(
            f"'max_contributions' must be a positive integer, got {max_contributions!r}", "max_contributions"
        )
    limit = int(max_contributions)
    if limit < 1:
        raise InvalidParameterError(f"'max_contributions' must be ≥ 1, got {limit}", "max_contributions")
    if privacy_unit is None:
        if limit != 1:
            raise InvalidParameterError(
                "max_contributions > 1 needs a privacy_unit: the column that identifies the person, so that "
                "each person's rows can be limited",
                "max_contributions",
            )
        return df
    units = _units(df, privacy_unit)
    priority = _sampling.uniform(rng, (len(df),))
    order = np.argsort(priority, kind="stable")
    shuffled = units.iloc[order]
    rank = shuffled.groupby(shuffled, sort=False).cumcount().to_numpy()
    keep = np.sort(order[rank < limit])
    return df.iloc[keep]


def _units(df: pd.DataFrame, privacy_unit: Any) -> pd.Series:
    """The privacy-unit column: every row must name its person."""
    (unit,) = column_list(df, privacy_unit, "privacy_unit")
    units = df[unit]
    if units.isna().any():
        raise InvalidParameterError(
            f"'privacy_unit': column {unit!r} contains missing values; every row must name its person",
            "privacy_unit",
        )
    return units


def bound_partitions(
    df: pd.DataFrame,
    privacy_unit: Any,
    partition_column: Any,
    partitions: tuple[str, ...],
    limit: int,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """The rows of the named ``partitions`` (all rows when none are named), each person's rows kept in at
    most ``limit`` of the partitions they appear in, chosen uniformly at random.

    A partition is the value of ``partition_column`` as a string (``str`` of the value; a date column of
    pandas dates reads ``"2026-11-24"``). Without a privacy unit every row is its own person and lies in one
    partition. The partitions kept for a person are a uniform random sample of theirs (random priorities per
    person and partition, the smallest ``limit`` kept), as :func:`bound_contributions` samples rows; it runs
    before the rows are bounded. This bounds the partitions of the release's own rows; that each person lies
    in at most ``limit`` partitions of the whole dataset, across releases, is the dataset's declaration.
    """
    (column,) = column_list(df, partition_column, "partition_column")
    if df[column].isna().any():
        raise InvalidParameterError(
            f"'partition_column': column {column!r} contains missing values; every row must name its "
            "partition",
            "partition_column",
        )
    keys = df[column].astype(str)
    if partitions:
        chosen = keys.isin(partitions).to_numpy()
        df, keys = df[chosen], keys[chosen]
    if privacy_unit is None or df.empty:
        return df
    pandas = require_pandas()
    pairs = pandas.MultiIndex.from_arrays([_units(df, privacy_unit).to_numpy(), keys.to_numpy()])
    distinct = pairs.unique()
    priority = _sampling.uniform(rng, (len(distinct),))
    order = np.argsort(priority, kind="stable")
    shuffled = distinct[order]
    rank = pandas.Series(shuffled.get_level_values(0)).groupby(shuffled.get_level_values(0), sort=False)
    kept = shuffled[rank.cumcount().to_numpy() < limit]
    return df[pairs.isin(kept)]


def group_index(df: pd.DataFrame, by: Any, keys: Any, name: str = "keys") -> tuple[list[Hashable], pd.Index]:
    """The grouping columns and the declared index of group keys (``keys="data"``: the observed keys, warned).

    The keys must be declared because a released group that exists only when some person is present reveals
    that person. Rows whose key is not declared are left out of the release.
    """
    pandas = require_pandas()
    columns = column_list(df, by, "by")
    if isinstance(keys, str) and keys == "data":
        warnings.warn(
            f"{name}='data' takes the group keys from the values present in the data; which keys occur "
            "is not differentially private (a key held by one person reveals that person). Declare the "
            "keys instead",
            PrivacyLeakWarning,
            stacklevel=4,
        )
        observed = df[columns].drop_duplicates().dropna()
        if len(columns) == 1:
            index = pandas.Index(sorted(observed[columns[0]].tolist(), key=_sort_key), name=columns[0])
        else:
            tuples = sorted(map(tuple, observed.itertuples(index=False, name=None)), key=_sort_key)
            index = pandas.MultiIndex.from_tuples(tuples, names=columns)
        return columns, index
    if (
        keys is None
        or isinstance(keys, (str, bytes))
        or not isinstance(keys, (Sequence, np.ndarray, pandas.Index))
    ):
        raise InvalidParameterError(
            f"declare {name!r}: the list of group keys, known without looking at the data (tuples when "
            f"grouping by several columns); {name}='data' takes them from the data with a "
            f"PrivacyLeakWarning. Got {keys!r}",
            name,
        )
    items = list(keys)
    if not items:
        raise InvalidParameterError(f"{name!r} is empty", name)
    if len(columns) == 1:
        index = pandas.Index(items, name=columns[0])
    else:
        if not all(isinstance(k, tuple) and len(k) == len(columns) for k in items):
            raise InvalidParameterError(
                f"grouping by {len(columns)} columns needs {name!r} as tuples of {len(columns)} values", name
            )
        index = pandas.MultiIndex.from_tuples(items, names=columns)
    if index.has_duplicates:
        raise InvalidParameterError(f"{name!r} lists a key twice", name)
    return columns, index


def _sort_key(value: Any) -> tuple[str, str]:
    return (type(value).__name__, str(value))


def interval_half_width(noise: str, std: NDArray[np.float64], level: float) -> NDArray[np.float64]:
    """Half-width h with P(|Z| ≤ h) = level for the noise Z: b·ln(1/(1 − level)) for Laplace of scale
    b = std/√2 (exact), Φ⁻¹((1 + level)/2)·σ for Gaussian (exact)."""
    if noise == "laplace":
        return np.asarray(std / math.sqrt(2.0) * math.log(1.0 / (1.0 - level)), dtype=np.float64)
    return np.asarray(std * float(special.ndtri((1.0 + level) / 2.0)), dtype=np.float64)


def result_frame(
    values: NDArray[np.float64],
    std_error: NDArray[np.float64],
    low: NDArray[np.float64],
    high: NDArray[np.float64],
    index: pd.Index | None,
    name: str,
    attrs: dict[str, Any],
) -> pd.Series | pd.DataFrame:
    """A Series (no groups) or a DataFrame indexed by the keys: value, std_error, ci_low, ci_high."""
    pandas = require_pandas()
    columns = {"value": values, "std_error": std_error, "ci_low": low, "ci_high": high}
    out: pd.Series | pd.DataFrame
    if index is None:
        out = pandas.Series({k: float(v[0]) for k, v in columns.items()}, name=name, dtype=float)
    else:
        out = pandas.DataFrame(columns, index=index)
        out.columns.name = name
    out.attrs.update(attrs)
    return out
