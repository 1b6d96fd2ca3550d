"""A Spark frame function given ``accountant=reservation`` pays from it, as the pandas functions do: the
dataset is charged once (the reservation), each release is a payment under it, and a release beyond what is
left is refused before any Spark job runs."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from dp_pipeline import ApproxDP, BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.spark import dp_count, dp_mean


def test_spark_releases_pay_from_a_reservation_and_charge_once(spark: Any) -> None:
    sdf = spark.createDataFrame([(float(i % 10),) for i in range(200)], "x double")
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(3.0))
    task = acct.reserve("d", PureDP(1.0), key="task")
    dp_mean(sdf, "x", lower=0, upper=10, epsilon=0.4, accountant=task, dataset="d").toPandas()
    dp_count(sdf, epsilon=0.4, accountant=task, dataset="d").toPandas()
    with pytest.raises(BudgetExceededError, match="reservation 'task'"):  # 0.8 paid, 0.2 left
        dp_count(sdf, epsilon=0.3, accountant=task, dataset="d")
    task.commit()
    paid = [entry for entry in acct.history("d") if entry.paid_from == "task"]
    costs = [entry.cost for entry in paid]
    assert len(costs) == 2 and all(isinstance(cost, ApproxDP) and cost.delta == 0 for cost in costs)
    assert sum(Fraction(cost.epsilon) for cost in costs if isinstance(cost, ApproxDP)) == Fraction(0.4) * 2
    assert [record.kind for record in ledger_entries(acct.store, "d")] == [
        "budget",
        "reserve",
        "pay",
        "pay",
        "commit",
    ]
    assert acct.spent("d").epsilon == 1.0  # the reservation alone
