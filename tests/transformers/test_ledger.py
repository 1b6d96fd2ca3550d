"""Every transform is one release, charged to the one configured ledger before its output exists."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

from dp_pipeline import BudgetExceededError, GaussianDP, InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries, open_reservations
from dp_pipeline.exceptions import LedgerError
from dp_pipeline.transformers import (
    GaussianNoise,
    KRandomizedResponseEncoder,
    LaplaceNoise,
    RandomizedResponseEncoder,
    StaircaseNoise,
)

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

X = np.random.default_rng(1000).uniform(0.0, 1.0, (60, 3))
Y = (X[:, 0] > 0.5).astype(int)


def noise(acct: Any, **kwargs: Any) -> LaplaceNoise:
    params: dict[str, Any] = {"epsilon": 1.0, "lower": 0.0, "upper": 1.0, "accountant": acct, "dataset": "d"}
    return LaplaceNoise(**{**params, **kwargs})


def rng_state(t: Any) -> bytes:
    """The state of the transformer's generator, comparable with ==."""
    return pickle.dumps(t._rng.bit_generator.state)


def spent_epsilon(acct: PrivacyAccountant) -> float:
    return acct.spent("d").epsilon


def test_fit_charges_nothing_and_every_transform_charges_once(acct: PrivacyAccountant) -> None:
    t = noise(acct).fit(X)
    assert charges(acct) == []
    t.transform(X)
    t.transform(X)
    assert len(charges(acct)) == 2
    t.fit_transform(X)
    assert len(charges(acct)) == 3
    assert spent_epsilon(acct) == pytest.approx(3.0)
    assert all(e.status == "committed" for e in charges(acct))


@pytest.mark.parametrize(
    ("transformer", "kind"),
    [
        (LaplaceNoise(epsilon=0.5, sensitivity=[1.0, 2.0, 4.0]), "laplace"),
        (StaircaseNoise(epsilon=0.5, sensitivity=1.0), "staircase"),
        (KRandomizedResponseEncoder(epsilon=0.5, categories=[0, 1, 2]), "randomized_response"),
    ],
)
def test_a_release_of_several_features_costs_epsilon_once(
    acct: PrivacyAccountant, transformer: Any, kind: str
) -> None:
    data = np.random.default_rng(1001).integers(0, 3, (20, 3))
    transformer.set_params(accountant=acct, dataset="d").fit_transform(data)
    (entry,) = charges(acct)
    (event,) = entry.events
    assert event.kind == "composite" and {p.kind for p in event.parts} == {kind}
    assert spent_epsilon(acct) == pytest.approx(0.5)


def test_gaussian_release_is_charged_as_its_event(acct: PrivacyAccountant) -> None:
    budget = PrivacyAccountant("memory://")
    budget.set_budget("d", PureDP(1.0).to_gdp())
    GaussianNoise(calibration="gdp", mu=0.4, sensitivity=1.0, accountant=budget, dataset="d").fit_transform(X)
    assert budget.spent("d").mu == pytest.approx(0.4)


def test_refusal_raises_draws_no_noise_and_leaves_the_ledger_unchanged() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.5))
    t = noise(acct, random_state=0).fit(X)
    t.transform(X)
    before = ledger_entries(acct.store, "d")
    state = rng_state(t)
    with pytest.raises(BudgetExceededError):
        t.transform(X)
    assert ledger_entries(acct.store, "d") == before
    assert spent_epsilon(acct) == pytest.approx(1.0)
    assert rng_state(t) == state  # no noise was drawn for the refused release


class SpyAccountant(PrivacyAccountant):
    """A memory ledger that records each charge and the generator state of the transformer at that
    moment (the reservation made before the release's noise)."""

    def __init__(self) -> None:
        super().__init__("memory://")
        self.set_budget("patients", PureDP(10.0))
        self.spends: list[tuple[str, Any, str, bytes]] = []
        self.transformer: Any = None

    def reserve(self, dataset: str, cost: Any, **options: Any) -> Any:
        self.spends.append((dataset, cost, options["label"], rng_state(self.transformer)))
        return super().reserve(dataset, cost, **options)


def test_the_charge_comes_before_the_noise() -> None:
    spy = SpyAccountant()
    t = LaplaceNoise(sensitivity=1.0, accountant=spy, dataset="patients", random_state=0).fit(X)
    spy.transformer = t
    state = rng_state(t)
    t.transform(X)
    ((dataset, cost, label, at_charge),) = spy.spends
    assert (dataset, cost, label) == ("patients", t.cost_, "LaplaceNoise.transform (3 feature(s))")
    assert at_charge == state  # nothing drawn yet when the ledger was charged
    assert rng_state(t) != state


def test_bad_input_charges_nothing(acct: PrivacyAccountant) -> None:
    t = noise(acct).fit(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InvalidParameterError, match="NaN"):
        t.transform(bad)
    with pytest.raises(ValueError, match="features"):
        t.transform(X[:, :2])
    assert charges(acct) == []


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"accountant": None, "dataset": "d"}, "accountant"),
        ({"accountant": "memory://", "dataset": "d"}, "accountant"),
        ({"dataset": None}, "dataset"),
        ({"dataset": ""}, "dataset"),
    ],
)
def test_a_release_needs_a_ledger_or_the_explicit_opt_out(
    acct: PrivacyAccountant, params: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(InvalidParameterError) as info:
        noise(acct, **params).fit(X)
    assert info.value.parameter == parameter


def test_unaccounted_is_an_explicit_opt_out() -> None:
    out = noise("unaccounted", dataset=None).fit_transform(X)
    assert out.shape == X.shape


def test_clone_charges_the_one_ledger(acct: PrivacyAccountant) -> None:
    copy = clone(noise(acct))
    assert copy.accountant is acct
    copy.fit_transform(X)
    assert len(charges(acct)) == 1


def test_a_pickled_transformer_charges_the_same_sqlite_ledger(sqlite_acct: PrivacyAccountant) -> None:
    t = pickle.loads(pickle.dumps(noise(sqlite_acct).fit(X)))
    assert t.accountant is not sqlite_acct
    t.transform(X)
    assert len(charges(sqlite_acct)) == 1


def test_a_memory_ledger_refuses_to_be_pickled(acct: PrivacyAccountant) -> None:
    with pytest.raises(LedgerError, match="memory ledger cannot be pickled"):
        pickle.dumps(noise(acct).fit(X))


def grid_search(acct: Any, n_jobs: int) -> GridSearchCV:
    pipe = make_pipeline(noise(acct), LogisticRegression())
    return GridSearchCV(pipe, {"logisticregression__C": [0.1, 1.0]}, cv=3, n_jobs=n_jobs)


# Per candidate and fold: one charge to fit (fit_transform on the training part) and one to score (transform
# on the held-out part); then one to refit the best candidate on all the data.
GRID_CHARGES = 2 * 3 * 2 + 1


def test_grid_search_in_one_process_charges_the_memory_ledger(acct: PrivacyAccountant) -> None:
    grid_search(acct, n_jobs=1).fit(X, Y)
    assert len(charges(acct)) == GRID_CHARGES
    assert spent_epsilon(acct) == pytest.approx(GRID_CHARGES)


@pytest.mark.slow
@pytest.mark.processes
def test_grid_search_and_cross_val_score_in_worker_processes_charge_the_one_sqlite_ledger(
    sqlite_acct: PrivacyAccountant,
) -> None:
    grid_search(sqlite_acct, n_jobs=2).fit(X, Y)
    entries = charges(sqlite_acct)
    assert len(entries) == GRID_CHARGES
    assert all(e.status == "committed" for e in entries)
    assert open_reservations(sqlite_acct.store, "d") == []
    assert spent_epsilon(sqlite_acct) == pytest.approx(GRID_CHARGES)
    pipe = make_pipeline(noise(sqlite_acct), LogisticRegression())
    cross_val_score(pipe, X, Y, cv=3, n_jobs=2)
    assert len(charges(sqlite_acct)) == GRID_CHARGES + 3 * 2
    sqlite_acct.verify("d")


@pytest.mark.processes
def test_grid_search_with_a_memory_ledger_and_workers_fails_closed(acct: PrivacyAccountant) -> None:
    with pytest.raises(pickle.PicklingError) as info:  # joblib cannot send the task to a worker
        grid_search(acct, n_jobs=2).fit(X, Y)
    remote = str(info.value.__cause__)  # the worker-side traceback, as text
    assert "LedgerError" in remote and "memory ledger cannot be pickled" in remote
    assert charges(acct) == []


@pytest.mark.parametrize(
    "transformer",
    [
        LaplaceNoise(epsilon=0.5, sensitivity=1.0),
        GaussianNoise(mu=0.5, sensitivity=1.0),
        RandomizedResponseEncoder(epsilon=0.5),
    ],
    ids=["laplace", "gaussian-gdp", "rr"],
)
def test_group_size_is_charged_and_recorded(transformer: Any) -> None:
    """A transform with group_size=k costs what the accountant charges for a group of k (Laplace and
    Gaussian: sensitivity ×k, exact; RR: group privacy kε)."""
    budget, alone = PrivacyAccountant("memory://"), PrivacyAccountant("memory://")
    for a in (budget, alone):
        a.set_budget("d", GaussianDP(10.0) if isinstance(transformer, GaussianNoise) else PureDP(100.0))
    data = np.random.default_rng(5).integers(0, 2, (10, 1))
    transformer.set_params(accountant=budget, dataset="d", group_size=3).fit_transform(data)
    (entry,) = budget.history("d")
    assert entry.group_size == 3
    alone.spend("d", transformer.cost_, group_size=3)  # the accountant's own price of a group of 3
    assert entry.cost == alone.history("d")[0].cost
    expected = GaussianDP(1.5) if isinstance(transformer, GaussianNoise) else PureDP(1.5).to_approx_dp()
    assert entry.cost == expected


def test_group_size_in_a_refusal() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    t = LaplaceNoise(epsilon=0.4, sensitivity=1.0, group_size=4, accountant=acct, dataset="d")
    with pytest.raises(BudgetExceededError, match="k = 4"):
        t.fit_transform(X)
    assert acct.history("d") == []
