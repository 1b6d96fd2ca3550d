"""The frame functions on a Spark Connect session as on a classic one, and no charge before a function
knows it can return: what can fail without reading the data fails before the ledger is touched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dp_pipeline import InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline import spark as dps
from dp_pipeline.frames._noise import RR_ATTRS
from tests.frames.conftest import charges
from tests.spark.test_aggregates import CALLS, patients

pytestmark = pytest.mark.spark


@pytest.fixture
def acct() -> Iterator[PrivacyAccountant]:
    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("d", PureDP(10.0))
    yield accountant
    accountant.close()


def test_randomized_response_returns_its_reports_and_their_record_after_one_charge(
    any_spark: Any, acct: PrivacyAccountant
) -> None:
    """On Spark Connect ``getattr(sdf, "attrs")`` is a column: the release used to be charged, then crash."""
    sdf = any_spark.createDataFrame(patients())
    wards = ["a", "b", "c"]
    out = dps.randomized_response(sdf, "ward", categories=wards, epsilon=0.5, accountant=acct, dataset="d")
    reports = out.toPandas()
    assert len(reports) == len(patients()) and set(reports["ward"]) <= {"a", "b", "c"}
    assert out.attrs[RR_ATTRS]["ward"] == {"epsilon": 0.5, "categories": ["a", "b", "c"]}
    (entry,) = charges(acct)
    assert entry.status == "committed" and acct.spent("d").epsilon == pytest.approx(0.5)


def test_noise_with_learned_bounds_returns_the_bounds_after_one_charge(
    any_spark: Any, acct: PrivacyAccountant
) -> None:
    sdf = any_spark.createDataFrame(patients())
    out = dps.add_noise(sdf, "age", bounds="dp", outer=(0, 200), epsilon=0.5, accountant=acct, dataset="d")
    assert out.count() == len(patients())
    ((column, (low, high)),) = out.attrs["bounds"].items()
    assert column == "age" and 0 <= low <= high <= 200
    (entry,) = charges(acct)
    assert entry.status == "committed" and acct.spent("d").epsilon == pytest.approx(0.5)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_plan_that_cannot_run_is_refused_before_the_charge(
    connect_spark: Any, acct: PrivacyAccountant, name: str
) -> None:
    """A Spark Connect DataFrame is analysed only when asked: one whose plan names a missing table column
    fails on its first analysis, which every function makes (the schema) before it charges."""
    connect_spark.createDataFrame(patients()).createOrReplaceTempView("patients_view")
    sdf = connect_spark.table("patients_view").selectExpr("*", "no_such_column AS extra")
    with pytest.raises(Exception, match="no_such_column"):
        CALLS[name](dps, sdf, epsilon=0.5, accountant=acct, dataset="d")
    assert acct.history("d") == [] and acct.spent("d").epsilon == 0.0


@pytest.mark.parametrize("keys", [["a", 1], ["a", 2.5]], ids=["int", "float"])
def test_a_key_no_spark_result_can_hold_is_refused_before_the_charge(
    any_spark: Any, acct: PrivacyAccountant, keys: list[Any]
) -> None:
    """The result holds the keys in the column's type; a key of another type used to be charged and then
    fail to become a Spark Connect table (Arrow refuses a column of strings and numbers)."""
    sdf = any_spark.createDataFrame(patients())
    with pytest.raises(InvalidParameterError, match="1 declared value") as refused:
        dps.dp_count(sdf, by="ward", keys=keys, epsilon=0.5, accountant=acct, dataset="d")
    assert refused.value.parameter == "keys"
    assert acct.history("d") == [] and acct.spent("d").epsilon == 0.0
