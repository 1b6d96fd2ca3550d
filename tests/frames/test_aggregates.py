"""DP count, sum, mean and histogram: sensitivity from the declared unit and bounds, honest error bars."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import (
    ApproxDP,
    BudgetExceededError,
    InvalidParameterError,
    PrivacyAccountant,
    PrivacyLeakWarning,
    PureDP,
)
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.frames import add_noise, dp_count, dp_histogram, dp_mean, dp_sum, randomized_response
from dp_pipeline.mechanisms import Gaussian

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
EXACT = 1e9  # an ε so large that the noise is negligible: the value is the exact (bounded) statistic


def visits() -> pd.DataFrame:
    """Person p1 has 10 visits, p2 one, p3 three."""
    return pd.DataFrame(
        {
            "person": ["p1"] * 10 + ["p2"] + ["p3"] * 3,
            "cost": [float(v) for v in range(1, 11)] + [50.0] + [200.0, 5.0, 5.0],
            "ward": ["a"] * 5 + ["b"] * 5 + ["a"] + ["c"] * 3,
        }
    )


def many_keys(n_keys: int = 3000, seed: int = 1000) -> tuple[pd.DataFrame, list[int]]:
    rng = np.random.default_rng(seed)
    keys = list(range(n_keys))
    return pd.DataFrame({"key": rng.integers(0, n_keys, 20 * n_keys)}), keys


def test_count_is_one_release_charged_once(acct: PrivacyAccountant) -> None:
    result = visits().pipe(dp_count, epsilon=0.5, accountant=acct, dataset="d", random_state=0)
    assert list(result.index) == ["value", "std_error", "ci_low", "ci_high"]
    (entry,) = charges(acct)
    assert entry.guarantee == ApproxDP(0.5, 0.0) and entry.label == "dp_count"
    assert result.attrs["noise_std"] == [pytest.approx(math.sqrt(2) / 0.5)]


def test_grouped_count_noise_is_laplace_of_scale_2m_over_epsilon_and_the_interval_covers() -> None:
    df, keys = many_keys()
    exact = df["key"].value_counts().reindex(keys, fill_value=0).to_numpy()
    result = df.pipe(dp_count, by="key", keys=keys, epsilon=0.8, random_state=1, **OPT_OUT)
    noise = result["value"].to_numpy() - exact
    # replace-one (the default): one person's row leaves one key and joins another, L1 sensitivity 2
    assert stats.kstest(noise, stats.laplace(scale=2 / 0.8).cdf).pvalue > 1e-3
    covered = int(((result["ci_low"] <= exact) & (exact <= result["ci_high"])).sum())
    # ci_low is clipped at 0, which only widens the interval; coverage is 95% exactly otherwise
    assert stats.binomtest(covered, len(keys), 0.95).pvalue > 1e-3


def test_gaussian_count_uses_the_mechanisms_sigma() -> None:
    df, keys = many_keys(2000, seed=1002)
    exact = df["key"].value_counts().reindex(keys, fill_value=0).to_numpy()
    result = df.pipe(
        dp_count,
        by="key",
        keys=keys,
        epsilon=1.0,
        mechanism="gaussian",
        delta=1e-6,
        random_state=3,
        **OPT_OUT,
    )
    sigma = Gaussian(epsilon=1.0, delta=1e-6, sensitivity=math.sqrt(2.0)).sigma  # replace-one: L2 √2
    assert result["std_error"].to_numpy() == pytest.approx(np.full(len(keys), sigma), rel=1e-9)
    assert stats.kstest(result["value"].to_numpy() - exact, stats.norm(scale=sigma).cdf).pvalue > 1e-3


def test_contributions_are_bounded_per_person_and_scale_the_noise() -> None:
    df = visits()
    result = df.pipe(dp_count, epsilon=EXACT, privacy_unit="person", max_contributions=2, **OPT_OUT)
    assert result["value"] == pytest.approx(2 + 1 + 2, abs=1e-6)
    result = df.pipe(dp_count, epsilon=1.0, privacy_unit="person", max_contributions=3, **OPT_OUT)
    assert result.attrs["noise_std"] == [pytest.approx(math.sqrt(2) * 3)]  # Laplace scale m/ε = 3


def test_the_rows_kept_for_a_person_are_a_random_sample() -> None:
    df = visits()[lambda d: d["person"] == "p1"]  # costs 1, 2, …, 10
    sums = {
        round(
            df.pipe(
                dp_sum,
                "cost",
                lower=0,
                upper=10,
                epsilon=EXACT,
                privacy_unit="person",
                max_contributions=2,
                random_state=seed,
                **OPT_OUT,
            )["value"]
        )
        for seed in range(30)
    }
    assert len(sums) > 5  # not always the first two rows
    assert sums <= {a + b for a in range(1, 11) for b in range(1, 11) if a != b}


def test_sum_clips_to_the_declared_bounds_and_scales_noise_to_them() -> None:
    df = visits()
    result = df.pipe(dp_sum, "cost", lower=0, upper=60, epsilon=EXACT, **OPT_OUT)
    assert result["value"] == pytest.approx(df["cost"].clip(0, 60).sum(), abs=1e-6)
    result = df.pipe(
        dp_sum,
        "cost",
        lower=-80,
        upper=60,
        epsilon=2.0,
        privacy_unit="person",
        max_contributions=4,
        **OPT_OUT,
    )
    # replace-one: one person's ≤ 4 rows summing in [−320, 0] are replaced by rows summing in [0, 240]
    assert result.attrs["noise_std"] == [pytest.approx(math.sqrt(2) * 4 * 140 / 2.0)]


def test_grouped_sum_over_declared_keys() -> None:
    result = visits().pipe(
        dp_sum, "cost", lower=0, upper=100, by="ward", keys=["a", "b", "z"], epsilon=EXACT, **OPT_OUT
    )
    assert result["value"].to_numpy() == pytest.approx([15.0 + 50.0, 40.0, 0.0], abs=1e-6)  # ward c left out


def test_mean_is_centred_sum_over_count_and_its_interval_covers() -> None:
    rng = np.random.default_rng(1004)
    df = pd.DataFrame({"age": rng.uniform(20, 80, 4000), "sex": rng.choice(["f", "m"], 4000)})
    result = df.pipe(dp_mean, "age", lower=0, upper=100, epsilon=EXACT, **OPT_OUT)
    assert result["value"] == pytest.approx(df["age"].mean(), abs=1e-6)
    # Laplace on (S/50, N/1): one 2-dimensional release, ε/2 for each part
    result = df.pipe(dp_mean, "age", lower=0, upper=100, epsilon=1.0, **OPT_OUT)
    # replace-one: the centred sum moves by up to 100 (50 → −50), the count by up to 1
    assert result.attrs["noise_std"] == pytest.approx([math.sqrt(2) * 2 * 100, math.sqrt(2) * 2 * 1])
    assert result.attrs["cost"]["kind"] == "composite" and result.attrs["relation"] == "replace_one"
    hits = 0
    for seed in range(200):
        r = df.pipe(dp_mean, "age", lower=0, upper=100, epsilon=0.05, random_state=seed, **OPT_OUT)
        hits += r["ci_low"] <= df["age"].mean() <= r["ci_high"]
    assert stats.binomtest(hits, 200, 0.95).pvalue > 1e-3  # the delta-method interval is about right


def test_mean_stays_in_the_bounds_when_the_count_is_tiny() -> None:
    df = pd.DataFrame({"x": [9.0]})
    for seed in range(20):
        r = df.pipe(dp_mean, "x", lower=0, upper=10, epsilon=0.1, random_state=seed, **OPT_OUT)
        assert 0.0 <= r["ci_low"] <= r["value"] <= r["ci_high"] <= 10.0


def test_histogram_over_declared_categories(acct: PrivacyAccountant) -> None:
    df = pd.DataFrame({"blood": ["A", "A", "B", "O", "Z"]})
    result = df.pipe(dp_histogram, "blood", categories=["A", "B", "AB", "O"], epsilon=EXACT, **OPT_OUT)
    assert list(result.index) == ["A", "B", "AB", "O"]
    assert result["value"].to_numpy() == pytest.approx([2, 1, 0, 1], abs=1e-6)
    df.pipe(dp_histogram, "blood", categories=["A", "B"], epsilon=0.5, accountant=acct, dataset="d")
    assert len(charges(acct)) == 1


def test_keys_from_the_data_warn() -> None:
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        result = visits().pipe(dp_count, by="ward", keys="data", epsilon=EXACT, **OPT_OUT)
    assert list(result.index) == ["a", "b", "c"]


def test_grouping_by_two_columns_takes_tuples() -> None:
    result = visits().pipe(
        dp_count,
        by=["ward", "person"],
        keys=[("a", "p1"), ("c", "p3"), ("b", "p2")],
        epsilon=EXACT,
        **OPT_OUT,
    )
    assert result["value"].to_numpy() == pytest.approx([5, 3, 0], abs=1e-6)


@pytest.mark.parametrize(
    ("func", "args", "kwargs"),
    [
        (dp_count, (), {}),
        (dp_count, (), {"by": "ward", "keys": ["a", "b"]}),
        (dp_sum, ("cost",), {"lower": 0, "upper": 10}),
        (dp_mean, ("cost",), {"lower": 0, "upper": 10, "by": "ward", "keys": ["a"]}),
        (dp_histogram, ("ward",), {"categories": ["a", "b", "c"]}),
    ],
)
def test_every_function_charges_once_and_a_refusal_charges_nothing(func: Any, args: Any, kwargs: Any) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    func(visits(), *args, epsilon=0.75, accountant=acct, dataset="d", **kwargs)
    assert len(charges(acct)) == 1 and acct.spent("d").epsilon == pytest.approx(0.75)
    before = ledger_entries(acct.store, "d")
    with pytest.raises(BudgetExceededError):
        func(visits(), *args, epsilon=0.75, accountant=acct, dataset="d", **kwargs)
    assert ledger_entries(acct.store, "d") == before


@pytest.mark.parametrize(
    ("func", "args", "kwargs"),
    [
        (dp_count, (), {}),
        (dp_sum, ("cost",), {"lower": 0, "upper": 10}),
        (dp_mean, ("cost",), {"lower": 0, "upper": 10}),
        (dp_histogram, ("ward",), {"categories": ["a", "b", "c"]}),
        (add_noise, ("cost",), {"lower": 0, "upper": 10}),
        (randomized_response, ("flag",), {}),
    ],
)
def test_group_size_is_charged_for_the_group(func: Any, args: Any, kwargs: Any) -> None:
    """group_size=k charges what the accountant prices for a group of k: ε·k for these pure releases."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0))
    frame = visits().assign(flag=lambda df: df["cost"] > 5)
    func(frame, *args, epsilon=0.5, accountant=acct, dataset="d", group_size=3, **kwargs)
    (entry,) = acct.history("d")
    assert entry.group_size == 3 and entry.cost == PureDP(1.5).to_approx_dp()
    with pytest.raises(BudgetExceededError, match="k = 3"):
        func(frame, *args, epsilon=3.0, accountant=acct, dataset="d", group_size=3, **kwargs)


@pytest.mark.parametrize("func", [dp_mean, dp_sum])
def test_a_bool_column_is_not_a_number(func: Any) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0))
    frame = pd.DataFrame({"smoker": [True, False, True]})
    with pytest.raises(InvalidParameterError, match="holds bools, not numbers") as info:
        func(frame, "smoker", lower=0, upper=1, epsilon=0.5, accountant=acct, dataset="d")
    assert info.value.parameter == "column" and charges(acct) == []
    func(frame.astype({"smoker": int}), "smoker", lower=0, upper=1, epsilon=0.5, accountant=acct, dataset="d")
