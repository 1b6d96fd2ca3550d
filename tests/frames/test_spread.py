"""DP variance and standard deviation: the estimate, its conservative interval, charging and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError
from dp_pipeline.frames import dp_std, dp_var
from dp_pipeline.frames._spread import _variance_range
from dp_pipeline.mechanisms import secure_rng
from tests.frames.conftest import charges

finite = st.floats(-1e3, 1e3)
radius = st.floats(0.0, 1e2)


@settings(max_examples=300, deadline=None)
@given(finite, st.floats(-1e3, 1e4), st.floats(-5.0, 1e3), radius, radius, radius, st.integers(0, 2**32))
def test_the_interval_holds_the_variance_of_every_point_of_the_box(
    s1: float, s2: float, count: float, a: float, b: float, c: float, seed: int
) -> None:
    cap = 1e9
    low, high = _variance_range(*(np.array([v]) for v in (s1, s2, count, a, b, c)), cap)
    rng = np.random.default_rng(seed)
    p1 = s1 + a * rng.uniform(-1, 1, 500)
    p2 = np.maximum(s2 + b * rng.uniform(-1, 1, 500), 0.0)
    n = count + c * rng.uniform(-1, 1, 500)
    keep = n >= 1.0
    f = np.clip(p2[keep] / n[keep] - (p1[keep] / n[keep]) ** 2, 0.0, cap)
    assert np.all(f >= low[0] - 1e-9 * (1 + abs(low[0]))) and np.all(f <= high[0] + 1e-9 * (1 + abs(high[0])))


@pytest.mark.slow
@pytest.mark.parametrize(("function", "mechanism"), [(dp_var, "laplace"), (dp_std, "gaussian")])
def test_the_interval_covers_at_least_the_stated_rate(function: Any, mechanism: str) -> None:
    runs, level = 150, 0.8
    rng, hits = np.random.default_rng(11), 0
    for seed in range(runs):
        data = rng.exponential(2.0, 300)
        truth = np.clip(data, 0, 10).var()
        out = pd.DataFrame({"x": data}).pipe(
            function,
            "x",
            lower=0,
            upper=10,
            epsilon=1.0,
            accountant="unaccounted",
            level=level,
            mechanism=mechanism,
            delta=1e-6 if mechanism == "gaussian" else None,
            random_state=secure_rng(seed),
        )
        if function is dp_std:
            truth = np.sqrt(truth)
        hits += out["ci_low"] <= truth <= out["ci_high"]
    assert stats.binomtest(hits, runs, level, alternative="less").pvalue > 1e-3


def test_the_estimate_is_close_and_clamped() -> None:
    data = np.random.default_rng(1).normal(5.0, 2.0, 20_000)
    out = pd.DataFrame({"x": data}).pipe(
        dp_var, "x", lower=0, upper=10, epsilon=1.0, accountant="unaccounted", random_state=secure_rng(1)
    )
    truth = np.clip(data, 0, 10).var()
    assert abs(out["value"] - truth) < 10 * out["std_error"] and 0.0 <= out["value"] <= 25.0
    empty = pd.DataFrame({"x": [1.0], "g": ["a"]}).pipe(
        dp_std, "x", lower=0, upper=10, epsilon=1.0, accountant="unaccounted", by="g", keys=["a", "z"]
    )
    assert ((empty["value"] >= 0) & (empty["value"] <= 5) & (empty["ci_high"] <= 5)).all()


def test_one_charge_of_three_parts_and_a_refusal_charges_nothing() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    df = pd.DataFrame({"x": np.arange(30.0)})
    out = df.pipe(dp_std, "x", lower=0, upper=40, epsilon=0.75, accountant=acct, dataset="d")
    assert len(charges(acct)) == 1 and acct.spent("d").epsilon == pytest.approx(0.75)
    assert len(out.attrs["cost"]["parts"]) == 3
    before = ledger_entries(acct.store, "d")
    with pytest.raises(BudgetExceededError):
        df.pipe(dp_var, "x", lower=0, upper=40, epsilon=0.5, accountant=acct, dataset="d")
    assert ledger_entries(acct.store, "d") == before


def test_bad_bounds_are_refused_without_quoting_data() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    df = pd.DataFrame({"x": [31337.25]})
    with pytest.raises(InvalidParameterError) as info:
        df.pipe(dp_var, "x", lower=5, upper=0, epsilon=0.5, accountant=acct, dataset="d")
    assert "31337" not in str(info.value) and charges(acct) == []
