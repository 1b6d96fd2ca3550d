"""Every frame function and transformer is paid the same way by each spender: an accountant with
``dataset=``, a dataset handle (``acct.dataset("d")``) and a reservation, each charging exactly one release
of the ε asked, and a refusal changing nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import BudgetExceededError, InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import UNACCOUNTED
from dp_pipeline.frames import (
    add_noise,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_median,
    dp_quantiles,
    dp_std,
    dp_sum,
    dp_var,
    randomized_response,
)
from dp_pipeline.transformers import LaplaceNoise

HELD = 0.5  # what the task's reservation holds, of a budget of ε = 1

FRAME = pd.DataFrame(
    {
        "age": [23.0, 35.0, 41.0, 52.0, 67.0, 30.0],
        "region": ["n", "s", "n", "e", "s", "n"],
        "answer": [True, False, True, True, False, True],
    }
)

Release = Callable[..., Any]
RELEASES: dict[str, Release] = {
    "dp_count": lambda df, eps, **who: dp_count(df, epsilon=eps, **who),
    "dp_sum": lambda df, eps, **who: dp_sum(df, "age", lower=0, upper=100, epsilon=eps, **who),
    "dp_mean": lambda df, eps, **who: dp_mean(df, "age", lower=0, upper=100, epsilon=eps, **who),
    "dp_var": lambda df, eps, **who: dp_var(df, "age", lower=0, upper=100, epsilon=eps, **who),
    "dp_std": lambda df, eps, **who: dp_std(df, "age", lower=0, upper=100, epsilon=eps, **who),
    "dp_histogram": lambda df, eps, **who: dp_histogram(
        df, "region", categories=["n", "s", "e"], epsilon=eps, **who
    ),
    "dp_median": lambda df, eps, **who: dp_median(df, "age", lower=0, upper=100, epsilon=eps, **who),
    "dp_quantiles": lambda df, eps, **who: dp_quantiles(
        df, "age", [0.25, 0.75], lower=0, upper=100, epsilon=eps, **who
    ),
    "add_noise": lambda df, eps, **who: add_noise(df, ["age"], lower=0, upper=100, epsilon=eps, **who),
    "randomized_response": lambda df, eps, **who: randomized_response(df, "answer", epsilon=eps, **who),
    "LaplaceNoise": lambda df, eps, **who: LaplaceNoise(epsilon=eps, lower=0, upper=100, **who).fit_transform(
        df[["age"]]
    ),
}

SPENDERS: dict[str, Callable[[PrivacyAccountant], dict[str, Any]]] = {
    "accountant and dataset": lambda acct: {"accountant": acct, "dataset": "d"},
    "handle": lambda acct: {"accountant": acct.dataset("d")},
    "reservation": lambda acct: {"accountant": acct.reservation("d", "task")},
}


def _ledger() -> PrivacyAccountant:
    """A budget of ε = 1 on "d", half of it reserved for a task (key "task")."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    acct.reserve("d", PureDP(HELD), key="task")
    return acct


def _charged(acct: PrivacyAccountant) -> list[tuple[float, str | None]]:
    """Each release in the history but the task's reservation: (ε charged, the reservation it was paid
    from)."""
    return [(e.cost.epsilon, e.paid_from) for e in acct.history("d") if e.key != "task"]


@pytest.mark.parametrize("spender", list(SPENDERS))
@pytest.mark.parametrize("release", list(RELEASES))
def test_each_spender_pays_one_release_of_the_epsilon_asked(release: str, spender: str) -> None:
    acct = _ledger()
    RELEASES[release](FRAME, 0.25, **SPENDERS[spender](acct))
    ((epsilon, paid_from),) = _charged(acct)
    # pure releases: the charge is the ε asked (a release of several parts is charged their sum, ε)
    assert epsilon == pytest.approx(0.25, rel=1e-9)
    assert paid_from == ("task" if spender == "reservation" else None)
    spent = acct.spent("d").epsilon
    assert spent == pytest.approx(HELD + (0 if spender == "reservation" else 0.25), rel=1e-9)


@pytest.mark.parametrize("spender", list(SPENDERS))
@pytest.mark.parametrize("release", list(RELEASES))
def test_each_spender_refuses_what_does_not_fit_and_changes_nothing(release: str, spender: str) -> None:
    """ε = 0.75 fits neither the rest of the budget (1 − 0.5) nor the reservation (0.5)."""
    acct = _ledger()
    before = acct.store.records("d")
    with pytest.raises(BudgetExceededError):
        RELEASES[release](FRAME, 0.75, **SPENDERS[spender](acct))
    assert acct.store.records("d") == before


@pytest.mark.parametrize("release", list(RELEASES))
@pytest.mark.parametrize("accountant", [UNACCOUNTED, "unaccounted"])
def test_unaccounted_releases_charge_nothing(release: str, accountant: Any) -> None:
    acct = _ledger()
    before = acct.store.records("d")
    RELEASES[release](FRAME, 0.25, accountant=accountant)
    assert acct.store.records("d") == before


class _Ledgerish:
    """Looks like an accountant (``spend``, ``reserve``, ``relation``) but is none."""

    def spend(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("charged")

    reserve = spend
    relation = spend


@pytest.mark.parametrize("release", list(RELEASES))
@pytest.mark.parametrize("accountant", [None, _Ledgerish(), "memory://"])
def test_what_is_not_a_spender_is_refused_naming_accountant(release: str, accountant: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        RELEASES[release](FRAME, 0.25, accountant=accountant, dataset="d")
    assert info.value.parameter == "accountant"


@pytest.mark.parametrize("spender", ["handle", "reservation"])
@pytest.mark.parametrize("release", list(RELEASES))
def test_a_bound_spender_with_another_dataset_is_refused_naming_dataset(release: str, spender: str) -> None:
    acct = _ledger()
    before = acct.store.records("d")
    with pytest.raises(InvalidParameterError) as info:
        RELEASES[release](FRAME, 0.25, **SPENDERS[spender](acct), dataset="d/2026-11-24")
    assert info.value.parameter == "dataset"
    assert acct.store.records("d") == before


def test_a_handle_survives_clone_and_charges_the_same_budget() -> None:
    from sklearn.base import clone

    acct = _ledger()
    noise = LaplaceNoise(epsilon=0.125, lower=0, upper=100, accountant=acct.dataset("d"))
    copy = clone(noise)
    assert copy.get_params()["accountant"] is noise.accountant
    copy.fit_transform(np.array([[1.0], [2.0]]))
    noise.fit_transform(np.array([[1.0], [2.0]]))
    assert [epsilon for epsilon, _ in _charged(acct)] == [0.125, 0.125]
