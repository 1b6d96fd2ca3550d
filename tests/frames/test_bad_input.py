"""Bad input to the pandas functions: a clear InvalidParameterError naming the column or parameter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import InvalidParameterError
from dp_pipeline.accounting import ledger_entries
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
        (
            lambda: dp_sum(DF, "name", lower=0, upper=1, epsilon=1.0, **OPT_OUT),
            "column",
            f"dtype {DF['name'].dtype}",  # object before pandas 3, str from pandas 3 on
        ),
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


def test_a_row_level_release_of_no_rows_charges_nothing() -> None:
    """An empty frame releases no row (its row count is public under replace-one): ``add_noise`` and
    ``randomized_response`` return it empty, charge nothing, and still refuse an add/remove dataset."""
    from dp_pipeline import PrivacyAccountant, PureDP, UnsupportedCompositionError
    from dp_pipeline.frames import randomized_response

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    empty = pd.DataFrame({"x": [3.0], "yes": [1]}).iloc[0:0]
    noisy = add_noise(empty, ["x"], lower=0, upper=10, epsilon=1.0, accountant=acct, dataset="d")
    reports = randomized_response(empty, "yes", epsilon=1.0, accountant=acct, dataset="d")
    assert noisy.empty and list(noisy.columns) == ["x", "yes"] and reports.empty
    assert [r.kind for r in ledger_entries(acct.store, "d")] == ["budget"]  # nothing charged
    acct.set_budget("r", PureDP(1.0), relation="add_remove")
    with pytest.raises(UnsupportedCompositionError, match="relation='replace_one'"):
        add_noise(empty, ["x"], lower=0, upper=10, epsilon=1.0, accountant=acct, dataset="r")
    assert [r.kind for r in ledger_entries(acct.store, "r")] == ["budget"]
