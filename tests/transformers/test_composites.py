"""One call of a Pipeline, ColumnTransformer or FeatureUnion wrapped in AllOrNothing charges all its DP steps
or none; searches reserved with reserve_search have their whole budget or do not start.

Amounts are checked against exact sums of the steps' ε done here with ``fractions.Fraction``.
"""

from __future__ import annotations

import doctest
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from dp_pipeline import ApproxDP, BudgetExceededError, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.transformers import (
    AllOrNothing,
    GaussianNoise,
    LaplaceNoise,
    RandomizedResponseEncoder,
    StaircaseNoise,
    reserve_search,
    search_cost,
)
from dp_pipeline.transformers import (
    _composite as composite,
)

X = np.random.default_rng(3).uniform(0.0, 1.0, (60, 2))
Y = (X[:, 0] > 0.5).astype(int)


def _acct(budget: float, url: str = "memory://") -> PrivacyAccountant:
    acct = PrivacyAccountant(url)
    acct.set_budget("d", PureDP(budget))
    return acct


def noise(acct: Any, epsilon: float = 1.0, **kwargs: Any) -> LaplaceNoise:
    return LaplaceNoise(epsilon=epsilon, lower=0.0, upper=1.0, accountant=acct, dataset="d", **kwargs)


def two_columns(acct: Any, n_jobs: int | None = None) -> ColumnTransformer:
    return ColumnTransformer([("a", noise(acct), [0]), ("b", noise(acct), [1])], n_jobs=n_jobs)


def kinds(acct: PrivacyAccountant) -> list[str]:
    return [e.kind for e in ledger_entries(acct.store, "d")]


# ------------------------------------------------------------------------------------------ in one process


def test_a_column_transformer_that_does_not_fit_charges_nothing() -> None:
    acct = _acct(1.5)
    with pytest.raises(BudgetExceededError) as refused:
        AllOrNothing(two_columns(acct)).fit_transform(X)
    assert refused.value.requested == ApproxDP(2.0, 0.0)  # the call's total: 1 + 1
    assert kinds(acct) == ["budget"] and acct.spent("d").epsilon == 0.0


def test_a_column_transformer_that_fits_is_reserved_once_and_paid_by_each_step() -> None:
    acct = _acct(2.0)
    ct = AllOrNothing(two_columns(acct))
    ct.fit_transform(X)
    assert kinds(acct) == ["budget", "reserve", "commit", "pay", "pay"]
    assert acct.spent("d").epsilon == 2.0 and acct.remaining("d").epsilon == 0.0
    acct.set_budget("d", PureDP(3.5))  # a fitted call: reserved at the steps' cost_, refused whole
    with pytest.raises(BudgetExceededError):
        ct.transform(X)
    assert acct.spent("d").epsilon == 2.0 and len(kinds(acct)) == 6
    acct.verify()


def test_a_pipeline_with_two_dp_steps_reserves_each_call() -> None:
    acct = _acct(10.0)
    first, second = (
        noise(acct, 0.5),
        LaplaceNoise(epsilon=0.25, lower=-5, upper=5, accountant=acct, dataset="d"),
    )
    pipe = AllOrNothing(make_pipeline(first, StandardScaler(), second, LogisticRegression()))
    pipe.fit(X, Y)
    pipe.predict(X)
    reservations = [e for e in acct.history("d") if e.paid_from is None]
    assert [e.label for e in reservations] == [
        "Pipeline.fit: 2 DP releases, all or nothing",
        "Pipeline.predict: 2 DP releases, all or nothing",
    ]
    assert Fraction(acct.spent("d").epsilon) == 2 * (Fraction(0.5) + Fraction(0.25))
    acct.set_budget("d", PureDP(1.5 + 0.5))  # room for the first step only
    with pytest.raises(BudgetExceededError):
        pipe.predict(X)
    assert acct.spent("d").epsilon == 1.5
    acct.verify()


def test_nested_composites_and_a_feature_union_are_one_call() -> None:
    acct = _acct(10.0)
    union = FeatureUnion(
        [
            ("x", noise(acct, 0.5)),
            ("y", StaircaseNoise(epsilon=0.25, lower=0, upper=1, accountant=acct, dataset="d")),
        ]
    )
    pipe = AllOrNothing(
        Pipeline([("columns", two_columns(acct)), ("union", union), ("model", LogisticRegression())])
    )
    pipe.fit(X, Y)
    assert [e.label for e in acct.history("d") if e.paid_from is None] == [
        "Pipeline.fit: 4 DP releases, all or nothing"
    ]
    assert sum(1 for e in acct.history("d") if e.paid_from) == 4
    assert Fraction(acct.spent("d").epsilon) == 2 + Fraction(0.5) + Fraction(0.25)
    union.fit(X)  # FeatureUnion.fit fits its steps and releases nothing
    assert Fraction(acct.spent("d").epsilon) == 2 + Fraction(0.5) + Fraction(0.25)


def test_steps_that_learn_their_bounds_are_reserved_with_their_search() -> None:
    def learner(acct: Any) -> LaplaceNoise:
        return LaplaceNoise(
            epsilon=1.0, bounds="dp", outer=(-10.0, 10.0), bounds_epsilon=0.125, accountant=acct, dataset="d"
        )

    acct = _acct(1.5)  # the fit costs 0.125 (search) + 1 + 0.5
    pipe = AllOrNothing(make_pipeline(learner(acct), noise(acct, 0.5), LogisticRegression()))
    with pytest.raises(BudgetExceededError):
        pipe.fit(X, Y)
    assert kinds(acct) == ["budget"]
    acct.set_budget("d", PureDP(1.625))
    pipe.fit(X, Y)
    assert acct.spent("d").epsilon == 1.625 and acct.remaining("d").epsilon == 0.0
    acct.set_budget("d", PureDP(1.875))
    AllOrNothing(FeatureUnion([("a", learner(acct)), ("b", learner(acct))])).fit(
        X
    )  # fit learns: two searches
    assert acct.spent("d").epsilon == 1.875
    acct.verify()


def test_one_dp_step_is_charged_directly_as_before() -> None:
    acct = _acct(10.0)
    make_pipeline(noise(acct), LogisticRegression()).fit(X, Y)
    assert kinds(acct) == ["budget", "reserve", "commit"]


def test_two_datasets_are_reserved_all_or_nothing() -> None:
    acct = _acct(5.0)
    acct.set_budget("small", PureDP(0.5))
    other = LaplaceNoise(epsilon=1.0, lower=0.0, upper=1.0, accountant=acct, dataset="small")
    ct = AllOrNothing(
        ColumnTransformer([("a", noise(acct), [0]), ("b", noise(acct), [0]), ("c", other, [1])])
    )
    with pytest.raises(BudgetExceededError, match="'small'"):
        ct.fit_transform(X)
    assert acct.spent("d").epsilon == 0.0 and acct.spent("small").epsilon == 0.0
    assert [e.status for e in acct.history("d")] == ["cancelled"]  # reserved, then returned: no data read


def test_a_composite_given_a_reservation_pays_from_it() -> None:
    acct = _acct(10.0)
    task = acct.reserve("d", PureDP(2.0), key="task")
    two_columns(task).fit_transform(X)
    assert acct.spent("d").epsilon == 2.0 and task.spent().epsilon == 2.0


# ------------------------------------------------------------------------------------------ worker processes


@pytest.mark.slow
@pytest.mark.processes
def test_n_jobs_two_charges_step_by_step_unwrapped_and_all_or_nothing_wrapped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    acct = _acct(1.5, url)
    with pytest.raises(BudgetExceededError):  # each step charges on its own: one fits, the other is refused
        two_columns(acct, n_jobs=2).fit_transform(X)
    assert acct.spent("d").epsilon == 1.0 and kinds(acct) == ["budget", "reserve", "commit"]
    acct.set_budget("d", PureDP(2.5))  # 1.5 left: not both
    with pytest.raises(BudgetExceededError):
        AllOrNothing(two_columns(acct, n_jobs=2)).fit_transform(X)
    assert acct.spent("d").epsilon == 1.0 and len(kinds(acct)) == 4
    acct.set_budget("d", PureDP(5.0))
    wrapped = AllOrNothing(two_columns(acct, n_jobs=2))
    out = wrapped.fit_transform(X)
    assert out.shape == X.shape
    assert kinds(acct)[5:] == ["reserve", "commit", "pay", "pay"]
    # between calls the fitted steps charge their own accountant again
    assert all(step.accountant is acct for _, step, _ in wrapped.estimator_.transformers_[:2])
    wrapped.transform(X)
    assert acct.spent("d").epsilon == 5.0
    with pytest.raises(BudgetExceededError):
        wrapped.transform(X)
    assert acct.spent("d").epsilon == 5.0 and len(kinds(acct)) == 13
    acct.verify()


# ------------------------------------------------------------------------------------------ declared costs


FAMILIES = {
    "laplace": lambda e, acct: LaplaceNoise(epsilon=e, lower=0, upper=3, accountant=acct, dataset="d"),
    "gaussian": lambda e, acct: GaussianNoise(
        epsilon=e, delta=1e-6, lower=0, upper=3, accountant=acct, dataset="d"
    ),
    "gdp": lambda e, acct: GaussianNoise(mu=e, lower=0, upper=3, accountant=acct, dataset="d"),
    "staircase": lambda e, acct: StaircaseNoise(epsilon=e, lower=0, upper=3, accountant=acct, dataset="d"),
    "rr": lambda e, acct: RandomizedResponseEncoder(epsilon=e, accountant=acct, dataset="d"),
}


BUDGETS = {
    "basic": (ApproxDP(1e6, 0.5), "basic"),
    "gdp_filter": (GaussianDP(1e6), "gdp_filter"),
    "pure_or_gdp": (ApproxDP(1e6, 0.5), "pure_or_gdp"),
}


@settings(max_examples=80, deadline=None)
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    epsilon=st.floats(0.05, 3.0),
    features=st.integers(1, 9),
    rule=st.sampled_from(sorted(BUDGETS)),
)
def test_a_fitted_release_never_costs_more_than_declared(
    family: str, epsilon: float, features: int, rule: str
) -> None:
    assume(not (family == "gdp" and rule == "basic"))  # basic composition takes no μ-GDP release
    acct = PrivacyAccountant("memory://")
    budget, name = BUDGETS[rule]
    acct.set_budget("d", budget, rule=name)
    step = FAMILIES[family](epsilon, acct)
    data = np.zeros((3, features), dtype=int if family == "rr" else float)
    declared = step.declared_cost()
    fitted = step.fit(data).cost_
    # reserving the declared cost (what a call that fits the step reserves) and paying the fitted release
    # always fits, whatever the number of features
    reservation = acct.reserve("d", declared, key="step")
    reservation.spend("d", fitted)  # BudgetExceededError if the release cost more than declared
    assert [e.status for e in acct.history("d")] == ["open", "paid"]


def test_gaussian_releases_of_many_features_fit_their_declared_cost_exactly() -> None:
    # Calibrated at L2 sensitivity √d on its own, σ could make μ = √d/σ exceed the one-feature μ by an ulp
    # (about one case in ten of these); the noise is the one-feature noise scaled up, so it never does.
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", GaussianDP(1e6))
    for i, epsilon in enumerate(np.linspace(0.05, 3.0, 24)):
        step = GaussianNoise(
            epsilon=float(epsilon), delta=1e-6, sensitivity=1.0, accountant=acct, dataset="d"
        )
        reservation = acct.reserve("d", step.declared_cost(), key=f"step {i}")
        for features in range(2, 10):
            reservation.spend("d", step.fit(np.zeros((2, features))).cost_)
            reservation = acct.reserve("d", step.declared_cost())


# ------------------------------------------------------------------------------------------ searches


def grid(acct: Any, steps: int = 1, n_jobs: int | None = None) -> GridSearchCV:
    dp = [noise(acct, 0.5) for _ in range(steps)]
    pipe = make_pipeline(*dp, LogisticRegression())
    return GridSearchCV(pipe, {"logisticregression__C": [0.1, 1.0, 10.0]}, cv=4, n_jobs=n_jobs)


@pytest.mark.parametrize("steps", [1, 2])
def test_the_search_cost_is_what_a_plain_search_charges(steps: int) -> None:
    acct = _acct(100.0)
    search = grid(acct, steps)
    (cost,) = search_cost(search, X, Y)
    releases = (3 * 4 * 2 + 1) * steps  # candidates × splits × (fit + score), plus the refit
    assert (cost.dataset, cost.releases) == ("d", releases)
    assert Fraction(cost.cost.epsilon) == releases * Fraction(0.5)
    search.fit(X, Y)
    assert acct.spent("d").guarantee == cost.cost.guarantee
    assert acct.budget("d").epsilon == 100.0  # nothing else changed


def test_reserve_search_has_its_whole_budget_or_does_not_start() -> None:
    acct = _acct(12.0)  # the search costs 12.5
    search = grid(acct)
    with pytest.raises(BudgetExceededError), reserve_search(search, X, Y) as reserved:
        reserved.search.fit(X, Y)  # never runs
    assert kinds(acct) == ["budget"] and not hasattr(search, "best_estimator_")
    acct.set_budget("d", PureDP(13.0))
    with reserve_search(search, X, Y) as reserved:
        reserved.search.fit(X, Y)
    (reservation,) = reserved.reservations
    assert acct.spent("d").epsilon == 12.5 and reservation.remaining().epsilon == 0.0
    assert sum(1 for e in acct.history("d") if e.paid_from == reservation.key) == 25
    assert np.isnan(search.error_score) and reserved.search.error_score == "raise"  # the user's is unchanged
    assert (
        reserved.search.best_estimator_.steps[0][1].accountant is acct
        and search.estimator.steps[0][1].accountant is acct
    )


def test_a_refusal_inside_a_reserved_search_escapes_instead_of_a_nan_score() -> None:
    acct = _acct(100.0)
    search = grid(acct)
    with reserve_search(search, X, Y) as reserved:
        reserved.reservations[0].spend("d", PureDP(12.25), label="used by something else")
        with pytest.raises(BudgetExceededError, match="reservation"):
            reserved.search.fit(X, Y)


def test_cross_validate_cost_and_reservation() -> None:
    acct = _acct(100.0)
    pipe = make_pipeline(noise(acct, 0.25), noise(acct, 0.25), LogisticRegression())
    (cost,) = search_cost(pipe, X, Y, cv=5, return_train_score=True)
    assert cost.releases == 5 * 2 * (1 + 2) and Fraction(cost.cost.epsilon) == 30 * Fraction(0.25)
    with reserve_search(pipe, X, Y, cv=5, return_train_score=True) as reserved:
        cross_validate(reserved.search, X, Y, cv=5, return_train_score=True, error_score="raise")
    assert acct.spent("d").epsilon == cost.cost.epsilon
    with pytest.raises(InvalidParameterError, match="search's own"):
        search_cost(grid(acct), X, Y, cv=3)


def test_the_documented_examples_run() -> None:
    for module in (composite,):
        assert doctest.testmod(module, raise_on_error=True).failed == 0
