"""The ledger records every cost at no less than the float the noise was calibrated with, exactly.

The recorded strings are read back from the ledger's own records and compared, as exact rationals, with the
floats the samplers use (the mechanism's ε, μ or its σ, scale and sensitivity). Ledgers written by earlier
versions, which recorded the shortest decimal of each float, still open, verify and take new spends.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline import (
    ApproxDP,
    BudgetExceededError,
    GaussianDP,
    InvalidParameterError,
    PrivacyAccountant,
    PrivacyEvent,
    PureDP,
)
from dp_pipeline import (
    _exact as exact,
)
from dp_pipeline.accounting import _pricing as pricing
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.mechanisms import BinaryRandomizedResponse, Gaussian, Laplace, Staircase


def last_charge(acct: PrivacyAccountant, dataset: str) -> dict[str, Any]:
    """The charge of the newest reservation, as stored."""
    reserve = [r for r in acct.store.records(dataset) if r.kind == "reserve"][-1]
    return dict(reserve.body["charge"])


def recorded(value: str) -> Fraction:
    return Fraction(Decimal(value))


@given(st.floats(min_value=1e-9, max_value=10.0), st.floats(min_value=1e-6, max_value=1e6))
def test_a_pure_release_is_recorded_at_no_less_than_its_float_epsilon(
    epsilon: float, sensitivity: float
) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(100.0, 0.0))
    laplace = Laplace(epsilon=epsilon, sensitivity=sensitivity)
    acct.spend("d", laplace)
    charged = recorded(last_charge(acct, "d")["epsilon"])
    assert charged >= Fraction(sensitivity) / Fraction(laplace.scale)  # the noise's own exact ε
    assert charged <= Fraction(epsilon)  # which the scale, rounded up, keeps within the float ε
    for mechanism in (Staircase(epsilon=epsilon, sensitivity=1.0), BinaryRandomizedResponse(epsilon=epsilon)):
        acct.spend("d", mechanism)  # their samplers use e^{−ε} of the float ε exactly
        assert recorded(last_charge(acct, "d")["epsilon"]) >= Fraction(epsilon)


@given(st.floats(min_value=1e-4, max_value=5.0), st.floats(min_value=1e-3, max_value=1e3))
def test_a_gaussian_release_is_recorded_at_no_less_than_its_exact_mu(mu: float, sensitivity: float) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("g", GaussianDP(100.0))
    gaussian = Gaussian.from_mu(mu=mu, sensitivity=sensitivity)
    acct.spend("g", gaussian)
    # the noise's own μ = Δ/σ (σ rounded up, so at most the μ asked for), squared exactly
    assert recorded(last_charge(acct, "g")["mu2"]) >= (Fraction(sensitivity) / Fraction(gaussian.sigma)) ** 2
    acct.spend("g", GaussianDP(mu))  # a bare guarantee is charged at its float
    assert recorded(last_charge(acct, "g")["mu2"]) >= Fraction(mu) ** 2


@given(st.floats(min_value=1e-3, max_value=5.0), st.floats(min_value=1e-12, max_value=1e-3))
def test_an_approx_release_is_recorded_at_no_less_than_its_floats(epsilon: float, delta: float) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(100.0, 0.5))
    acct.spend("d", Gaussian(epsilon=epsilon, delta=delta, calibration="tail_bound", sensitivity=1.0))
    charge = last_charge(acct, "d")
    assert recorded(charge["epsilon"]) >= Fraction(epsilon)
    assert recorded(charge["delta"]) >= Fraction(delta)


def test_fifty_tenths_exceed_five_so_the_fiftieth_is_refused() -> None:
    assert 50 * Fraction(0.1) > 5  # the float 0.1 is above 1/10, and randomized response uses e^0.1 exactly
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(5.0, 0.0))
    for _ in range(49):
        acct.spend("d", BinaryRandomizedResponse(epsilon=0.1))
    spent, left = acct.spent("d").epsilon, acct.remaining("d").epsilon
    assert Fraction(spent) >= 49 * Fraction(0.1)
    assert Fraction(left) <= 5 - 49 * Fraction(0.1) and left < 0.1  # what is left does not pay for 0.1
    with pytest.raises(BudgetExceededError):
        acct.spend("d", BinaryRandomizedResponse(epsilon=0.1))
    acct.spend("d", PureDP(left))  # exactly what remains still fits


def test_laplace_noise_is_charged_at_its_exact_loss_so_five_fifths_fit_one() -> None:
    # Laplace(ε = 0.2) has scale 1/0.2 rounded up = 5 exactly, so its noise loses exactly 1/5, below the float
    assert Laplace(epsilon=0.2, sensitivity=1.0).scale == 5.0 and Fraction(0.2) > Fraction(1, 5)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    assert acct.plan_cost("d", [Laplace(epsilon=0.2, sensitivity=1.0)] * 5).epsilon == 1.0
    for _ in range(5):
        acct.spend("d", Laplace(epsilon=0.2, sensitivity=1.0))
        assert last_charge(acct, "d")["epsilon"] == "0.2"
    assert acct.spent("d").epsilon == 1.0
    with pytest.raises(BudgetExceededError):
        acct.spend("d", Laplace(epsilon=1e-9, sensitivity=1.0))
    acct.set_budget("g", PureDP(1.0))
    # a group of 5: 5 · 1/5, exactly the budget
    acct.spend("g", Laplace(epsilon=0.2, sensitivity=1.0), group_size=5)
    assert recorded(last_charge(acct, "g")["epsilon"]) == 1


def test_a_hand_built_event_that_claims_a_hair_less_than_its_noise_is_charged_its_noise() -> None:
    """The check that a claim matches its noise tolerates rounding; what is charged is the noise's exact
    loss. Laplace noise of scale 1 at sensitivity 1 loses exactly ε = 1: claimed as 1 − 5·10⁻¹⁰, it is
    charged 1, so nothing more fits a budget of 1. A Gaussian claim whose δ is 9·10⁻⁷ (relative) below the
    δ(ε) of its σ (mpmath, in the test) is refused, not charged below its loss."""
    mpmath = pytest.importorskip("mpmath")
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    claim = PureDP(1.0 - 5e-10)
    acct.spend("d", PrivacyEvent(kind="laplace", guarantee=claim, sensitivity=1.0, parameters={"scale": 1.0}))
    assert recorded(last_charge(acct, "d")["epsilon"]) == 1
    before = ledger_entries(acct.store, "d")
    with pytest.raises(BudgetExceededError):
        acct.spend("d", PureDP(4e-10))
    assert ledger_entries(acct.store, "d") == before

    mpmath.mp.dps = 50
    mu, eps = mpmath.mpf(1) / 4, mpmath.mpf("0.5")
    true_delta = mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)
    under = float(true_delta * (1 - mpmath.mpf("9e-7")))
    acct.set_budget("g", ApproxDP(0.5, under))
    gaussian = PrivacyEvent(
        kind="gaussian", guarantee=ApproxDP(0.5, under), sensitivity=1.0, parameters={"sigma": 4.0}
    )
    with pytest.raises(InvalidParameterError, match="not implied by its noise parameters"):
        acct.spend("g", gaussian)
    assert acct.history("g") == []


def test_a_ledger_written_with_shortest_decimals_opens_verifies_and_takes_new_spends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with monkeypatch.context() as patch:  # the earlier representation: the float's shortest repr
        patch.setattr(exact, "to_decimal", lambda value: Decimal(repr(float(value))))
        pricing.price_one.cache_clear()
        old = PrivacyAccountant(url, create=True)
        old.set_budget("d", ApproxDP(1.0, 1e-6))
        old.set_budget("g", GaussianDP(1.0))
        old.set_budget("m", ApproxDP(4.0, 1e-6), rule="pure_or_gdp")
        for _ in range(3):
            old.spend("d", PureDP(0.1))
        old.spend("d", ApproxDP(0.2, 1e-7))
        old.reserve("d", PureDP(0.1), key="still-open")
        old.spend("g", GaussianDP(0.3))
        old.spend("m", Gaussian.from_mu(mu=0.3, sensitivity=1.0))
        old.close()
    pricing.price_one.cache_clear()

    acct = PrivacyAccountant(url)
    assert last_charge(acct, "d")["epsilon"] == "0.1"  # the old strings are what is stored
    assert last_charge(acct, "g")["mu2"] == "0.09"
    acct.verify()
    spent = acct.spent("d").epsilon  # 3 · 0.1 + 0.2 + 0.1 open, summed as the decimals recorded: 0.6
    assert Fraction(math.nextafter(spent, 0.0)) < Fraction(Decimal("0.6")) <= Fraction(spent)
    acct.cancel("d", "still-open", reason="never read data", actor="test")
    acct.spend("d", PureDP(0.1))
    acct.spend("g", GaussianDP(0.4))
    acct.spend("m", Gaussian.from_mu(mu=0.4, sensitivity=1.0))
    acct.verify()
    # new charges add their exact binary values to the old decimal totals
    assert Fraction(acct.spent("d").epsilon) >= Fraction(Decimal("0.5")) + Fraction(0.1)
    assert Fraction(acct.spent("g").mu) ** 2 >= Fraction(Decimal("0.09")) + Fraction(0.4) ** 2
    acct.close()
    reopened = PrivacyAccountant(url)
    reopened.verify()
    reopened.close()


@pytest.mark.parametrize("mu", [0.3, 0.6, 0.1, 1 / 3, 0.7071067811865476])
def test_spent_and_remaining_mu_are_the_exact_roots_rounded_outward(mu: float) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("g", GaussianDP(1.0))
    acct.spend("g", GaussianDP(mu))
    assert acct.spent("g").mu == mu  # √(μ²) of the exact square is the float itself
    left = acct.remaining("g").mu  # the greatest float whose square fits 1 − μ²
    assert Fraction(left) ** 2 <= 1 - Fraction(mu) ** 2 < Fraction(math.nextafter(left, 2.0)) ** 2
    acct.spend("g", GaussianDP(left))
    with pytest.raises(BudgetExceededError):  # what is left is below one ulp of μ², far below 10⁻¹⁴
        acct.spend("g", GaussianDP(1e-7))
