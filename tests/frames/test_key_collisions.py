"""Declared group keys that become one key in the column's type are refused, before anything is charged.

Two declared keys that convert to the same value of the column's type would each be credited with the
same rows (2**53 and 2**53 + 1 on a float64 column both count the one row 2**53): the person in that group
would be counted twice while the noise covers one count.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as hs

from dp_pipeline import InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline.frames import dp_count, dp_histogram, dp_mean, dp_median, dp_std, dp_sum
from dp_pipeline.mechanisms import secure_rng

EXACT: dict[str, Any] = {"epsilon": 1e9, "accountant": "unaccounted"}  # noise ≪ ½: counts round exactly

CASES = {
    "float64": (pd.Series([2.0**53]), [2**53, 2**53 + 1]),
    "float32": (pd.Series([1.0], dtype=np.float32), [1.0, 1.0 + 2.0**-30]),
    "datetime64[s]": (
        pd.Series(pd.to_datetime(["2024-01-01"])).astype("datetime64[s]"),
        [pd.Timestamp("2024-01-01 00:00:00"), pd.Timestamp("2024-01-01 00:00:00.5")],
    ),
    "datetime64[ms, UTC]": (
        pd.Series(pd.to_datetime(["2024-01-01T12:00"], utc=True)).astype("datetime64[ms, UTC]"),
        [
            pd.Timestamp("2024-01-01T12:00:00.0001", tz="UTC"),
            pd.Timestamp("2024-01-01T12:00:00.0002", tz="UTC"),
        ],
    ),
    "categorical float": (pd.Series(pd.Categorical([2.0**53])), [2**53, 2**53 + 1]),
    "Float64 (nullable)": (pd.Series([2.0**53], dtype="Float64"), [2**53, 2**53 + 1]),
}


def _frame(column: pd.Series) -> pd.DataFrame:
    return pd.DataFrame({"k": column, "x": np.ones(len(column))})


@pytest.mark.parametrize("case", list(CASES))
def test_keys_that_collide_in_the_column_type_are_refused(case: str) -> None:
    column, keys = CASES[case]
    with pytest.raises(InvalidParameterError, match="positions 0 and 1") as info:
        _frame(column).pipe(dp_count, by="k", keys=keys, **EXACT)
    assert info.value.parameter == "keys"


def test_the_refusal_charges_nothing_and_quotes_no_data_value() -> None:
    acct = PrivacyAccountant("sqlite://")
    acct.set_budget("d", PureDP(1.0))
    secret = 2.0**53
    df = pd.DataFrame({"k": [secret], "x": [1.0]})
    calls = [
        lambda: dp_count(df, by="k", keys=[2**53, 2**53 + 1], epsilon=0.5, accountant=acct, dataset="d"),
        lambda: dp_sum(
            df,
            "x",
            lower=0,
            upper=1,
            by="k",
            keys=[2**53, 2**53 + 1],
            epsilon=0.5,
            accountant=acct,
            dataset="d",
        ),
        lambda: dp_mean(
            df,
            "x",
            lower=0,
            upper=1,
            by="k",
            keys=[2**53, 2**53 + 1],
            epsilon=0.5,
            accountant=acct,
            dataset="d",
        ),
        lambda: dp_std(
            df,
            "x",
            lower=0,
            upper=1,
            by="k",
            keys=[2**53, 2**53 + 1],
            epsilon=0.5,
            accountant=acct,
            dataset="d",
        ),
        lambda: dp_median(
            df,
            "x",
            lower=0,
            upper=1,
            by="k",
            keys=[2**53, 2**53 + 1],
            epsilon=0.5,
            accountant=acct,
            dataset="d",
        ),
        lambda: dp_histogram(
            df, "k", categories=[2**53, 2**53 + 1], epsilon=0.5, accountant=acct, dataset="d"
        ),
    ]
    for call in calls:
        with pytest.raises(InvalidParameterError) as info:
            call()
        assert "9007199254740992" not in str(info.value)
    assert acct.history("d") == []


def test_the_reproduced_breach_one_row_counted_once() -> None:
    """The one row with key 2**53 counts once in total: here the user's keys are distinct floats."""
    df = _frame(pd.Series([2.0**53]))
    out = df.pipe(dp_count, by="k", keys=[2**53, 2.0**53 + 2], random_state=secure_rng(1), **EXACT)
    assert np.rint(out["value"].to_numpy()).tolist() == [1.0, 0.0]


def test_distinct_decimal_and_object_keys_are_not_refused() -> None:
    df = pd.DataFrame({"k": [decimal.Decimal("1.5"), "a"], "x": [1.0, 1.0]})
    keys = [decimal.Decimal("1.5"), "a", 1]
    out = df.pipe(dp_count, by="k", keys=keys, random_state=secure_rng(2), **EXACT)
    assert np.rint(out["value"].to_numpy()).tolist() == [1.0, 1.0, 0.0]


def test_equal_decimal_keys_are_one_key_twice() -> None:
    df = pd.DataFrame({"k": [decimal.Decimal("1.0")], "x": [1.0]})
    with pytest.raises(InvalidParameterError, match="twice"):
        df.pipe(dp_count, by="k", keys=[decimal.Decimal("1.0"), decimal.Decimal("1.00")], **EXACT)


def test_keys_that_match_nothing_never_collide() -> None:
    """A string and a date on a float column match no row: they are released as empty groups."""
    df = _frame(pd.Series([1.0]))
    out = df.pipe(dp_count, by="k", keys=[1.0, "1", dt.date(2024, 1, 1)], random_state=secure_rng(3), **EXACT)
    assert np.rint(out["value"].to_numpy()).tolist() == [1.0, 0.0, 0.0]


def test_several_columns_collide_only_when_every_part_does() -> None:
    df = pd.DataFrame({"a": [2.0**53], "b": ["x"], "x": [1.0]})
    ok = df.pipe(
        dp_count, by=["a", "b"], keys=[(2**53, "x"), (2**53 + 1, "y")], random_state=secure_rng(4), **EXACT
    )
    assert np.rint(ok["value"].to_numpy()).tolist() == [1.0, 0.0]
    with pytest.raises(InvalidParameterError, match="positions 0 and 1"):
        df.pipe(dp_count, by=["a", "b"], keys=[(2**53, "x"), (2**53 + 1, "x")], **EXACT)


_NEAR = hs.integers(min_value=2**53 - 8, max_value=2**53 + 8)
_KEYS = hs.lists(hs.one_of(_NEAR, _NEAR.map(float), hs.integers(-3, 3)), min_size=1, max_size=6, unique=True)


@settings(max_examples=60, deadline=None)
@example(keys=[2**53, 2**53 + 1], rows=[2**53])
@given(keys=_KEYS, rows=hs.lists(hs.one_of(_NEAR, hs.integers(-3, 3)), min_size=0, max_size=8))
def test_released_keys_are_one_to_one_with_values_of_the_column_type(
    keys: list[Any], rows: list[int]
) -> None:
    """Either the keys are refused, and two of them are one float64 (computed here with Python's float),
    or every row whose float64 value is declared is credited to exactly one key."""
    df = pd.DataFrame({"k": np.array(rows, dtype=np.float64), "x": np.ones(len(rows))})
    as_floats = [float(k) for k in keys]
    try:
        out = df.pipe(dp_count, by="k", keys=keys, random_state=secure_rng(5), **EXACT)
    except InvalidParameterError as exc:
        assert len(set(as_floats)) < len(set(keys)) or "twice" in str(exc)
        return
    assert len(set(as_floats)) == len(keys)
    counts = np.rint(out["value"].to_numpy())
    want = [sum(float(r) == f for r in rows) for f in as_floats]
    assert counts.tolist() == want
