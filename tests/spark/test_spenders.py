"""The Spark frame functions are paid by each spender as the pandas ones are: an accountant with
``dataset=``, a dataset handle and a reservation each charge one release of the ε asked, and a release that
does not fit is refused with the ledger unchanged. The Spark engine is found through the registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dp_pipeline import BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.frames._registry import engine_of
from dp_pipeline.spark import add_noise, dp_count, dp_mean, randomized_response
from dp_pipeline.spark._engine import SparkEngine

HELD = 0.5

RELEASES: dict[str, Callable[..., Any]] = {
    "dp_count": lambda sdf, eps, **who: dp_count(sdf, epsilon=eps, **who).toPandas(),
    "dp_mean": lambda sdf, eps, **who: dp_mean(sdf, "x", lower=0, upper=10, epsilon=eps, **who).toPandas(),
    "add_noise": lambda sdf, eps, **who: add_noise(sdf, ["x"], lower=0, upper=10, epsilon=eps, **who).count(),
    "randomized_response": lambda sdf, eps, **who: randomized_response(
        sdf, "yes", epsilon=eps, **who
    ).count(),
}

SPENDERS: dict[str, Callable[[PrivacyAccountant], dict[str, Any]]] = {
    "accountant and dataset": lambda acct: {"accountant": acct, "dataset": "d"},
    "handle": lambda acct: {"accountant": acct.dataset("d")},
    "reservation": lambda acct: {"accountant": acct.reservation("d", "task")},
}


def _ledger() -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    acct.reserve("d", PureDP(HELD), key="task")
    return acct


def _frame(spark: Any) -> Any:
    return spark.createDataFrame([(float(i % 10), i % 3 == 0) for i in range(60)], "x double, yes boolean")


def test_a_spark_frame_is_read_by_the_registered_spark_engine(spark: Any) -> None:
    assert isinstance(engine_of(_frame(spark)), SparkEngine)


@pytest.mark.parametrize("spender", list(SPENDERS))
@pytest.mark.parametrize("release", list(RELEASES))
def test_each_spender_pays_one_spark_release(spark: Any, release: str, spender: str) -> None:
    acct = _ledger()
    RELEASES[release](_frame(spark), 0.25, **SPENDERS[spender](acct))
    ((epsilon, paid_from),) = [(e.cost.epsilon, e.paid_from) for e in acct.history("d") if e.key != "task"]
    assert epsilon == pytest.approx(0.25, rel=1e-9)
    assert paid_from == ("task" if spender == "reservation" else None)


@pytest.mark.parametrize("spender", list(SPENDERS))
def test_each_spender_refuses_a_spark_release_and_changes_nothing(spark: Any, spender: str) -> None:
    acct = _ledger()
    before = acct.store.records("d")
    with pytest.raises(BudgetExceededError):
        RELEASES["dp_mean"](_frame(spark), 0.75, **SPENDERS[spender](acct))
    assert acct.store.records("d") == before
