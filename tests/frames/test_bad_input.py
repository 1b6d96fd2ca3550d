"""Bad input to the pandas functions: a clear InvalidParameterError naming the column or parameter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import InvalidParameterError
from dp_pipeline.frames import add_noise, dp_count, dp_histogram, dp_mean, dp_sum

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
DF = pd.DataFrame(
    {
        "person": ["a", "a", None],
        "age": [30.0, np.nan, 50.0],
        "name": ["x", "y", "z"],
        "ward": ["1", "2", "1"],
    }
)


@pytest.mark.parametrize(
    ("call", "parameter", "message"),
    [
        (
            lambda: dp_sum(DF, "height", lower=0, upper=1, epsilon=1.0, **OPT_OUT),
            "column",
            "'height' is not in",
        ),
        (lambda: dp_count(DF, by="floor", keys=["1"], epsilon=1.0, **OPT_OUT), "by", "'floor' is not in"),
        (lambda: add_noise(DF, ["age", "bmi"], sensitivity=1.0, epsilon=1.0, **OPT_OUT), "columns", "'bmi'"),
        (lambda: dp_sum(DF, "name", lower=0, upper=1, epsilon=1.0, **OPT_OUT), "column", "dtype object"),
        (
            lambda: dp_mean(DF, "age", lower=0, upper=100, epsilon=1.0, **OPT_OUT),
            "column",
            "'age' contains NaN",
        ),
        (
            lambda: add_noise(DF, "age", sensitivity=1.0, epsilon=1.0, **OPT_OUT),
            "columns",
            "'age' contains NaN",
        ),
        (lambda: dp_sum(DF, "age", lower=0, epsilon=1.0, upper=None, **OPT_OUT), "upper", "finite 'upper'"),
        (lambda: dp_sum(DF, "age", lower=5, upper=1, epsilon=1.0, **OPT_OUT), "upper", "must exceed"),
        (lambda: dp_count(DF, by="ward", epsilon=1.0, **OPT_OUT), "keys", "declare 'keys'"),
        (lambda: dp_count(DF, keys=["1"], epsilon=1.0, **OPT_OUT), "keys", "needs 'by'"),
        (lambda: dp_count(DF, by=["ward", "name"], keys=["1"], epsilon=1.0, **OPT_OUT), "keys", "tuples"),
        (lambda: dp_histogram(DF, "ward", categories=None, epsilon=1.0, **OPT_OUT), "categories", "declare"),
        (
            lambda: dp_count(DF, max_contributions=2, epsilon=1.0, **OPT_OUT),
            "max_contributions",
            "privacy_unit",
        ),
        (
            lambda: dp_count(DF, privacy_unit="person", epsilon=1.0, **OPT_OUT),
            "privacy_unit",
            "missing values",
        ),
        (
            lambda: dp_count(DF, privacy_unit="person", max_contributions=0, epsilon=1.0, **OPT_OUT),
            "max_contributions",
            "≥ 1",
        ),
        (lambda: dp_count(DF, epsilon=-1.0, **OPT_OUT), "epsilon", "> 0"),
        (lambda: dp_count(DF, epsilon=1.0, mechanism="gaussian", **OPT_OUT), "delta", "needs 'delta'"),
        (lambda: dp_count(DF, epsilon=1.0, mechanism="exponential", **OPT_OUT), "mechanism", "'laplace' or"),
        (lambda: dp_count(DF, epsilon=1.0, level=1.5, **OPT_OUT), "level", "(0, 1)"),
        (lambda: dp_count(DF, epsilon=1.0, accountant=None), "accountant", "no accountant"),
        (lambda: dp_count(DF.to_numpy(), epsilon=1.0, **OPT_OUT), "df", "DataFrame"),
    ],
)
def test_bad_input_names_the_column_or_parameter(call: Any, parameter: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message) as info:
        call()
    assert info.value.parameter == parameter
