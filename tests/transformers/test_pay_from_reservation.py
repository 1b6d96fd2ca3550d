"""A transformer and a pandas function given ``accountant=reservation`` pay from it: the dataset is charged
once (the reservation), and each release is a payment under it."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from dp_pipeline import BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.frames import dp_mean
from dp_pipeline.transformers import LaplaceNoise

X = np.random.default_rng(7).uniform(0.0, 10.0, (50, 2))


def test_dp_mean_and_a_transformer_paid_from_a_reservation_charge_once() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(3.0))
    task = acct.reserve("d", PureDP(1.0), key="task")
    frame = pd.DataFrame({"x": X[:, 0]})
    frame.pipe(dp_mean, "x", lower=0, upper=10, epsilon=0.5, accountant=task, dataset="d")
    clone(LaplaceNoise(epsilon=0.5, lower=0.0, upper=10.0, accountant=task, dataset="d")).fit_transform(X)
    task.commit()
    paid = [e for e in acct.history("d") if e.paid_from == "task"]
    assert [e.label for e in paid] == ["dp_mean of 'x'", "LaplaceNoise.transform (2 feature(s))"]
    assert [e.kind for e in ledger_entries(acct.store, "d")] == ["budget", "reserve", "pay", "pay", "commit"]
    # charged once: the reservation; the payments sum (exactly) to no more than it holds
    assert acct.spent("d").epsilon == 1.0
    total = sum(Fraction(e.cost.epsilon) for e in paid)  # type: ignore[union-attr]
    assert total <= 1 and Fraction(task.spent().epsilon) >= total
    with pytest.raises(BudgetExceededError, match="reservation 'task'"):
        LaplaceNoise(epsilon=0.5, lower=0.0, upper=10.0, accountant=task, dataset="d").fit_transform(X)
    assert acct.spent("d").epsilon == 1.0
