"""bounds="dp" in the transformers: fit learns the bounds and pays for it, every fit, with a fixed cost."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from dp_pipeline import ApproxDP, BudgetExceededError, InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import compose_basic
from dp_pipeline.mechanisms import fast_rng, secure_rng
from dp_pipeline.testing import audit
from dp_pipeline.transformers import (
    BoundedLaplaceNoise,
    BoundedStaircaseNoise,
    GaussianNoise,
    LaplaceNoise,
    StaircaseNoise,
)

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_release.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

OUTER = (0.0, 100.0)
X = np.random.default_rng(7).normal(50.0, 10.0, (400, 2))
Y = (X[:, 0] > 50.0).astype(int)

FIVE = [
    LaplaceNoise(epsilon=1.0),
    GaussianNoise(epsilon=1.0, delta=1e-6),
    StaircaseNoise(epsilon=1.0),
    BoundedLaplaceNoise(epsilon=1.0),
    BoundedStaircaseNoise(epsilon=1.0),
]
IDS = ["laplace", "gaussian", "staircase", "bounded-laplace", "bounded-staircase"]


def ledger(epsilon: float = 100.0) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(epsilon, 1e-4))
    return acct


def learning(transformer: Any, acct: Any, **kwargs: Any) -> Any:
    return clone(transformer).set_params(bounds="dp", outer=OUTER, accountant=acct, dataset="d", **kwargs)


def spent(acct: PrivacyAccountant) -> float:
    return acct.spent("d").epsilon


@pytest.mark.parametrize("transformer", FIVE, ids=IDS)
def test_fit_pays_the_search_and_transform_the_release(transformer: Any) -> None:
    acct = ledger()
    t = learning(transformer, acct).fit(X)
    assert len(charges(acct)) == 1
    parts = t.fit_cost_.parts
    # a tenth of ε over 2 quantiles of each of the 2 features
    assert [p.kind for p in parts] == ["exponential"] * 4
    assert all(p.guarantee.epsilon == 0.025 for p in parts)
    assert spent(acct) == pytest.approx(0.1) and spent(acct) <= 0.1
    t.transform(X)
    assert len(charges(acct)) == 2 and spent(acct) == pytest.approx(1.1)
    assert np.all(t.lower_ >= OUTER[0]) and np.all(t.upper_ <= OUTER[1]) and np.all(t.lower_ < t.upper_)


@pytest.mark.parametrize("transformer", FIVE, ids=IDS)
def test_fit_transform_is_one_charge_whose_cost_does_not_depend_on_the_data(transformer: Any) -> None:
    charged = []
    for data in (X, X * 0.01, np.full_like(X, 99.0)):
        acct = ledger()
        t = learning(transformer, acct, bounds_epsilon=0.3)
        t.fit_transform(data)
        (entry,) = charges(acct)
        (event,) = entry.events
        assert event == t.fit_cost_
        assert [p.kind for p in event.parts[:4]] == ["exponential"] * 4
        release = event.parts[4:]
        assert compose_basic([p.guarantee for p in release]) == compose_basic(
            [p.guarantee for p in (t.cost_.parts if t.cost_.kind == "composite" else [t.cost_])]
        )
        charged.append(event.to_dict())
        assert spent(acct) == pytest.approx(1.3)
    assert charged[0] == charged[1] == charged[2]


def test_the_noise_is_calibrated_to_the_learned_bounds() -> None:
    t = learning(LaplaceNoise(epsilon=1.0), "unaccounted", random_state=secure_rng(3)).fit(X)
    widths = t.upper_ - t.lower_
    assert t.sensitivity_ == pytest.approx(widths)
    assert t.noise_std_ == pytest.approx(math.sqrt(2.0) * 2 * widths / 1.0)  # scale d·Δⱼ/ε


def test_learned_bounds_are_within_the_documented_rank_error() -> None:
    """Each bound's rank is within ρ = (2/ε_q)(ln(2¹⁶ + 1) + ln(1/β)) of n/100 (99n/100), ε_q = ε_search/4."""
    n, search, beta = 20_000, 4.0, 1e-6
    data = np.column_stack(
        [np.random.default_rng(8).normal(0.0, 1.0, n), np.random.default_rng(9).exponential(3.0, n)]
    )
    t = LaplaceNoise(
        epsilon=1.0,
        bounds="dp",
        outer=([-10.0, 0.0], [10.0, 60.0]),
        bounds_epsilon=search,
        accountant="unaccounted",
        random_state=secure_rng(5),
    ).fit(data)
    rho = 2.0 / (search / 4) * (math.log(2**16 + 1) + math.log(1 / beta)) + 1
    for j in range(2):
        ordered = np.sort(data[:, j])
        for bound, q in ((t.lower_[j], 0.01), (t.upper_[j], 0.99)):
            assert abs(np.searchsorted(ordered, bound, side="left") - q * n) <= rho


def test_every_fit_pays_clone_refit_and_grid_search() -> None:
    acct = ledger()
    t = learning(LaplaceNoise(epsilon=1.0), acct)
    t.fit(X)
    t.fit(X)
    clone(t).fit(X)
    assert len(charges(acct)) == 3 and spent(acct) == pytest.approx(0.3)
    acct = ledger()
    pipe = make_pipeline(learning(LaplaceNoise(epsilon=1.0), acct), LogisticRegression())
    GridSearchCV(pipe, {"logisticregression__C": [0.1, 1.0]}, cv=3).fit(X, Y)
    # 2 candidates × 3 folds + the refit each fit_transform once (search and release: 1.1); the 6 held-out
    # parts are each transformed once (1.0)
    fits, scores = 2 * 3 + 1, 2 * 3
    assert len(charges(acct)) == fits + scores
    assert spent(acct) == pytest.approx(fits * 1.1 + scores * 1.0)


def test_a_refused_fit_charges_nothing_and_learns_nothing() -> None:
    acct = ledger(0.05)
    t = learning(LaplaceNoise(epsilon=1.0), acct)
    with pytest.raises(BudgetExceededError):
        t.fit(X)
    assert charges(acct) == [] and not hasattr(t, "lower_")


@pytest.mark.parametrize(
    ("transformer", "kwargs", "match"),
    [
        (LaplaceNoise(), {"bounds": "dp"}, "outer"),
        (LaplaceNoise(), {"bounds": "dp", "outer": (5.0, 5.0)}, "outer"),
        (LaplaceNoise(), {"bounds": "dp", "outer": (0.0,)}, "outer"),
        (LaplaceNoise(), {"bounds": "dp", "outer": OUTER, "lower": 0.0}, "bounds"),
        (LaplaceNoise(), {"bounds": "dp", "outer": OUTER, "sensitivity": 1.0}, "sensitivity"),
        (BoundedLaplaceNoise(), {"bounds": "dp", "outer": OUTER, "sensitivity": 1.0}, "sensitivity"),
        (LaplaceNoise(), {"bounds": "dp", "outer": OUTER, "bounds_epsilon": -1.0}, "bounds_epsilon"),
        (LaplaceNoise(), {"outer": OUTER, "lower": 0.0, "upper": 1.0}, "outer"),
        (LaplaceNoise(), {"bounds_epsilon": 0.1, "lower": 0.0, "upper": 1.0}, "bounds_epsilon"),
        (GaussianNoise(mu=1.0), {"bounds": "dp", "outer": OUTER}, "bounds_epsilon"),
        (StaircaseNoise(gamma=2.0), {"bounds": "dp", "outer": OUTER}, "gamma"),
        (LaplaceNoise(), {"bounds": "private"}, "bounds"),
    ],
)
def test_bad_parameters_are_refused_before_anything_is_charged(
    transformer: Any, kwargs: dict[str, Any], match: str
) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0))
    data = np.array([[31337.25, 1.0], [2.0, 3.0]])
    t = clone(transformer).set_params(accountant=acct, dataset="d", **kwargs)
    with pytest.raises(InvalidParameterError, match=match) as info:
        t.fit(data)
    assert "31337" not in str(info.value)
    assert charges(acct) == []


class _ChangedRow:
    """fit_transform with bounds="dp" on one of two neighbouring datasets (the last row replaced); the
    output is that row's noisy value."""

    def __init__(self) -> None:
        self.transformer = LaplaceNoise(
            epsilon=1.0, bounds="dp", outer=(0.0, 1.0), bounds_epsilon=1.0, accountant="unaccounted"
        )
        self.guarantee = PureDP(2.0)  # the search and the release
        base = [0.1, 0.2, 0.3, 0.4, 0.5]
        self.data = {0: np.array([*base, 0.45])[:, None], 1: np.array([*base, 0.98])[:, None]}

    def randomize(self, values: Any, rng: Any = None) -> Any:
        out = []
        for v in values:  # the fast path's float noise, seeded from the auditor's generator: ~10x faster
            t = clone(self.transformer).set_params(random_state=fast_rng(int(rng.integers(2**62))))
            out.append(float(t.fit_transform(self.data[int(v)])[-1, 0]))
        return np.array(out)


@pytest.mark.slow
def test_the_auditor_finds_no_violation_on_neighbouring_datasets() -> None:
    report = audit(_ChangedRow(), (0, 1), samples=4_000)
    assert report.consistent, str(report)
