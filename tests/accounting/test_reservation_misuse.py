"""Misusing a reservation cannot restore spent budget or release for free: a spend's own charge is not a
budget to pay from, a single release whose attempt committed cannot be shrunk (it is not a plan), and a
forged record that does either is reported by ``verify``.

Amounts are checked against exact rational arithmetic done here (``fractions.Fraction``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from dp_pipeline import PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.accounting._records import (
    PayBody,
    ReserveBody,
    ShrinkBody,
    append,
    budget_of,
    with_totals,
)
from dp_pipeline.accounting.ledger import MemoryLedger
from dp_pipeline.accounting.rules import Charge
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import LedgerError


def _acct() -> PrivacyAccountant:
    acct = PrivacyAccountant(MemoryLedger())
    acct.set_budget("d", PureDP(1.0))
    return acct


def _unchanged(acct: PrivacyAccountant) -> tuple[Any, ...]:
    return [e.hash for e in ledger_entries(acct.store, "d")], acct.spent("d")


def _pure(epsilon: float) -> dict[str, Any]:
    return PrivacyEvent(kind="guarantee", guarantee=PureDP(epsilon), relation="replace_one").to_dict()


def _charge(acct: PrivacyAccountant, epsilon: str) -> Charge:
    names = budget_of(acct.store.head("d").state, "d").rule.amounts  # type: ignore[union-attr]
    return Charge.from_json({"epsilon": epsilon, "delta": "0", "mu2": None}, names, "forged")


def _forge(acct: PrivacyAccountant, key: str, body: Any, totals_after: Any = None) -> None:
    """Append ``body`` under the reservation ``key`` past the accountant's checks, with a valid chain."""
    store = acct.store
    found = store.reservation("d", key=key)
    assert found is not None

    def run(tx: Any) -> None:
        head = tx.head
        budget = budget_of(head.state, "d")
        totals = budget.rule.read_totals(head.state.totals, "d")
        made = body(totals, budget)
        after = made.totals if isinstance(made, ShrinkBody) else totals
        append(tx, made, with_totals(head.state, after), key=key, reservation=found.reserve.seq)

    store.atomic("d", run)


def test_a_spend_charges_its_own_release_and_holds_nothing_to_pay_from() -> None:
    acct = _acct()
    spent = acct.spend("d", PureDP(0.5), key="count", label="the count")
    before = _unchanged(acct)
    for payer in (spent, acct.reservation("d", "count")):
        with pytest.raises(LedgerError, match="holds nothing to pay from"):
            payer.spend("d", PureDP(0.5), label="a second release")
    assert _unchanged(acct) == before
    assert Fraction(acct.spent("d").epsilon) == Fraction(0.5)  # one release, charged once
    acct.verify()


def test_a_committed_single_release_cannot_be_shrunk_back_to_the_budget() -> None:
    acct = _acct()
    acct.spend("d", PureDP(0.5), key="count")
    attempt = acct.reserve("d", PureDP(0.25), key="attempt")
    attempt.commit()  # its attempt may have read data
    before = _unchanged(acct)
    for key, cost in [("count", PureDP(0.5)), ("attempt", PureDP(0.25))]:
        with pytest.raises(LedgerError, match="not a plan"):
            acct.shrink("d", key, [], reason="pretend it never ran")
        with pytest.raises(LedgerError, match="not a plan"):
            acct.shrink("d", key, [cost], reason="keep it whole")
    assert _unchanged(acct) == before
    assert Fraction(acct.spent("d").epsilon) == Fraction(0.5) + Fraction(0.25)
    idle = acct.reserve("d", PureDP(0.125), key="idle")  # open: handing it back is a cancellation
    assert acct.shrink("d", idle.key, [], reason="never started").cost == PureDP(0.0).to_approx_dp()
    acct.verify()


def test_verify_reports_a_forged_shrink_of_a_committed_spend() -> None:
    acct = _acct()
    acct.spend("d", PureDP(0.5), key="count")
    acct.verify()

    def shrink(totals: Any, budget: Any) -> ShrinkBody:
        rule = budget.rule
        after = rule.remove(totals, _charge(acct, "0.5"), ())
        return ShrinkBody([], PureDP(0.0), "basic", _charge(acct, "0"), "forged", "x@y", after)

    _forge(acct, "count", shrink)
    assert acct.spent("d").epsilon == 0.0  # the forged record did restore the budget
    with pytest.raises(LedgerError, match="not a plan"):
        acct.verify()


def test_verify_reports_a_forged_payment_from_a_spend() -> None:
    acct = _acct()
    acct.spend("d", PureDP(0.5), key="count")

    def pay(totals: Any, budget: Any) -> PayBody:
        charge = _charge(acct, "0.5")
        release = ReserveBody(
            "forged", 1, False, None, "replace_one", [_pure(0.5)], PureDP(0.5), "basic", charge, totals
        )
        return PayBody(release, charge, "adaptive")

    _forge(acct, "count", pay)
    with pytest.raises(LedgerError, match="holds nothing to pay from"):
        acct.verify()
