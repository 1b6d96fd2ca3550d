"""DP quantiles: exact selection probabilities, sensitivity, accuracy, charging and errors."""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_pipeline import PrivacyAccountant, PureDP, _quantile
from dp_pipeline._quantile import quantile_mechanism, select_quantile
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError
from dp_pipeline.frames import dp_median, dp_quantile, dp_quantiles
from dp_pipeline.mechanisms import secure_rng
from dp_pipeline.testing import audit
from tests.frames.conftest import charges


def utility(data: list[float], c: float, q: float) -> float:
    """−|#{x < c} − q·n|, straight from the definition."""
    return -abs(sum(1 for x in data if x < c) - q * len(data))


def brute_force(data: list[float], grid: np.ndarray, q: float, eps: float, sens: float) -> list[float]:
    """P(grid point) ∝ exp(ε·u/(2Δu)) over the grid points, in 50-digit arithmetic."""
    with mpmath.workdps(50):
        mass = [mpmath.exp(mpmath.mpf(eps) * utility(data, float(c), q) / (2 * sens)) for c in grid]
        total = mpmath.fsum(mass)
        return [float(m / total) for m in mass]


@pytest.mark.slow
def test_selection_frequencies_match_the_brute_force_distribution() -> None:
    data = np.sort(np.array([0.1, 0.15, 0.4, 0.42, 0.9]))
    grid = np.linspace(0.0, 1.0, 9)
    mech = quantile_mechanism(1.5, grouped=False, relation="replace_one", m=1)
    rng = secure_rng(5)
    draws = [select_quantile(mech, data, grid, 0.5, rng) for _ in range(20_000)]
    observed = np.array([draws.count(float(c)) for c in grid])
    expected = 20_000 * np.array(brute_force(list(data), grid, 0.5, 1.5, 1.0))
    assert observed.sum() == 20_000
    assert stats.chisquare(observed, expected).pvalue > 1e-3


@st.composite
def neighbours(draw: Any) -> tuple[int, list[float], list[float], list[float]]:
    """m, the others' rows, and an old and a new person's rows (each at most m rows)."""
    m = draw(st.integers(1, 3))
    value = st.floats(0.0, 1.0)
    others = draw(st.lists(value, max_size=8))
    return m, others, draw(st.lists(value, max_size=m)), draw(st.lists(value, max_size=m))


@settings(max_examples=300, deadline=None)
@given(neighbours(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_no_person_changes_a_utility_by_more_than_its_sensitivity(case: Any, q: float, c: float) -> None:
    m, others, old, new = case
    for relation, before in (("replace_one", others + old), ("add_remove", others)):
        sens = quantile_mechanism(1.0, grouped=False, relation=relation, m=m).sensitivity
        change = utility(others + new, c, q) - utility(before, c, q)
        assert abs(change) <= sens * (1 + 1e-12)


class _MedianRelease:
    """The median of one of two neighbouring datasets (0: without the last row, 1: with it), small grid."""

    def __init__(self) -> None:
        self.mech = quantile_mechanism(1.0, grouped=False, relation="add_remove", m=1)
        self.guarantee = self.mech.guarantee
        self.data = {0: np.array([0.1, 0.2, 0.3]), 1: np.array([0.1, 0.2, 0.3, 0.35])}
        self.grid = np.linspace(0.0, 1.0, 11)

    def randomize(self, values: Any, rng: Any = None) -> Any:
        return np.array([select_quantile(self.mech, self.data[int(v)], self.grid, 0.5, rng) for v in values])


@pytest.mark.slow
def test_the_auditor_finds_no_violation_on_neighbouring_datasets() -> None:
    report = audit(_MedianRelease(), (0, 1), samples=20_000)
    assert report.consistent, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("q", [0.25, 0.5, 0.75])
def test_quantiles_land_within_the_rank_error_at_the_stated_rate(q: float) -> None:
    runs, level, n = 120, 0.9, 400
    rng, hits = np.random.default_rng(7), 0
    radius = math.inf
    for seed in range(runs):
        data = rng.normal(0.0, 1.0, n)
        out = pd.DataFrame({"x": data}).pipe(
            dp_quantile,
            "x",
            q,
            lower=-5,
            upper=5,
            epsilon=0.5,
            accountant="unaccounted",
            level=level,
            random_state=secure_rng(seed),
        )
        radius = out["rank_error"]
        rank = int(np.searchsorted(np.sort(data), out["value"], side="left"))
        hits += abs(rank - q * n) <= radius + 1  # + 1: the best grid point's rank is within ½ of q·n
    assert radius < n / 4  # the bound says something at this n
    assert stats.binomtest(hits, runs, level, alternative="less").pvalue > 1e-3


def test_one_charge_per_call_and_a_refusal_charges_nothing() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    df = pd.DataFrame({"x": np.arange(50.0), "g": ["a", "b"] * 25})
    out = df.pipe(
        dp_quantiles, "x", [0.1, 0.5, 0.9], lower=0, upper=60, epsilon=0.75, accountant=acct, dataset="d"
    )
    assert len(charges(acct)) == 1 and acct.spent("d").epsilon == pytest.approx(0.75)
    assert [p["guarantee"]["epsilon"] for p in out.attrs["cost"]["parts"]] == [pytest.approx(0.25)] * 3
    before = ledger_entries(acct.store, "d")
    with pytest.raises(BudgetExceededError):
        df.pipe(dp_median, "x", lower=0, upper=60, epsilon=0.5, accountant=acct, dataset="d")
    assert ledger_entries(acct.store, "d") == before


@pytest.mark.parametrize(
    ("relation", "grouped", "expected"),
    [
        ("replace_one", False, 2.0),
        ("replace_one", True, 4.0),
        ("add_remove", True, 2.0),
        ("add_remove", False, 2.0),
    ],
)
def test_the_sensitivity_follows_the_dataset_relation(relation: str, grouped: bool, expected: float) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0), relation=relation)
    df = pd.DataFrame({"x": np.arange(40.0), "g": ["a", "b"] * 20, "who": np.arange(40) // 3})
    groups = {"by": "g", "keys": ["a", "b"]} if grouped else {}
    out = df.pipe(
        dp_median,
        "x",
        lower=0,
        upper=40,
        epsilon=1.0,
        accountant=acct,
        dataset="d",
        privacy_unit="who",
        max_contributions=2,
        **groups,
    )
    assert out.attrs["utility_sensitivity"] == expected and out.attrs["relation"] == relation
    assert acct.history("d")[0].cost == PureDP(1.0).to_approx_dp()
    if grouped:
        assert list(out.index) == ["a", "b"] and list(out.columns) == ["value", "rank_error"]


def test_grouped_quantiles_cover_every_declared_key() -> None:
    df = pd.DataFrame({"x": np.arange(40.0), "g": ["a", "b"] * 20})
    out = df.pipe(
        dp_quantiles,
        "x",
        [0.25, 0.75],
        lower=0,
        upper=40,
        epsilon=1.0,
        accountant="unaccounted",
        by="g",
        keys=["a", "b", "z"],
    )
    assert list(out.index) == [(k, q) for k in "abz" for q in (0.25, 0.75)]
    assert ((out["value"] >= 0) & (out["value"] <= 40)).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"quantiles": [0.5, 1.5]}, "quantile"),
        ({"quantiles": []}, "quantile"),
        ({"quantiles": [0.5], "lower": 10, "upper": 0}, "lower"),
        ({"quantiles": [0.5], "column": "name"}, "column"),
        ({"quantiles": [0.5], "epsilon": 0.0}, "epsilon"),
    ],
)
def test_bad_input_is_refused_without_quoting_data(kwargs: dict[str, Any], match: str) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0))
    df = pd.DataFrame({"x": [31337.25, 2.0], "name": ["Zebedee", "Q"]})
    options = {"column": "x", "lower": 0, "upper": 10, "epsilon": 1.0, **kwargs}
    with pytest.raises(InvalidParameterError, match=match) as info:
        df.pipe(dp_quantiles, accountant=acct, dataset="d", **options)
    assert "31337" not in str(info.value) and "Zebedee" not in str(info.value)
    assert charges(acct) == []


def test_the_grid_is_fixed_by_the_bounds() -> None:
    grid = _quantile.grid(-1.0, 3.0)
    assert grid.size == 2**_quantile.GRID_BITS + 1 and grid[0] == -1.0 and grid[-1] == 3.0
