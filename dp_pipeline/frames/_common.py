"""Shared checks of the frame functions, public to every dataframe engine (pandas here, Spark in
:mod:`dp_pipeline.spark`): the lazy pandas import, columns, the privacy unit,
group keys, the refusals of bad columns, and the result table."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import math
import numbers
import warnings
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dp_pipeline._validation import check_real
from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline.mechanisms import sampling

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "bound_contributions",
    "bound_partitions",
    "check_distinct_keys",
    "check_frame",
    "check_level",
    "check_limit",
    "column_list",
    "group_index",
    "interval_half_width",
    "no_answer",
    "no_partition",
    "no_person",
    "not_a_number",
    "not_finite",
    "not_yes_no",
    "numeric_values",
    "observed_index",
    "pandas_value",
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
        raise InvalidParameterError(
            f"'df' must be a pandas or Spark DataFrame, got {type(df).__name__}", "df"
        )
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


def not_a_number(name: str, column: Hashable, dtype: object, boolean: bool) -> InvalidParameterError:
    """The refusal of a column that does not hold numbers (``boolean``: it holds bools), naming it."""
    if boolean:
        return InvalidParameterError(
            f"{name!r}: column {column!r} holds bools, not numbers; cast it with .astype(int) (Spark: "
            ".cast('int')) if 0/1 is meant (e.g. to sum or average a yes/no answer)",
            name,
        )
    return InvalidParameterError(f"{name!r}: column {column!r} has dtype {dtype}, not a number", name)


def not_finite(name: str, column: Hashable) -> InvalidParameterError:
    """The refusal of a numeric column with NaN, infinite or missing values, naming it."""
    return InvalidParameterError(
        f"{name!r}: column {column!r} contains NaN, infinite or missing values; drop or fill them before the "
        "release",
        name,
    )


def no_person(unit: Hashable) -> InvalidParameterError:
    """The refusal of a person column with missing values."""
    return InvalidParameterError(
        f"'privacy_unit': column {unit!r} contains missing values; every row must name its person",
        "privacy_unit",
    )


def no_partition(column: Hashable) -> InvalidParameterError:
    """A partition column with a missing value: every row must name its partition."""
    return InvalidParameterError(
        f"'partition_column': column {column!r} contains missing values; every row must name its partition",
        "partition_column",
    )


def not_yes_no(column: Hashable, dtype: object) -> InvalidParameterError:
    """The refusal of a column of yes/no answers that holds neither bools nor numbers."""
    return InvalidParameterError(
        f"'column': column {column!r} has dtype {dtype}; a yes/no answer must be True/False or 0/1, or "
        "declare 'categories' for k-ary randomized response",
        "column",
    )


def no_answer(column: Hashable) -> InvalidParameterError:
    """The refusal of a column of answers with missing values."""
    return InvalidParameterError(
        f"'column': column {column!r} contains missing values; fill them with a declared answer first",
        "column",
    )


def numeric_values(df: pd.DataFrame, column: Hashable, name: str) -> NDArray[np.float64]:
    """A numeric column as a float array; non-numeric dtypes (bools included) and missing values raise,
    naming the column."""
    series = df[column]
    kind = getattr(series.dtype, "kind", "O")
    if kind not in "iuf":
        raise not_a_number(name, column, series.dtype, kind == "b")
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(values).all():
        raise not_finite(name, column)
    return values


def check_level(level: Any) -> float:
    """A confidence level in (0, 1)."""
    value = check_real(level, "level")
    if not 0.0 < value < 1.0:
        raise InvalidParameterError(f"'level' must lie in (0, 1), got {value}", "level")
    return value


def check_limit(max_contributions: Any, privacy_unit: Any) -> int:
    """m = ``max_contributions``: a positive int, more than 1 only with a person column."""
    if isinstance(max_contributions, bool) or not isinstance(max_contributions, numbers.Integral):
        raise InvalidParameterError(
            f"'max_contributions' must be a positive integer, got {max_contributions!r}", "max_contributions"
        )
    limit = int(max_contributions)
    if limit < 1:
        raise InvalidParameterError(f"'max_contributions' must be ≥ 1, got {limit}", "max_contributions")
    if privacy_unit is None and limit != 1:
        raise InvalidParameterError(
            "max_contributions > 1 needs a privacy_unit: the column that identifies the person, so that "
            "each person's rows can be limited",
            "max_contributions",
        )
    return limit


def bound_contributions(df: pd.DataFrame, unit: Hashable | None, limit: int, rng: np.random.Generator) -> Any:
    """Keep at most ``limit`` rows per value of the person column ``unit``, chosen uniformly at random.

    The rows kept for a person are a uniform random sample of that person's rows (random priorities, the
    smallest ``limit`` kept), so that which rows survive does not depend on the row order. Without a
    person column every row is its own person and all rows are kept.
    """
    if unit is None:
        return df
    priority = sampling.uniform(rng, (len(df),))
    order = np.argsort(priority, kind="stable")
    shuffled = df[unit].iloc[order]
    rank = shuffled.groupby(shuffled, sort=False).cumcount().to_numpy()
    keep = np.sort(order[rank < limit])
    return df.iloc[keep]


def bound_partitions(
    df: pd.DataFrame,
    unit: Hashable | None,
    column: Hashable,
    names: tuple[str, ...],
    limit: int,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """The rows of the partitions ``names`` (all rows when none are named), each person's rows kept in at
    most ``limit`` of the partitions they appear in, chosen uniformly at random.

    A row's partition is its value of ``column`` as a string (a column of pandas dates reads
    ``"2026-11-24"``). Without a person column every row is its own person and lies in one partition. The
    partitions kept for a person are a uniform random sample of theirs (random priorities per person and
    partition, the smallest ``limit`` kept), as :func:`bound_contributions` samples rows, before the rows
    are bounded. This bounds the release's own rows; that each person lies in at most ``limit`` partitions
    of the whole dataset, across releases, is what the dataset declares.
    """
    keys = df[column].astype(str)
    if names:
        read = keys.isin(names).to_numpy()
        df, keys = df[read], keys[read]
    if unit is None or df.empty:
        return df
    pandas = require_pandas()
    pairs = pandas.MultiIndex.from_arrays([df[unit].to_numpy(), keys.to_numpy()])
    distinct = pairs.unique()
    order = np.argsort(sampling.uniform(rng, (len(distinct),)), kind="stable")
    shuffled = distinct[order]
    people = shuffled.get_level_values(0)
    rank = pandas.Series(people).groupby(people, sort=False).cumcount().to_numpy()
    return df[pairs.isin(shuffled[rank < limit])]


def group_index(engine: Any, by: Any, keys: Any, name: str = "keys") -> tuple[list[Hashable], pd.Index]:
    """The grouping columns and the declared index of group keys (``keys="data"``: the keys the engine
    observes, sorted, with a PrivacyLeakWarning).

    The keys must be declared because a released group that exists only when some person is present reveals
    that person. Rows whose key is not declared are left out of the release.
    """
    pandas = require_pandas()
    columns = column_list(engine, by, "by")
    if isinstance(keys, str) and keys == "data":
        warnings.warn(
            f"{name}='data' takes the group keys from the values present in the data; which keys occur "
            "is not differentially private (a key held by one person reveals that person). Declare the "
            "keys instead",
            PrivacyLeakWarning,
            stacklevel=4,
        )
        return columns, engine.observed_keys(columns)
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
    engine.check_keys(columns, index, name)
    return columns, index


NO_MATCH: Any = object()
"""What a declared key value becomes when no value of the column's type equals it (it matches no row)."""


def check_distinct_keys(
    by: Sequence[Hashable], index: pd.Index, convert: Sequence[Callable[[Any], Any]], name: str
) -> None:
    """Refuse declared keys that become the same key once converted to the columns' types.

    ``convert[i]`` maps a declared value of column ``by[i]`` to the value of that column's type that equals
    it (what the engine matches the rows with), or :data:`NO_MATCH`. Two declared keys whose converted
    values are all equal would each be credited with the same rows: a person in that group would count
    twice while the noise covers one count (2^53 and 2^53 + 1 are one float64). A key with a value that
    matches nothing is never a collision. The error names the keys' positions, never a value of the data.
    """
    seen: dict[tuple[Any, ...], int] = {}
    for position, key in enumerate(index):
        parts = key if len(by) > 1 else (key,)
        converted = tuple(f(v) for f, v in zip(convert, parts, strict=True))
        if any(v is NO_MATCH for v in converted):
            continue
        first = seen.setdefault(converted, position)
        if first != position:
            raise InvalidParameterError(
                f"{name!r}: the keys at positions {first} and {position} become one key once converted to "
                f"the type of column(s) {list(by)} (e.g. two integers beyond 2**53 on a float64 column, or "
                "two times closer than the column's resolution), so both would be credited with the same "
                "rows. Declare each key once, as a value of the column's type",
                name,
            )


def pandas_value(dtype: Any) -> Callable[[Any], Any]:
    """The declared value → its value in a pandas column of ``dtype`` (see :func:`check_distinct_keys`).

    Numbers (bools, Decimals) become the column's number type (a float column rounds, an integer column
    takes only integers in range); dates and times become the column's datetime or timedelta type (at its
    resolution, in its time zone); a categorical column converts to its categories' type; any other column
    compares Python values. A missing value (None, NaN, NaT) stays a missing value: it matches the missing
    keys.
    """
    pandas = require_pandas()
    if isinstance(dtype, pandas.CategoricalDtype):
        return pandas_value(dtype.categories.dtype)
    kind = getattr(dtype, "kind", "O")
    numpy_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype)) if kind in "biuf" else None

    def convert(value: Any) -> Any:
        if value is None or value is pandas.NA or value is pandas.NaT:
            return None
        if isinstance(value, float | np.floating) and math.isnan(value):
            return None
        if numpy_dtype is not None:
            return _as_number(value, numpy_dtype)
        if kind not in "mM":
            return value
        temporal = (dt.date, dt.timedelta, np.datetime64, np.timedelta64)
        if not isinstance(value, temporal):
            return NO_MATCH
        try:
            converted = pandas.Series([value]).astype(dtype)
        except (TypeError, ValueError, OverflowError):
            return NO_MATCH
        return converted.iloc[0] if converted.dtype.kind == kind else NO_MATCH

    return convert


def _as_number(value: Any, dtype: np.dtype[Any]) -> Any:
    """A number as a value of the numpy number type ``dtype`` (NO_MATCH when no such value equals it)."""
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Real | decimal.Decimal):
        return NO_MATCH
    if dtype.kind == "f":
        try:
            return dtype.type(float(value))
        except OverflowError:
            return NO_MATCH
    try:
        exact = Fraction(value)  # type: ignore[arg-type]  # every Rational, float and Decimal
    except (ValueError, OverflowError):  # NaN, ±inf
        return NO_MATCH
    if exact.denominator != 1:
        return NO_MATCH
    number = int(exact)
    if dtype.kind == "b":
        return bool(number) if number in (0, 1) else NO_MATCH
    info = np.iinfo(dtype)
    return number if info.min <= number <= info.max else NO_MATCH


def observed_index(observed: pd.DataFrame) -> pd.Index:
    """The distinct non-missing keys of ``observed`` (one column per grouping column), sorted."""
    pandas = require_pandas()
    columns = list(observed.columns)
    observed = observed.drop_duplicates().dropna()
    if len(columns) == 1:
        return pandas.Index(sorted(observed[columns[0]].tolist(), key=_sort_key), name=columns[0])
    tuples = sorted(map(tuple, observed.itertuples(index=False, name=None)), key=_sort_key)
    return pandas.MultiIndex.from_tuples(tuples, names=columns)


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
