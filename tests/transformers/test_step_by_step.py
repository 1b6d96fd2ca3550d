"""A plain Pipeline, ColumnTransformer or FeatureUnion charges each DP step just before that step's noise;
AllOrNothing and reserve_search make a call all or nothing explicitly, on clones, and leave the user's
estimators exactly as they were.

Amounts are checked against exact sums of the steps' ε done here with ``fractions.Fraction``.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from dp_pipeline import BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries, open_reservations
from dp_pipeline.transformers import AllOrNothing, LaplaceNoise, reserve_search

X = np.random.default_rng(5).uniform(0.0, 1.0, (48, 2))
Y = (X[:, 0] > 0.5).astype(int)


def _acct(budget: float, url: str = "memory://") -> PrivacyAccountant:
    acct = PrivacyAccountant(url)
    acct.set_budget("d", PureDP(budget))
    return acct


def noise(acct: Any, epsilon: float = 1.0) -> LaplaceNoise:
    return LaplaceNoise(epsilon=epsilon, lower=0.0, upper=1.0, accountant=acct, dataset="d")


def spent(acct: PrivacyAccountant) -> Fraction:
    return Fraction(acct.spent("d").epsilon)


def kinds(acct: PrivacyAccountant) -> list[str]:
    return [e.kind for e in ledger_entries(acct.store, "d")]


class Explodes(TransformerMixin, BaseEstimator):
    """A plain step that fails while the pipeline runs (after the first DP step released)."""

    def fit(self, X: Any, y: Any = None) -> Explodes:
        return self

    def transform(self, X: Any) -> Any:
        raise RuntimeError("this step fails")


def test_a_refused_second_step_leaves_the_first_charge_and_returns_nothing() -> None:
    acct = _acct(1.5)  # room for the first step (ε = 1), not for both (ε = 2)
    pipe = make_pipeline(noise(acct, 1.0), noise(acct, 1.0))
    returned: list[Any] = []
    with pytest.raises(BudgetExceededError):
        returned.append(pipe.fit_transform(X))
    assert returned == []
    assert spent(acct) == Fraction(1)  # the first step released: charged; the second: refused, nothing
    assert kinds(acct) == ["budget", "reserve", "commit"]
    assert [e.label for e in acct.history("d")] == ["LaplaceNoise.transform (2 feature(s))"]
    acct.verify()


def _run_and_fail(acct: PrivacyAccountant, data: np.ndarray) -> None:
    pipe = make_pipeline(noise(acct, 0.5), Explodes(), noise(acct, 0.5))
    with contextlib.suppress(RuntimeError):  # the traceback goes with this frame
        pipe.fit_transform(data)


def test_a_pipeline_that_raises_between_two_dp_steps_keeps_no_reference_to_x() -> None:
    acct = _acct(10.0)
    data = X.copy()
    alive = weakref.ref(data)
    _run_and_fail(acct, data)
    del data
    gc.collect()
    still_referenced = alive() is not None
    assert not still_referenced
    assert spent(acct) == Fraction(1, 2)  # the first step released before the failure


def test_steps_are_charged_one_by_one_in_a_plain_composite() -> None:
    acct = _acct(10.0)
    first, second = noise(acct, 0.5), noise(acct, 0.25)
    make_pipeline(first, second, LogisticRegression()).fit(X, Y)
    assert kinds(acct) == ["budget", "reserve", "commit", "reserve", "commit"]
    assert spent(acct) == Fraction(1, 2) + Fraction(1, 4)


@settings(max_examples=30, deadline=None)
@given(
    eighths=st.lists(st.integers(1, 16), min_size=1, max_size=4),
    budget_eighths=st.integers(1, 48),
)
def test_a_plain_pipeline_charges_the_steps_that_ran_and_never_less(
    eighths: list[int], budget_eighths: int
) -> None:
    epsilons = [Fraction(e, 8) for e in eighths]
    budget = Fraction(budget_eighths, 8)
    acct = _acct(float(budget))
    pipe = make_pipeline(*(noise(acct, float(e)) for e in epsilons))
    ran = 0  # the longest prefix of steps whose charges fit, summed here exactly
    while ran < len(epsilons) and sum(epsilons[: ran + 1]) <= budget:
        ran += 1
    column = X[:, :1]  # one feature: a step charges its ε exactly (d features get ε/d each, rounded down)
    if ran == len(epsilons):
        assert pipe.fit_transform(column).shape == column.shape
    else:
        with pytest.raises(BudgetExceededError):
            pipe.fit_transform(column)
    # each step's noise is calibrated to at most its ε (the scale rounded up): its charge is at most ε, and
    # within a few ulps of it
    nominal = sum(epsilons[:ran], Fraction(0))
    assert nominal * (1 - Fraction(1, 2**40)) <= spent(acct) <= nominal
    assert kinds(acct).count("reserve") == ran


@pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")
def test_a_wrapped_seeded_step_goes_on_with_its_generator_across_calls() -> None:
    # each call runs on a copy of the fitted pipeline: a deep copy of a seeded step would restart its
    # generator and repeat the noise; the wrapper's copies share it, as calls of the step itself do
    acct = _acct(10.0)
    seeded = LaplaceNoise(epsilon=0.5, lower=0.0, upper=1.0, accountant=acct, dataset="d", random_state=7)
    wrapped = AllOrNothing(make_pipeline(seeded, StandardScaler())).fit(X)
    first, second = wrapped.transform(X), wrapped.transform(X)
    assert not np.array_equal(first, second)
    alone = clone(seeded).fit(X)
    assert not np.array_equal(alone.transform(X), alone.transform(X))  # the step on its own: the same rule
    half = Fraction(1, 2)
    assert spent(acct) == 5 * half  # the fit, two wrapped calls, two calls of the step alone


@pytest.mark.slow
@pytest.mark.processes
def test_a_plain_column_transformer_with_two_workers_charges_each_step(tmp_path: Path) -> None:
    acct = _acct(10.0, f"sqlite:///{tmp_path / 'ledger.db'}")
    ct = ColumnTransformer([("a", noise(acct, 0.5), [0]), ("b", noise(acct, 0.25), [1])], n_jobs=2)
    assert ct.fit_transform(X).shape == X.shape
    assert spent(acct) == Fraction(1, 2) + Fraction(1, 4)
    assert kinds(acct) == ["budget", "reserve", "commit", "reserve", "commit"]
    acct.verify()


@pytest.mark.slow
@pytest.mark.processes
def test_a_plain_pipeline_under_a_grid_search_with_two_workers_charges_the_one_ledger(tmp_path: Path) -> None:
    acct = _acct(100.0, f"sqlite:///{tmp_path / 'ledger.db'}")
    columns = ColumnTransformer([("a", noise(acct, 0.5), [0]), ("b", noise(acct, 0.25), [1])], n_jobs=2)
    pipe = make_pipeline(columns, LogisticRegression())
    search = GridSearchCV(pipe, {"logisticregression__C": [0.1, 1.0]}, cv=3, n_jobs=2, error_score="raise")
    search.fit(X, Y)
    calls = 2 * 3 * 2 + 1  # candidates × splits × (fit + score), plus the refit
    assert spent(acct) == calls * (Fraction(1, 2) + Fraction(1, 4))
    assert kinds(acct).count("reserve") == 2 * calls and open_reservations(acct.store, "d") == []
    acct.verify()


# ------------------------------------------------------------------------------------------ no mutation


def _state(estimator: Any) -> dict[str, Any]:
    """Every parameter (deep) and every attribute of every DP step, by identity."""
    params = estimator.get_params(deep=True)
    steps = {k: dict(vars(v)) for k, v in params.items() if isinstance(v, LaplaceNoise)}
    return {"params": {k: id(v) for k, v in params.items()}, "steps": steps}


def test_all_or_nothing_leaves_the_users_estimator_as_it_was() -> None:
    acct = _acct(10.0)
    columns = ColumnTransformer([("a", noise(acct, 0.5), [0]), ("b", noise(acct, 0.25), [1])])
    before = _state(columns)
    wrapped = AllOrNothing(columns)
    wrapped.fit_transform(X)
    wrapped.transform(X)
    assert _state(columns) == before
    assert all(step.accountant is acct for _, step, _ in columns.transformers)
    with pytest.raises(Exception, match="not fitted"):
        check_is_fitted(columns)
    # the wrapper's own fitted clone charges the user's accountant between calls
    assert all(step.accountant is acct for _, step, _ in wrapped.estimator_.transformers_[:2])
    assert spent(acct) == 2 * (Fraction(1, 2) + Fraction(1, 4))


def test_reserve_search_leaves_the_users_search_as_it_was() -> None:
    acct = _acct(100.0)
    search = GridSearchCV(
        make_pipeline(noise(acct, 0.5), LogisticRegression()), {"logisticregression__C": [1.0]}
    )
    before = _state(search)
    with reserve_search(search, X, Y) as reserved:
        assert _state(search) == before  # also while the block runs
        reserved.search.fit(X, Y)
    assert _state(search) == before and not hasattr(search, "best_estimator_")
    assert search.estimator.steps[0][1].accountant is acct
    assert np.isnan(search.error_score)
    assert reserved.search.best_estimator_.steps[0][1].accountant is acct


def test_wrapped_calls_from_several_threads_each_pay_their_own_reservation() -> None:
    acct = _acct(100.0)
    wrapped = AllOrNothing(make_pipeline(noise(acct, 0.5), noise(acct, 0.25)))
    wrapped.fit_transform(X)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(lambda _: wrapped.transform(X), range(8)))
    assert all(out.shape == X.shape for out in outs)
    per_call = Fraction(1, 2) + Fraction(1, 4)
    assert spent(acct) == 9 * per_call  # one fit, eight calls
    reservations = [e for e in acct.history("d") if e.paid_from is None]
    assert len(reservations) == 9
    assert all(sum(1 for e in acct.history("d") if e.paid_from == r.key) == 2 for r in reservations)
    acct.verify()


def test_all_or_nothing_reserves_steps_that_charge_a_dataset_handle_together() -> None:
    """Steps given ``accountant=acct.dataset("d")`` (no ``dataset=``) are reserved with the steps given the
    accountant and ``dataset="d"``: one reservation for the call, all or none."""
    acct = _acct(1.0)
    handle = LaplaceNoise(epsilon=0.5, lower=0.0, upper=1.0, accountant=acct.dataset("d"))
    wrapped = AllOrNothing(ColumnTransformer([("a", handle, [0]), ("b", noise(acct, 0.75), [1])]))
    before = kinds(acct)
    with pytest.raises(BudgetExceededError):
        wrapped.fit_transform(X)  # 0.5 + 0.75 > 1: refused whole, before any noise
    assert kinds(acct) == before and spent(acct) == 0
    fits = AllOrNothing(ColumnTransformer([("a", handle, [0]), ("b", noise(acct, 0.25), [1])]))
    fits.fit_transform(X)
    assert kinds(acct).count("reserve") == 1 and spent(acct) == Fraction(1, 2) + Fraction(1, 4)
    assert fits.estimator_.transformers_[0][1].accountant == acct.dataset("d")  # charges the handle again
