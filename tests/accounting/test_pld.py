"""dp-pipeline's own PLD (dp_pipeline.accounting._pld) against independent references: the exact ε of
compositions computed another way (mpmath for μ-GDP, the exact finite PLD of randomized response), and
dp-accounting's PLD (a dev dependency only) for Laplace, Gaussian and mixed plans."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from dp_pipeline import ApproxDP, PrivacyAccountant
from dp_pipeline.accounting import _losses
from dp_pipeline.accounting._analysis import pld
from dp_pipeline.accounting._composition import PRICING, compose_plan, group_event, plan_epsilon_floor
from dp_pipeline.accounting._verify import check_semantics
from dp_pipeline.mechanisms import Laplace
from tests.accounting.test_composition import (
    finite_pld,
    gaussian,
    hockey_stick,
    laplace,
    mp_gdp_epsilon,
    pld_epsilon,
    product_pld,
    rr,
    solve_epsilon,
)

pld_lib = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("eps", "n", "delta"), [(0.3, 7, 1e-6), (1.1, 5, 1e-9), (0.05, 40, 1e-5)])
def test_randomized_response_plans_are_bracketed_by_the_floor_and_the_pld(
    eps: float, n: int, delta: float
) -> None:
    events = [rr(eps)] * n
    losses, probs = product_pld([finite_pld(e) for e in events])
    exact = solve_epsilon(lambda e: hockey_stick(losses, probs, e), delta, n * eps + 1)
    upper, lower = pld_epsilon(events, delta), plan_epsilon_floor(events, delta=delta)
    assert lower <= exact <= upper
    assert upper == pytest.approx(exact, rel=1e-6)
    assert lower == pytest.approx(exact, rel=1e-3)


@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_gaussian_plans_are_bracketed_by_the_floor_and_the_pld(delta: float) -> None:
    sigmas = [0.8, 1.5, 3.0, 7.0]
    events = [gaussian(s) for s in sigmas]
    exact = mp_gdp_epsilon(math.sqrt(math.fsum(1 / s**2 for s in sigmas)), delta)
    upper, lower = pld_epsilon(events, delta), plan_epsilon_floor(events, delta=delta)
    assert lower <= exact <= upper
    assert upper == pytest.approx(exact, rel=1e-4)
    assert lower == pytest.approx(exact, rel=1e-3)


def _reference(events: list, interval: float, pessimistic: bool) -> object:
    composed = None
    for e in events:
        build = pld_lib.from_laplace_mechanism if e.kind == "laplace" else pld_lib.from_gaussian_mechanism
        noise = e.parameters["scale"] if e.kind == "laplace" else e.parameters["sigma"]
        one = build(
            noise,
            sensitivity=e.sensitivity,
            pessimistic_estimate=pessimistic,
            value_discretization_interval=interval,
        )
        composed = one if composed is None else composed.compose(one)
    return composed


@pytest.mark.parametrize(
    ("events", "delta"),
    [
        ([laplace(0.3)] * 10, 1e-6),
        ([laplace(0.5), laplace(1.2, 2.0), gaussian(2.0), gaussian(4.0, 2.0)], 1e-7),
        ([gaussian(1.0)] * 3 + [laplace(0.1)] * 5, 1e-5),
    ],
)
def test_plan_epsilon_and_delta_agree_with_dp_accounting(events: list, delta: float) -> None:
    """Our ε at δ is at least dp-accounting's optimistic value and within compose_plan's stated accuracy
    (2e-4) of its pessimistic one; our δ at that ε on the same fine grid is at least dp-accounting's
    optimistic δ and within 1e-3 of its pessimistic δ (ours adds the proven bound on the FFT's
    floating-point error, which dp-accounting leaves out: measured 1e-6 to 5e-4 of δ here)."""
    ours = pld_epsilon(events, delta)
    h = 1e-4
    theirs_up, theirs_low = _reference(events, h, True), _reference(events, h, False)
    assert ours >= theirs_low.get_epsilon_for_delta(delta)
    assert ours == pytest.approx(theirs_up.get_epsilon_for_delta(delta), rel=1e-4)
    losses = [_losses._event_loss(e) for e in events]
    ours_delta = pld._plan_pld(losses, h, 1e-18).delta_for_epsilon(ours)
    assert theirs_low.get_delta_for_epsilon(ours) * (1 - 1e-9) <= ours_delta
    assert ours_delta <= theirs_up.get_delta_for_epsilon(ours) * (1 + 1e-3)
    assert plan_epsilon_floor(events, delta=delta) <= theirs_up.get_epsilon_for_delta(delta)


def test_bounded_range_connect_the_dots_agrees_with_dp_accounting() -> None:
    """The bounded-range PLD through our connect-the-dots and through dp-accounting's, from the same
    profile at the same points: the same δ(ε) up to the stated rounding allowances."""
    from dp_accounting.pld import pld_pmf

    eps, h = 0.7, 1e-3
    points = list(range(math.floor(-eps / h), math.ceil(eps / h) + 1))
    ours = pld._single_pld(_losses._BoundedRangeLoss(eps), h).self_compose(4, 1e-18)
    deltas = [pld._bounded_range_profile(eps, g * h) for g in points]
    theirs = pld_lib.PrivacyLossDistribution(
        pld_pmf.create_pmf_pessimistic_connect_dots(h, points, deltas)
    ).self_compose(4)
    for x in np.linspace(0.0, 2.5, 11):
        expected = theirs.get_delta_for_epsilon(float(x))
        assert ours.delta_for_epsilon(float(x)) == pytest.approx(expected, rel=1e-8, abs=1e-13)
        assert ours.delta_for_epsilon(float(x)) >= expected * (1 - 1e-12)


# --------------------------------------------------------------------------------------------------
# a ledger written under the previous pricing (dp-accounting 0.4.4's PLD) verifies under this one


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    shutil.copy(DATA / "ledger_dp_accounting_pricing.db", path)
    return path


def test_a_ledger_priced_by_dp_accounting_verifies_and_its_charges_are_above_the_floor(
    tmp_path: Path,
) -> None:
    acct = PrivacyAccountant(f"sqlite:///{_ledger(tmp_path)}")
    written = json.loads((DATA / "ledger_dp_accounting_pricing.json").read_text(encoding="utf-8"))
    history = {e.key: e for e in acct.history("plans") if e.key is not None}
    below_now = []
    for key, charged in written["charged_as_written"].items():
        if key == "shrunk":  # charged for a sub-plan by its shrink record, which verify replays below
            continue
        events = [group_event(e, 1) for e in history[key].events]
        now = compose_plan(events, delta=charged["delta"])
        if now.guarantee.epsilon > charged["epsilon"]:  # type: ignore[attr-defined]
            below_now.append(key)
        assert plan_epsilon_floor(events, delta=charged["delta"]) <= charged["epsilon"]
    # re-pricing exactly would raise a false tamper alarm: this version prices some plans a hair higher
    assert below_now
    assert acct.verify().records > 0
    acct.spend_plan("plans", [Laplace(epsilon=0.2, sensitivity=1.0)] * 3, key="new", delta=1e-6)
    new = acct.store.reservation("plans", key="new")
    assert new is not None and new.reserve.body["pricing"] == PRICING
    acct.verify()
    acct.close()


@pytest.mark.parametrize("stated", [None, "dp-accounting 0.4.4", PRICING])
def test_a_forged_under_charge_in_an_older_record_is_found(tmp_path: Path, stated: str | None) -> None:
    """An under-charge of 1e-3 relative in a plan record that names no pricing, another one, or this one:
    verify's replay reports it (the chain is re-hashed by the forger, so only the meaning can show it)."""
    acct = PrivacyAccountant(f"sqlite:///{_ledger(tmp_path)}")
    records = acct.store.records("plans")
    head = acct.store.head("plans")
    assert check_semantics("plans", records, head) is None
    index = next(i for i, r in enumerate(records) if r.key == "laplace" and r.kind == "reserve")
    body = dict(records[index].body)
    charge = dict(body["charge"])
    charge["epsilon"] = str(Decimal(charge["epsilon"]) * Decimal("0.999"))
    body["charge"] = charge
    if stated is not None:
        body["pricing"] = stated
    forged = [*records[:index], dataclasses.replace(records[index], body=body), *records[index + 1 :]]
    problem = check_semantics("plans", forged, head)
    assert problem is not None and "below what its request costs" in problem
    acct.close()


def test_a_plan_this_version_priced_a_few_ulps_lower_elsewhere_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same version on another machine (other numpy or scipy builds round their FFTs differently)
    charges a plan a few ulps apart from what this machine computes. Such a ledger is honest: its charge
    is above the proven floor, and verify accepts it; an under-charge of 1e-3 is still found (above)."""
    from dp_pipeline.accounting import _pricing
    from dp_pipeline.accounting.rules import Charge

    honest_price = _pricing.price

    def elsewhere(*args: object, **kwargs: object) -> _pricing.Price:
        price = honest_price(*args, **kwargs)  # type: ignore[arg-type]
        epsilon = price.charge["epsilon"]
        assert epsilon is not None
        lower = Charge({**price.charge.amounts, "epsilon": epsilon * (1 - Decimal(2) ** -40)})
        return dataclasses.replace(price, charge=lower)

    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    plan = [Laplace(epsilon=0.3, sensitivity=1.0)] * 4
    with PrivacyAccountant(url) as acct:
        acct.set_budget("d", ApproxDP(5.0, 1e-5))
        monkeypatch.setattr(_pricing, "price", elsewhere)
        acct.spend_plan("d", plan, key="elsewhere", delta=1e-6)
        monkeypatch.setattr(_pricing, "price", honest_price)
    with PrivacyAccountant(url) as acct:
        record = acct.store.reservation("d", key="elsewhere")
        assert record is not None and record.reserve.body["pricing"] == PRICING
        events = [group_event(m.event, 1) for m in plan]
        charged = Decimal(record.reserve.body["charge"]["epsilon"])
        assert charged < Decimal(compose_plan(events, delta=1e-6).guarantee.epsilon)  # type: ignore[attr-defined]
        assert charged >= Decimal(plan_epsilon_floor(events, delta=1e-6))
        assert acct.verify().records > 0
