"""On Spark, declared keys that become one value of the column's Spark type are refused before any job.

The declared keys are converted to the column's type on the driver (a float column holds float32, a
decimal its scale, a timestamp microseconds); two keys that become one value would each be credited with
the same rows.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import types as st

from dp_pipeline import InvalidParameterError
from dp_pipeline.frames import dp_count, dp_sum
from dp_pipeline.mechanisms import secure_rng

pytestmark = pytest.mark.spark

EXACT: dict[str, Any] = {"epsilon": 1e9, "accountant": "unaccounted"}

CASES = {
    "double": (st.DoubleType(), 2.0**53, [2**53, 2**53 + 1]),
    "float": (st.FloatType(), 1.0, [1.0, 1.0 + 2.0**-30]),
    "decimal(10,2)": (st.DecimalType(10, 2), decimal.Decimal("1.00"), [decimal.Decimal("1.001"), 1.004]),
    "timestamp": (
        st.TimestampType(),
        dt.datetime(2024, 1, 1),
        [dt.datetime(2024, 1, 1), pd.Timestamp("2024-01-01 00:00:00.000000001")],
    ),
}


def _frame(spark: Any, data_type: Any, value: Any) -> Any:
    schema = st.StructType([st.StructField("k", data_type), st.StructField("x", st.DoubleType())])
    return spark.createDataFrame([(value, 1.0)], schema)


@pytest.mark.parametrize("case", list(CASES))
def test_keys_that_collide_in_the_spark_type_are_refused(spark: Any, case: str) -> None:
    data_type, value, keys = CASES[case]
    sdf = _frame(spark, data_type, value)
    with pytest.raises(InvalidParameterError, match="positions 0 and 1") as info:
        sdf.transform(dp_count, by="k", keys=keys, **EXACT)
    assert info.value.parameter == "keys"
    with pytest.raises(InvalidParameterError, match="positions 0 and 1"):
        sdf.transform(dp_sum, "x", lower=0, upper=1, by="k", keys=keys, **EXACT)


@pytest.mark.parametrize("case", list(CASES))
def test_distinct_keys_credit_the_row_once(spark: Any, case: str) -> None:
    """Dropping the colliding key, the row is counted exactly once in total."""
    data_type, value, keys = CASES[case]
    out = _frame(spark, data_type, value).transform(
        dp_count, by="k", keys=keys[:1], random_state=secure_rng(1), **EXACT
    )
    assert np.rint(out.toPandas()["value"].to_numpy()).tolist() == [1.0]
