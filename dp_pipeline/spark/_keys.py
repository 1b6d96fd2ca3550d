"""Declared keys and categories as Spark values of their column's type.

A declared key is matched against the data by equality. pandas compares Python values; Spark compares
typed values, and with ANSI mode (the default in Spark 4) an implicit cast of a mistyped literal fails the
job. So each declared value is converted here, on the driver, to the column's type, and a value that no
row of that type can hold (a string key for an integer column, 1.5 for an integer column) matches
nothing: its group is released with a zero statistic, as pandas releases a declared key no row has.
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
from pyspark.sql import functions as sf
from pyspark.sql import types as st
from pyspark.sql.types import DataType

__all__ = ["KEY", "key_table", "matches_any", "spark_value"]

KEY = "__dp_key"
"""The column holding a row's position among the declared keys (null: an undeclared key)."""

_NO_MATCH = object()

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
        if isinstance(value, numbers.Real) and not (isinstance(value, float) and not math.isfinite(value)):
            return decimal.Decimal(str(value))
        return _NO_MATCH
    if isinstance(data_type, st.FractionalType):
        return float(value) if isinstance(value, numbers.Real) else _NO_MATCH
    if isinstance(data_type, st.StringType):
        return value if isinstance(value, str) else _NO_MATCH
    if isinstance(data_type, st.TimestampType | st.TimestampNTZType):
        converted = getattr(value, "to_pydatetime", lambda: value)()
        return converted if isinstance(converted, dt.datetime) else _NO_MATCH
    if isinstance(data_type, st.DateType):
        is_date = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
        return value if is_date else _NO_MATCH
    return _NO_MATCH


def key_table(
    session: SparkSession, schema: Any, by: Sequence[Hashable], keys: Sequence[Any]
) -> DataFrame:
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
    return column.isin(present) if present else sf.lit(False)
