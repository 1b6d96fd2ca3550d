"""bounds="dp" for dp_sum, dp_mean and add_noise: one fixed charge, learned bounds inside the outer range,
clipping."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import ApproxDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError
from dp_pipeline.frames import add_noise, dp_mean, dp_sum
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
    before = ledger_entries(acct.store, "d")
    with pytest.raises(BudgetExceededError):
        df.pipe(dp_sum, "x", bounds="dp", outer=(0, 60), epsilon=0.5, accountant=acct, dataset="d")
    assert ledger_entries(acct.store, "d") == before


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


# --------------------------------------------------------------------------------------------------------
# add_noise


def frame(n: int = 2_000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.normal(50.0, 10.0, n), "score": rng.uniform(0.0, 1.0, n)})


@pytest.mark.parametrize(
    ("mechanism", "delta", "release_kinds"),
    [
        ("laplace", None, ["laplace"] * 2),
        ("staircase", None, ["staircase"] * 2),
        ("gaussian", 1e-6, ["gaussian"]),
    ],
)
def test_add_noise_charges_the_search_and_the_release_once(
    mechanism: str, delta: float | None, release_kinds: list[str]
) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(5.0) if delta is None else ApproxDP(5.0, 1e-5))
    out = frame().pipe(
        add_noise,
        ["age", "score"],
        epsilon=1.0,
        mechanism=mechanism,
        delta=delta,
        bounds="dp",
        outer=(0.0, {"age": 120.0, "score": 1.0}),
        accountant=acct,
        dataset="d",
    )
    (entry,) = charges(acct)
    (event,) = entry.events
    parts = event.parts
    # 10% of ε over 2 quantiles of 2 columns, 90% for the release's noise
    assert [p.kind for p in parts[:4]] == ["exponential"] * 4
    assert all(p.guarantee.epsilon == 0.025 for p in parts[:4])
    assert [p.kind for p in parts[4:]] == release_kinds
    assert acct.spent("d").epsilon == pytest.approx(1.0) and acct.spent("d").epsilon <= 1.0
    assert set(out.attrs["bounds"]) == {"age", "score"}


def test_add_noise_costs_the_same_whatever_the_data() -> None:
    charged = []
    for data in (np.linspace(0.0, 1.0, 500), np.full(500, 90.0), np.r_[np.zeros(499), 1e9]):
        acct = _acct(10.0)
        pd.DataFrame({"x": data}).pipe(
            add_noise, "x", epsilon=1.0, bounds="dp", outer=(0, 100), accountant=acct, dataset="d"
        )
        (entry,) = charges(acct)
        charged.append(entry.events[0].to_dict())
    assert charged[0] == charged[1] == charged[2]


def test_add_noise_clips_to_the_learned_bounds_and_calibrates_to_them() -> None:
    n, epsilon = 20_000, 50.0
    data = np.r_[np.random.default_rng(2).uniform(10.0, 20.0, n - 10), np.full(10, 900.0)]
    out = pd.DataFrame({"x": data}).pipe(
        add_noise,
        "x",
        epsilon=epsilon,
        bounds="dp",
        outer=(0.0, 1000.0),
        accountant="unaccounted",
        random_state=secure_rng(4),
    )
    low, high = out.attrs["bounds"]["x"]
    assert 0.0 <= low < high < 900.0  # the outliers are clipped
    # Laplace noise of scale (high − low)/ε_release on the clipped values (90% of ε)
    noise = out["x"].to_numpy() - np.clip(data, low, high)
    scale = (high - low) / (0.9 * epsilon)
    assert stats.kstest(noise, stats.laplace(scale=scale).cdf).pvalue > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bounds": "dp"}, "outer"),
        ({"bounds": "dp", "outer": (3, 3)}, "outer"),
        ({"bounds": "dp", "outer": ({"x": 0}, 9)}, "outer"),
        ({"bounds": "dp", "outer": (0, 9), "upper": 9}, "bounds"),
        ({"bounds": "dp", "outer": (0, 9), "sensitivity": 1.0}, "sensitivity"),
        ({"bounds": "data", "outer": (0, 9)}, "bounds"),
    ],
)
def test_add_noise_bad_bounds_are_refused_and_charge_nothing(kwargs: dict[str, Any], match: str) -> None:
    acct = _acct(10.0)
    df = pd.DataFrame({"x": [31337.25, 2.0], "y": [1.0, 2.0]})
    with pytest.raises(InvalidParameterError, match=match) as info:
        df.pipe(add_noise, ["x", "y"], epsilon=1.0, accountant=acct, dataset="d", **kwargs)
    assert "31337" not in str(info.value)
    assert charges(acct) == []
