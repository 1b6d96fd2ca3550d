"""The bounds search shared by the pandas functions and the transformers: accuracy, privacy, shape."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_pipeline import _quantile
from dp_pipeline._learned_bounds import SEARCH_QUANTILES, BoundsSearch, search_share
from dp_pipeline.events import composite_event
from dp_pipeline.mechanisms import secure_rng
from dp_pipeline.testing import audit

UNACCOUNTED = ("unaccounted", None, "search", 1)


def learn(values: np.ndarray, epsilon: float, lo: float, hi: float, seed: int) -> tuple[float, float]:
    search = BoundsSearch.plan(epsilon, np.array([lo]), np.array([hi]), "replace_one")
    low, high, _ = search.charge_and_learn([values], secure_rng(seed), [], UNACCOUNTED)
    return float(low[0]), float(high[0])


def radius(epsilon_search: float, columns: int, beta: float) -> float:
    """ρ of the module notes, computed from its formula: (2m/ε_q)(ln(2¹⁶ + 1) + ln(1/β)), m = 1."""
    per_quantile = epsilon_search / (2 * columns)
    return 2.0 / per_quantile * (math.log(2**16 + 1) + math.log(1.0 / beta))


def test_the_documented_example_radius() -> None:
    """The module notes: n = 10⁴, ε_search = 0.1 (a tenth of ε = 1), β = 0.01 give ρ ≈ 630 ranks."""
    search_epsilon, _ = search_share(1.0)
    mechanism = BoundsSearch.plan(search_epsilon, np.zeros(1), np.ones(1), "replace_one").mechanism
    assert _quantile.rank_error(mechanism, 2**16 + 1, 0.99) == pytest.approx(radius(0.1, 1, 0.01), rel=1e-9)
    assert 620 < radius(0.1, 1, 0.01) < 640


@pytest.mark.slow
@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.normal(0.0, 1.0, n),
        lambda rng, n: rng.exponential(2.0, n),
        lambda rng, n: rng.uniform(-3.0, 5.0, n),
    ],
    ids=["normal", "exponential", "uniform"],
)
def test_learned_bounds_land_within_the_documented_rank_error_at_the_stated_rate(draw: Any) -> None:
    runs, n, epsilon, beta = 100, 1_000, 1.0, 0.1
    rho = radius(epsilon, 1, beta) + 1  # + 1: the best grid point's rank is within ½ of the target
    assert rho < n / 4  # the bound says something at this n
    rng, hits = np.random.default_rng(11), 0
    for seed in range(runs):
        data = draw(rng, n)
        low, high = learn(data, epsilon, -10.0, 10.0, seed)
        ordered = np.sort(np.clip(data, -10.0, 10.0))
        ranks = [np.searchsorted(ordered, bound, side="left") for bound in (low, high)]
        hits += all(abs(r - q * n) <= rho for r, q in zip(ranks, SEARCH_QUANTILES, strict=True))
    # each bound misses with probability ≤ β, so both hold with probability ≥ 1 − 2β
    assert stats.binomtest(hits, runs, 1 - 2 * beta, alternative="less").pvalue > 1e-3


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=40),
    st.floats(-50.0, 0.0),
    st.floats(0.5, 50.0),
    st.integers(0, 2**32),
)
def test_learned_bounds_are_ordered_grid_points_inside_the_outer_range(
    values: list[float], lo: float, hi: float, seed: int
) -> None:
    low, high = learn(np.array(values), 0.5, lo, hi, seed)
    candidates = _quantile.grid(lo, hi)
    assert lo <= low < high <= hi
    assert low in candidates and high in candidates


class _UpperBound:
    """The learned upper bound on one of two neighbouring datasets (0, or 1 with the last row replaced)."""

    def __init__(self) -> None:
        self.search = BoundsSearch.plan(1.0, np.zeros(1), np.ones(1), "replace_one")
        self.guarantee = composite_event(self.search.events, "replace_one").guarantee  # ε = 1 in all
        self.data = {0: np.array([0.1, 0.2, 0.3, 0.35]), 1: np.array([0.1, 0.2, 0.3, 0.95])}

    def randomize(self, values: Any, rng: Any = None) -> Any:
        learned = [self.search.charge_and_learn([self.data[int(v)]], rng, [], UNACCOUNTED) for v in values]
        return np.array([float(high[0]) for _, high, _ in learned])


@pytest.mark.slow
def test_the_auditor_finds_no_violation_on_neighbouring_datasets() -> None:
    report = audit(_UpperBound(), (0, 1), samples=6_000)
    assert report.consistent, str(report)
