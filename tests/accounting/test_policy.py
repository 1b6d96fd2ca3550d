"""Request, BudgetPolicy and the ledger's reducer: one value for what is asked, one calculator, one
state machine for the writer and verify; and the accountant's public surface, pinned."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, GaussianDP, PlannedRelease, PrivacyAccountant, PureDP, allocate
from dp_pipeline.accounting import Request
from dp_pipeline.accounting import _policy as policy_module
from dp_pipeline.accounting._policy import BudgetPolicy, LedgerState, Refusal, Violation, apply
from dp_pipeline.accounting.ledger import LedgerRecord, MemoryLedger
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import BudgetExceededError, InvalidParameterError
from dp_pipeline.mechanisms import Gaussian, Laplace

# ------------------------------------------------------------------------------------------- Request


def test_a_request_is_one_release_or_a_plan_and_refuses_anything_else() -> None:
    event = PrivacyEvent(kind="guarantee", guarantee=PureDP(0.5))
    assert Request((event,)).composition == "each" and not Request((event,)).is_plan
    assert Request((event, event), composition="plan", delta=1e-6).is_plan
    for bad in (
        lambda: Request((event, event)),  # two events composed "each"
        lambda: Request((event,), delta=1e-6),  # a δ is a plan's
        lambda: Request((event,), group_size=0),
        lambda: Request((event,), composition="tight"),  # type: ignore[arg-type]
        lambda: Request((PureDP(0.5),)),  # type: ignore[arg-type]
        lambda: Request.plan([]),
        lambda: Request.plan([PureDP(0.1)], delta=1.0),
        lambda: Request.one(PureDP(0.1), key="k\x00"),
    ):
        with pytest.raises(InvalidParameterError):
            bad()


def test_only_a_release_charged_and_committed_at_once_holds_nothing_to_pay_from() -> None:
    one, plan = Request.one(PureDP(0.1)), Request.plan([PureDP(0.1)])
    assert [one.settles(True), one.settles(False), plan.settles(True), plan.settles(False)] == [
        True,
        False,
        False,
        False,
    ]
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    marked = {
        "spend": acct.spend("d", PureDP(0.1)).key,
        "reserve": acct.reserve("d", PureDP(0.1)).key,
        "plan": acct.spend_plan("d", [PureDP(0.1)]).key,
    }
    stored = {r.key: bool(r.body.get("spend")) for r in acct.store.records("d") if r.kind == "reserve"}
    assert {what: stored[key] for what, key in marked.items()} == {
        "spend": True,
        "reserve": False,
        "plan": False,
    }


# ------------------------------------------------------------------------------------------- the policy


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0.1, 0.125, 0.25, 0.3, 0.5]), min_size=1, max_size=25))
def test_the_policy_admits_exactly_the_pure_spends_whose_exact_sum_fits(epsilons: list[float]) -> None:
    """Against Σεᵢ ≤ ε_B in exact rational arithmetic (Fraction of each float), computed here, and against
    what the accountant accepts."""
    budget = PureDP(2.0)
    policy = BudgetPolicy.declare(budget)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", budget)
    totals, spent = policy.empty(), Fraction(0)
    for epsilon in epsilons:
        price = policy.price(Request.one(PureDP(epsilon)), totals)
        after = policy.admit(totals, price.charge)
        fits = spent + Fraction(epsilon) <= Fraction(2.0)
        assert (not isinstance(after, Refusal)) == fits
        try:
            acct.spend("d", PureDP(epsilon))
            accepted = True
        except BudgetExceededError:
            accepted = False
        assert accepted == fits
        if not isinstance(after, Refusal):
            totals, spent = after, spent + Fraction(epsilon)
    left, _ = policy.remaining(totals)
    assert isinstance(left, ApproxDP) and Fraction(left.epsilon) <= Fraction(2.0) - spent  # rounded down


def test_the_policy_prices_gaussian_releases_by_their_squares_of_mu() -> None:
    """μ-GDP filter: Σμᵢ² ≤ μ_B² (Dong, Roth & Su 2022, Cor. 3.3), with the squares of the float μ summed
    exactly here (Fractions): 0.6² + 0.8² exceeds 1 by float rounding, so the second is refused, and a
    smaller one fits."""
    policy = BudgetPolicy.declare(GaussianDP(1.0))
    totals, spent = policy.empty(), Fraction(0)
    for mu in (0.6, 0.8, 0.79, 1e-3):
        mechanism = Gaussian.from_mu(mu, sensitivity=1.0)
        after = policy.admit(totals, policy.price(Request.one(mechanism), totals).charge)
        square = Fraction(mu) ** 2  # the guarantee of from_mu is GaussianDP(mu)
        assert (not isinstance(after, Refusal)) == (spent + square <= 1), mu
        if not isinstance(after, Refusal):
            totals, spent = after, spent + square
    assert spent == Fraction(0.6) ** 2 + Fraction(0.79) ** 2 + Fraction(1e-3) ** 2


def test_a_refused_admission_leaves_the_totals_as_they_were() -> None:
    policy = BudgetPolicy.declare(ApproxDP(1.0, 1e-6))
    totals = policy.empty()
    refused = policy.admit(totals, policy.price(Request.one(PureDP(1.5)), totals).charge)
    assert isinstance(refused, Refusal) and totals.same_as(policy.empty())


def test_quote_agrees_with_spend_plan_one_after_the_other() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    plans = [Request.plan([Laplace(epsilon=0.2, sensitivity=1.0)] * 2), Request.one(PureDP(0.5))]
    quoted = acct.quote("d", plans)
    assert quoted.fits and [c.what for c in quoted.costs] == ["plan cost", "spend cost"]
    assert not acct.quote("d", [*plans, Request.one(PureDP(0.2))])
    acct.spend_plan("d", [Laplace(epsilon=0.2, sensitivity=1.0)] * 2)
    acct.spend("d", PureDP(0.5))
    with pytest.raises(BudgetExceededError):
        acct.spend("d", PureDP(0.2))


# ------------------------------------------------------------------------------------------- the reducer


def test_the_reducer_folds_to_the_head_the_writer_left_and_reports_a_violation_as_a_value() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    acct.spend("d", PureDP(0.25))
    acct.reserve("d", PureDP(0.25), key="open")
    state: LedgerState | Violation = LedgerState("d")
    for record in acct.store.records("d"):
        assert isinstance(state, LedgerState)
        state = apply(state, record)
    assert isinstance(state, LedgerState) and state.check_head(acct.store.head("d")) is None
    last = acct.store.records("d")[-1]
    odd = LedgerRecord(**{**last.__dict__, "seq": last.seq + 1, "kind": "mystery"})
    violation = apply(state, odd)
    assert isinstance(violation, Violation) and "unknown record kind 'mystery'" in str(violation)


# ------------------------------------------------------------------------------------------- allocation


def test_allocating_to_a_bare_target_writes_no_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("allocate opened a ledger")

    monkeypatch.setattr(MemoryLedger, "__init__", refuse)
    monkeypatch.setattr(PrivacyAccountant, "__init__", refuse)
    allocation = allocate([PlannedRelease("gaussian", sensitivity=1.0)] * 4, target=GaussianDP(1.0))
    # four equal Gaussian releases at exact μ-GDP: σ = Δ·√4/μ_B = 2 (up to the search's tolerance)
    assert allocation[0].std == pytest.approx(2.0, rel=1e-4) and allocation[0].std >= 2.0
    assert policy_module.BudgetPolicy.declare(GaussianDP(1.0)).guarantee == GaussianDP(1.0)


# ------------------------------------------------------------------------------------------- the surface

PUBLIC = {
    "budget",
    "cancel",
    "close",
    "datasets",
    "dataset",
    "history",
    "plan_cost",
    "quote",
    "remaining",
    "reservation",
    "reserve",
    "set_budget",
    "shrink",
    "spend",
    "spend_plan",
    "spent",
    "store",
    "verify",
}


def test_the_accountant_public_members_are_exactly_these() -> None:
    """The deprecated aliases (``release``, ``set_budget(method=)``), the three plan checks (``spend_cost``,
    ``plan_fits``, ``plans_fit``: now ``quote``), ``anchor`` and ``open_reservations`` (now functions of
    :mod:`~dp_pipeline.accounting._verify` and :mod:`~dp_pipeline.accounting._reports`) are gone, and so are
    ``relation`` (``budget(ds).relation``), ``url`` (``store.url``), ``partitions`` (``spent(ds,
    partition=...)``, ``reports.partition_spending``) and ``records`` (``reports.ledger_entries``). A new
    member is a design decision: add it here; there are at most 18."""
    assert {name for name in dir(PrivacyAccountant) if not name.startswith("_")} == PUBLIC
    assert len(PUBLIC) <= 18


@pytest.mark.parametrize("rule", ["basic", "pure_or_gdp", "zcdp"])
def test_allocating_to_a_policy_is_allocating_to_a_fresh_dataset_with_that_budget(rule: str) -> None:
    """A run's share with the dataset's rule and relation, without a ledger: the same calibration, bit for
    bit, as against the whole budget of a dataset declared with them."""
    plan = [PlannedRelease("gaussian", sensitivity=1.0, weight=w) for w in (1.0, 3.0)]
    share = ApproxDP(1.0, 1e-6)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", share, rule=rule, relation="add_remove")
    acct.spend("d", PureDP(0.5))  # spent: ignored against the whole budget
    expected = allocate(plan, accountant=acct, dataset="d", against="budget")
    got = allocate(plan, target=BudgetPolicy.declare(share, rule, "add_remove"))
    assert [r.std.hex() for r in got] == [r.std.hex() for r in expected]
    assert (got.cost, got.method, got.target) == (expected.cost, expected.method, expected.target)
