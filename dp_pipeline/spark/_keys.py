"""Declared keys and categories as Spark values of their column's type.

A declared key is matched against the data by equality. pandas compares Python values; Spark compares
typed values, and with ANSI mode (the default in Spark 4) an implicit cast of a mistyped literal fails the
job. So each declared value is converted here, on the driver, to the column's type, and a value that no
row of that type can hold (a string key for an integer column, 1.5 for an integer column) matches
nothing (the frame functions refuse such a key before the charge, since a Spark result holds the keys
in the column's type: :meth:`~dp_pipeline.spark._engine.SparkEngine.check_keys`).
The conversion is the one Spark applies (float rounds to float32, a decimal to its scale, a timestamp
to microseconds, an aware one to its instant), so two declared keys that become one Spark value are
seen here and refused (:func:`~dp_pipeline.frames._common.check_distinct_keys`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as st
from pyspark.sql.types import DataType

from dp_pipeline.frames._common import NO_MATCH as _NO_MATCH
from dp_pipeline.spark._api import functions_of

__all__ = ["KEY", "key_table", "matches_any", "spark_value"]

KEY = "__dp_key"
"""The column holding a row's position among the declared keys (null: an undeclared key)."""

_INTEGER_RANGE = {"byte": 8, "short": 16, "integer": 32, "long": 64}


def spark_value(value: Any, data_type: DataType) -> Any:
    """``value`` as a Python value of Spark type ``data_type``, or ``_NO_MATCH`` when no value of that type
    equals it (None stays None: it matches missing values, as pandas' ``dropna=False`` groups them)."""
    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(data_type, st.BooleanType):
        if isinstance(value, numbers.Integral) and int(value) in (0, 1):
            return bool(value)
        return _NO_MATCH
    if isinstance(data_type, st.IntegralType):
        if isinstance(value, numbers.Real) and not (isinstance(value, float) and not value.is_integer()):
            bits = _INTEGER_RANGE[data_type.typeName()]
            number = math.trunc(value)
            return number if -(2 ** (bits - 1)) <= number < 2 ** (bits - 1) else _NO_MATCH
        return _NO_MATCH
    if isinstance(data_type, st.DecimalType):
        return _decimal_value(value, data_type)
    if isinstance(data_type, st.FractionalType):
        return _float_value(value, isinstance(data_type, st.FloatType))
    if isinstance(data_type, st.StringType):
        return value if isinstance(value, str) else _NO_MATCH
    if isinstance(data_type, st.TimestampType | st.TimestampNTZType):
        return _timestamp_value(value, isinstance(data_type, st.TimestampType))
    if isinstance(data_type, st.DateType):
        is_date = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        return value if is_date else _NO_MATCH
    return _NO_MATCH


def _float_value(value: Any, single: bool) -> Any:
    """A number as a Spark double, or float (``single``: rounded to float32, as Spark stores it)."""
    if not isinstance(value, numbers.Real | decimal.Decimal):
        return _NO_MATCH
    try:
        number = float(value)
    except OverflowError:
        return _NO_MATCH
    return float(np.float32(number)) if single else number


def _decimal_value(value: Any, data_type: st.DecimalType) -> Any:
    """A number as a Spark decimal(p, s): rounded half up to s places (as Spark casts), NO_MATCH when it
    is not finite or needs more than p digits."""
    if not isinstance(value, numbers.Real | decimal.Decimal):
        return _NO_MATCH
    exact = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    if not exact.is_finite():
        return _NO_MATCH
    with decimal.localcontext() as context:
        context.prec = 100
        rounded = exact.quantize(decimal.Decimal(1).scaleb(-data_type.scale), rounding=decimal.ROUND_HALF_UP)
    whole_digits = data_type.precision - data_type.scale
    return rounded if abs(rounded) < decimal.Decimal(10) ** whole_digits else _NO_MATCH


def _timestamp_value(value: Any, instant: bool) -> Any:
    """A datetime as a Spark timestamp: truncated to microseconds; for a timestamp with a time zone
    (``instant``), an aware datetime as its instant in UTC."""
    if isinstance(value, np.datetime64):
        value = value.astype("datetime64[us]").item()
    floor = getattr(value, "floor", None)
    if callable(floor):  # a pandas Timestamp: drop the nanoseconds a datetime cannot hold
        value = floor("us").to_pydatetime()
    if not isinstance(value, dt.datetime):
        return _NO_MATCH
    if instant and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def key_table(session: SparkSession, schema: Any, by: Sequence[Hashable], keys: Sequence[Any]) -> DataFrame:
    """A small table (KEY, *by) of the declared keys that values of the columns' types can equal; KEY is
    the key's position in ``keys``. ``keys`` are tuples when grouping by several columns."""
    types = [schema[str(c)].dataType for c in by]
    rows = []
    for position, key in enumerate(keys):
        parts = key if len(by) > 1 else (key,)
        converted = [spark_value(v, t) for v, t in zip(parts, types, strict=True)]
        if all(v is not _NO_MATCH for v in converted):
            rows.append((position, *converted))
    fields = [st.StructField(KEY, st.IntegerType(), False)]
    fields += [st.StructField(str(c), t, True) for c, t in zip(by, types, strict=True)]
    return session.createDataFrame(rows, st.StructType(fields))


def matches_any(column: Column, data_type: DataType, values: Sequence[Any]) -> Column:
    """Whether the column's value equals one of ``values`` (each converted to the column's type; null for a
    missing value)."""
    converted = [spark_value(v, data_type) for v in values]
    present = [v for v in converted if v is not _NO_MATCH and v is not None]
    return column.isin(present) if present else functions_of(column).lit(False)
