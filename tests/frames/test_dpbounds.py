"""bounds="dp" for dp_sum and dp_mean: one fixed charge, learned bounds inside the outer range, clipping."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError
from dp_pipeline.frames import dp_mean, dp_sum
from dp_pipeline.mechanisms import secure_rng
from tests.frames.conftest import charges


def _acct(epsilon: float, relation: str = "replace_one") -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(epsilon), relation=relation)
    return acct


@pytest.mark.parametrize("function", [dp_sum, dp_mean])
def test_one_charge_with_the_search_and_release_parts(function: Any) -> None:
    acct = _acct(5.0)
    df = pd.DataFrame({"x": np.linspace(-3, 3, 200)})
    out = df.pipe(function, "x", bounds="dp", outer=(-10, 10), epsilon=1.0, accountant=acct, dataset="d")
    assert len(charges(acct)) == 1
    assert acct.spent("d").epsilon == pytest.approx(1.0) and acct.spent("d").epsilon <= 1.0 + 1e-12
    parts = out.attrs["cost"]["parts"]
    # 10% for the two quantiles (ε/20 each), 90% for the release (dp_mean: two Laplace parts of 0.45)
    assert [p["kind"] for p in parts[:2]] == ["exponential"] * 2
    assert [p["guarantee"]["epsilon"] for p in parts[:2]] == [pytest.approx(0.05)] * 2
    release = [p["guarantee"]["epsilon"] for p in parts[2:]]
    assert sum(release) == pytest.approx(0.9) and len(release) == (2 if function is dp_mean else 1)


@pytest.mark.parametrize("relation", ["replace_one", "add_remove"])
def test_the_cost_does_not_depend_on_the_data(relation: str) -> None:
    spent = []
    for data in (np.linspace(0.5, 9, 300), np.linspace(-1, 1, 300), np.full(300, -4.0)):
        acct = _acct(10.0, relation)
        pd.DataFrame({"x": data}).pipe(
            dp_sum, "x", bounds="dp", outer=(-5, 9), epsilon=1.0, accountant=acct, dataset="d"
        )
        spent.append(acct.spent("d").epsilon)
    assert spent[0] == spent[1] == spent[2]


def test_a_refusal_charges_nothing() -> None:
    acct = _acct(1.0)
    df = pd.DataFrame({"x": np.arange(50.0)})
    df.pipe(dp_mean, "x", bounds="dp", outer=(0, 60), epsilon=0.75, accountant=acct, dataset="d")
    before = acct.records("d")
    with pytest.raises(BudgetExceededError):
        df.pipe(dp_sum, "x", bounds="dp", outer=(0, 60), epsilon=0.5, accountant=acct, dataset="d")
    assert acct.records("d") == before


def test_learned_bounds_are_the_noisy_percentiles_inside_the_outer_range() -> None:
    n = 20_000
    data = np.random.default_rng(1).normal(0.0, 1.0, n)
    epsilon, outer = 4.0, (-10.0, 10.0)
    out = pd.DataFrame({"x": data}).pipe(
        dp_mean,
        "x",
        bounds="dp",
        outer=outer,
        epsilon=epsilon,
        accountant="unaccounted",
        random_state=secure_rng(3),
    )
    low, high = out.attrs["lower"], out.attrs["upper"]
    assert outer[0] <= low < high <= outer[1] and out.attrs["outer"] == outer
    assert low <= out["value"] <= high
    # the exponential mechanism's rank bound (McSherry & Talwar, Thm 8) with ε/20 per quantile, Δu = 1,
    # 2¹⁶ + 1 candidates, failure 1e-6 each; plus one rank for the grid
    radius = 2.0 / (epsilon / 20) * (math.log(2**16 + 1) + math.log(1e6)) + 1
    assert abs(np.sum(data < low) - 0.01 * n) <= radius
    assert abs(np.sum(data < high) - 0.99 * n) <= radius


def test_the_sum_is_clipped_to_the_learned_bounds() -> None:
    data = np.r_[np.linspace(0, 10, 1000), [1e3] * 5]  # outliers above the 99th percentile
    out = pd.DataFrame({"x": data}).pipe(
        dp_sum,
        "x",
        bounds="dp",
        outer=(0, 2e3),
        epsilon=1e4,
        accountant="unaccounted",
        random_state=secure_rng(5),
    )
    low, high = out.attrs["lower"], out.attrs["upper"]
    assert high < 1e3  # the outliers are clipped
    assert out["value"] == pytest.approx(np.clip(data, low, high).sum(), abs=1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bounds": "dp"}, "outer"),
        ({"bounds": "dp", "outer": (5, 5)}, "upper"),
        ({"bounds": "dp", "outer": (9, 1)}, "upper"),
        ({"bounds": "dp", "outer": (0, 9), "lower": 0, "upper": 9}, "bounds"),
        ({"bounds": "data", "outer": (0, 9)}, "bounds"),
        ({"bounds": "dp", "outer": 7}, "outer"),
    ],
)
@pytest.mark.parametrize("function", [dp_sum, dp_mean])
def test_bad_input_is_refused_and_charges_nothing(function: Any, kwargs: dict[str, Any], match: str) -> None:
    acct = _acct(10.0)
    df = pd.DataFrame({"x": [31337.25, 2.0]})
    with pytest.raises(InvalidParameterError, match=match) as info:
        df.pipe(function, "x", epsilon=1.0, accountant=acct, dataset="d", **kwargs)
    assert "31337" not in str(info.value)
    assert charges(acct) == []
