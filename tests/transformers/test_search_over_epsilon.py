"""A search whose grid varies a DP step's ε, over a FeatureUnion nested in a ColumnTransformer in a Pipeline,
charges exactly what its releases cost: candidates × splits × (fit + score) at each candidate's ε, plus the
refit at the best candidate's. :func:`search_cost` is that total with the refit counted once per distinct
fitting cost (the best candidate is known only afterwards), and a reserved search pays every release from
its reservation.

Amounts are checked against exact sums of the steps' ε done here with ``fractions.Fraction``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import FeatureUnion, make_pipeline
from sklearn.preprocessing import StandardScaler

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.transformers import LaplaceNoise, reserve_search, search_cost

X = np.random.default_rng(5).uniform(0.0, 1.0, (60, 2))
Y = (X[:, 1] > 0.5).astype(int)
FIXED, GRID, SPLITS = 0.25, (0.125, 0.5), 3


def _search() -> tuple[PrivacyAccountant, GridSearchCV]:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(100.0))

    def noise(epsilon: float) -> LaplaceNoise:
        return LaplaceNoise(epsilon=epsilon, lower=0.0, upper=1.0, accountant=acct, dataset="d")

    columns = ColumnTransformer(
        [
            ("u", FeatureUnion([("dp", noise(FIXED)), ("scaled", StandardScaler())]), [0]),
            ("b", noise(GRID[0]), [1]),
        ]
    )
    pipe = make_pipeline(columns, LogisticRegression())
    return acct, GridSearchCV(pipe, {"columntransformer__b__epsilon": list(GRID)}, cv=SPLITS)


def _per_call(epsilon: float) -> Fraction:
    """One fit (or one scoring) of a candidate: its two DP steps, one feature each."""
    return Fraction(FIXED) + Fraction(epsilon)


def _released(search: GridSearchCV) -> Fraction:
    """What the search released: every candidate fitted and scored on each split, then the best refitted."""
    best = search.best_params_["columntransformer__b__epsilon"]
    return sum((SPLITS * 2 * _per_call(e) for e in GRID), Fraction(0)) + _per_call(best)


def test_a_plain_search_over_epsilon_charges_what_it_released() -> None:
    acct, search = _search()
    search.fit(X, Y)
    assert Fraction(acct.spent("d").epsilon) == _released(search)
    acct.verify()


def test_a_reserved_search_over_epsilon_reserves_an_upper_bound_and_pays_what_it_released() -> None:
    acct, search = _search()
    (cost,) = search_cost(search, X, Y)
    every_refit = sum((_per_call(e) for e in GRID), Fraction(0))
    assert Fraction(cost.cost.epsilon) == sum((SPLITS * 2 * _per_call(e) for e in GRID), every_refit)
    with reserve_search(search, X, Y) as reserved:
        reserved.search.fit(X, Y)
    (reservation,) = reserved.reservations
    paid = [e for e in acct.history("d") if e.paid_from == reservation.key]
    assert sum(Fraction(e.cost.epsilon) for e in paid) == _released(reserved.search)  # type: ignore[union-attr]
    assert Fraction(acct.spent("d").epsilon) == Fraction(cost.cost.epsilon)  # the unused refit stays charged
    acct.verify()
