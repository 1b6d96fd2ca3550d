"""PrivacyAccountant: the public contract, exact arithmetic, refusals, group sizes, rules, plans, keys."""

from __future__ import annotations

import copy
import math
import pickle
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
    PrivacyAccountant,
    PrivacyEvent,
    PureDP,
)
from dp_pipeline.accounting import Request, UnknownDatasetError, ledger_entries, open_reservations
from dp_pipeline.accounting.ledger import MemoryLedger
from dp_pipeline.exceptions import (
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    UnsupportedCompositionError,
)
from dp_pipeline.mechanisms import Laplace
from tests.accounting.conftest import dump_rows


def gaussian(sigma: float, sensitivity: float = 1.0) -> PrivacyEvent:
    """An exactly (S/σ)-GDP Gaussian release."""
    return PrivacyEvent(
        kind="gaussian",
        guarantee=GaussianDP(sensitivity / sigma),
        sensitivity=sensitivity,
        parameters={"sigma": sigma},
    )


def gaussian_approx(epsilon: float, delta: float, sensitivity: float = 1.0) -> PrivacyEvent:
    """A Gaussian release calibrated (analytically) to (ε, δ): σ solved from GaussianDP.to_approx_dp."""
    lo, hi = 1e-3, 1e3  # bisection on μ: the largest μ whose (ε, δ) reading fits
    for _ in range(200):
        mid = (lo + hi) / 2
        if GaussianDP(mid).to_approx_dp(delta).epsilon <= epsilon:
            lo = mid
        else:
            hi = mid
    sigma = sensitivity / lo
    return PrivacyEvent(
        kind="gaussian",
        guarantee=ApproxDP(epsilon, delta),
        sensitivity=sensitivity,
        parameters={"sigma": sigma},
    )


@pytest.fixture(params=["memory", "sqlite"])
def acct(request: pytest.FixtureRequest, tmp_path: Path) -> PrivacyAccountant:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'ledger.db'}"
    accountant = PrivacyAccountant(url, create=True)
    yield accountant
    accountant.close()


# ---------------------------------------------------------------------------------------------- contract


def test_public_contract_lines_work_as_written(tmp_path: Path) -> None:
    acct = PrivacyAccountant(f"sqlite:///{tmp_path / 'ledger.db'}", create=True)
    acct.set_budget("patients", ApproxDP(3.0, 1e-6))
    m = Laplace(epsilon=0.5, sensitivity=1.0)
    acct.spend("patients", m, group_size=1, label="count diabetics")
    acct.spend("patients", m.event)
    acct.spend("patients", PureDP(0.25))
    with acct.reserve("patients", m, key="dag/task/run/try") as r:
        assert r.status == "open"
    assert r.status == "committed"
    spent, remaining = acct.spent("patients"), acct.remaining("patients")
    assert (spent.epsilon, spent.delta, spent.method) == (1.75, 0.0, "basic")
    assert (remaining.epsilon, remaining.delta) == (1.25, 1e-6)
    assert "spent on 'patients'" in str(spent) and "ε = 1.75" in str(spent)
    history = ledger_entries(acct.store, "patients")
    assert [e.kind for e in history] == ["budget"] + ["reserve", "commit"] * 4
    first = history[1]
    assert first.label == "count diabetics" and first.group_size == 1 and first.status == "committed"
    assert first.guarantee == ApproxDP(0.5, 0.0) and first.time.tzinfo is not None
    assert history[-2].key == "dag/task/run/try"
    plan = acct.plan_cost("patients", [m, m, m])  # three pure spends: priced at δ = 0, exactly Σε
    assert (plan.epsilon, plan.delta, plan.method) == (1.5, 0.0, "basic")
    two = acct.plan_cost("patients", [m, m], delta=1e-6)  # at δ = 1e-6, PLD beats 1.0 slightly
    assert two.method == "pld" and 0.99 < two.epsilon < 1.0 and two.delta == 1e-6
    acct.spend_plan("patients", [m, m], key="plan-1", delta=1e-6)
    assert acct.spent("patients").epsilon == pytest.approx(1.75 + two.epsilon, rel=1e-15)
    assert acct.remaining("patients").delta == 0.0  # the plan was composed at all the δ left
    assert acct.datasets() == ["patients"]
    assert "verified" in str(acct.verify())
    acct.set_budget("genomes", GaussianDP(mu=1.0))
    assert acct.remaining("genomes").mu == 1.0 and acct.datasets() == ["genomes", "patients"]


def test_report_currency_attributes(acct: PrivacyAccountant) -> None:
    acct.set_budget("a", ApproxDP(1.0, 1e-6))
    acct.set_budget("g", GaussianDP(1.0))
    with pytest.raises(AttributeError, match="μ-GDP budget"):
        _ = acct.spent("g").epsilon
    with pytest.raises(AttributeError, match=r"\.mu"):
        _ = acct.remaining("g").delta
    with pytest.raises(AttributeError, match=r"\(ε, δ\) budget"):
        _ = acct.spent("a").mu
    assert acct.spent("g").mu == 0.0 and acct.spent("g").method == "gdp"
    assert acct.budget("a").guarantee == ApproxDP(1.0, 1e-6)
    assert "μ = 1" in str(acct.remaining("g"))


def test_pure_budget_is_stored_as_approx(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", PureDP(2.0))
    assert acct.budget("d").guarantee == ApproxDP(2.0, 0.0)
    with pytest.raises(BudgetExceededError):  # a δ > 0 spend exceeds a pure budget's δ = 0
        acct.spend("d", ApproxDP(0.1, 1e-9))


# --------------------------------------------------------------------------------------- exact arithmetic


def test_spends_that_sum_to_the_budget_exactly_fit_and_the_next_is_refused(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(5.0, 0.0))
    for _ in range(10):  # 0.1 + 0.15 = 0.125 + 0.125 = 1/4 exactly in binary, so 10 · 0.5 = 5
        acct.spend("d", PureDP(0.1))
        acct.spend("d", PureDP(0.15))
        acct.spend("d", PureDP(0.125))
        acct.spend("d", PureDP(0.125))
    assert Fraction(0.1) + Fraction(0.15) == Fraction(1, 4)
    assert acct.spent("d").epsilon == 5.0 and acct.remaining("d").epsilon == 0.0
    with pytest.raises(BudgetExceededError) as info:
        acct.spend("d", PureDP(0.125))
    err = info.value
    assert err.dataset == "d" and err.requested == ApproxDP(0.125, 0.0)
    assert err.spent == ApproxDP(5.0, 0.0) and err.remaining == ApproxDP(0.0, 0.0)
    assert err.budget == ApproxDP(5.0, 0.0)
    assert len(ledger_entries(acct.store, "d")) == 1 + 80
    acct.spend("d", PureDP(0.0))  # nothing costs nothing, even on an exhausted budget


@pytest.mark.parametrize("first", [0.3, 1 / 3, 0.1 + 0.2, 0.7000000000000001, 1e-12])
def test_spending_exactly_the_remaining_budget_succeeds(acct: PrivacyAccountant, first: float) -> None:
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    acct.spend("d", ApproxDP(first, 3e-7))
    left = acct.remaining("d")
    assert Decimal(left.epsilon) <= Decimal(1) - Decimal(first)
    acct.spend("d", ApproxDP(left.epsilon, left.delta))
    with pytest.raises(BudgetExceededError):
        acct.spend("d", ApproxDP(math.ulp(1.0), 0.0))


def test_gdp_exact_fit_and_refusal(acct: PrivacyAccountant) -> None:
    acct.set_budget("g", GaussianDP(1.25))
    acct.spend("g", GaussianDP(0.75))
    acct.spend("g", GaussianDP(1.0))  # 0.5625 + 1 = 1.5625 = 1.25² exactly
    assert acct.spent("g").mu == 1.25 and acct.remaining("g").mu == 0.0
    with pytest.raises(BudgetExceededError):
        acct.spend("g", GaussianDP(1e-9))


def test_gdp_remaining_is_spendable(acct: PrivacyAccountant) -> None:
    acct.set_budget("g", GaussianDP(1.3))
    acct.spend("g", gaussian(sigma=2.7))
    left = acct.remaining("g").mu
    assert left == pytest.approx(math.sqrt(1.3**2 - (1 / 2.7) ** 2), rel=1e-12)
    acct.spend("g", GaussianDP(left))
    with pytest.raises(BudgetExceededError):
        acct.spend("g", GaussianDP(1e-7))


# ---------------------------------------------------------------------------------------------- refusals


def test_refusals_leave_the_sqlite_ledger_byte_for_byte_unchanged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    acct = PrivacyAccountant(url, create=True)
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    acct.set_budget("g", GaussianDP(1.0))
    acct.spend("d", PureDP(0.9), key="k")
    acct.spend("g", GaussianDP(0.5))
    before = dump_rows(url)
    assert sum(len(rows) for _, rows in before) > 5
    attempts = [
        lambda: acct.spend("d", PureDP(0.2)),  # over budget
        lambda: acct.spend("d", ApproxDP(0.01, 2e-6)),  # over δ
        lambda: acct.spend("g", ApproxDP(0.1, 1e-9)),  # (ε, δ>0) against μ-GDP
        lambda: acct.spend("d", GaussianDP(0.1)),  # μ-GDP against basic composition
        lambda: acct.spend("d", PureDP(0.01), key="k"),  # a key reused for another cost
        lambda: acct.spend("d", "0.1"),
        lambda: acct.spend("d", PureDP(0.01), group_size=0),
        lambda: acct.spend("nope", PureDP(0.01)),
        lambda: acct.set_budget("d", ApproxDP(0.5, 1e-6)),  # below what is spent
        lambda: acct.set_budget("d", GaussianDP(5.0)),  # currency change with spends recorded
        lambda: acct.set_budget("d", 3.0),
        lambda: acct.spend_plan("d", [PureDP(0.05)] * 3),
        lambda: acct.cancel("d", "k", "oops"),  # committed: cannot be cancelled
    ]
    for attempt in attempts:
        with pytest.raises(
            (BudgetExceededError, UnsupportedCompositionError, InvalidParameterError, LedgerError)
        ):
            attempt()
        assert dump_rows(url) == before
    assert acct.spent("d").epsilon == 0.9


def test_unknown_dataset_error_names_the_dataset_and_the_fix(acct: PrivacyAccountant) -> None:
    for call in (
        lambda: acct.spent("ghost"),
        lambda: acct.remaining("ghost"),
        lambda: ledger_entries(acct.store, "ghost"),
        lambda: acct.spend("ghost", PureDP(0.1)),
        lambda: acct.plan_cost("ghost", [PureDP(0.1)]),
    ):
        with pytest.raises(UnknownDatasetError) as info:
            call()
        assert isinstance(info.value, KeyError) and isinstance(info.value, InvalidParameterError)
        assert "'ghost'" in str(info.value) and "set_budget" in str(info.value)
    assert acct.datasets() == []


def test_budget_changes(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    acct.spend("d", PureDP(0.6))
    acct.set_budget("d", ApproxDP(1.0, 1e-6))  # the same budget again writes nothing
    assert len(ledger_entries(acct.store, "d")) == 3
    with pytest.raises(InvalidParameterError, match="below what is already spent"):
        acct.set_budget("d", ApproxDP(0.5, 1e-6))
    acct.set_budget("d", ApproxDP(0.6, 1e-6), reason="tighten", actor="alice")  # exactly what is spent
    acct.set_budget("d", ApproxDP(2.0, 1e-6), reason="new release approved")
    budget_records = [e for e in ledger_entries(acct.store, "d") if e.kind == "budget"]
    assert [e.guarantee for e in budget_records] == [
        ApproxDP(1.0, 1e-6),
        ApproxDP(0.6, 1e-6),
        ApproxDP(2.0, 1e-6),
    ]
    assert budget_records[1].actor == "alice" and budget_records[2].reason == "new release approved"
    assert acct.remaining("d").epsilon == 1.4
    with pytest.raises(InvalidParameterError, match="cannot change"):
        acct.set_budget("d", ApproxDP(2.0, 1e-6), rule="pure_or_gdp")
    acct.set_budget("fresh", ApproxDP(1.0, 1e-6))
    acct.set_budget("fresh", GaussianDP(1.0))  # no spends yet: the currency may still change
    assert acct.budget("fresh").method == "gdp"
    acct.verify()


# ----------------------------------------------------------------------------------------------- groups


def test_group_sizes(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(10.0, 1e-3))
    acct.spend("d", Laplace(epsilon=0.5, sensitivity=1.0), group_size=3)
    assert acct.spent("d").epsilon == 1.5
    acct.spend("d", ApproxDP(0.1, 1e-6), group_size=4)  # (kε, δ·Σᵢ₌₀ᵏ⁻¹ e^{iε})
    spent = acct.spent("d")
    assert spent.epsilon == pytest.approx(1.9, abs=1e-12)
    group_delta = 1e-6 * math.fsum(math.exp(i * 0.1) for i in range(4))
    assert spent.delta >= group_delta * (1 - 1e-15) and spent.delta == pytest.approx(group_delta, rel=1e-9)
    assert ledger_entries(acct.store, "d")[-2].group_size == 4
    acct.set_budget("g", GaussianDP(2.0))
    acct.spend("g", gaussian(sigma=2.0), group_size=3)  # μ = 0.5 per person, 1.5 for the group
    assert acct.spent("g").mu == pytest.approx(1.5, rel=1e-15) and acct.spent("g").mu >= 1.5
    with pytest.raises(BudgetExceededError):
        acct.spend("g", gaussian(sigma=2.0), group_size=3)  # 1.5² + 1.5² > 4
    acct.spend("g", gaussian(sigma=2.0), group_size=2)  # 2.25 + 1.0 ≤ 4


def test_group_size_rejects_bad_values(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(InvalidParameterError):
            acct.spend("d", PureDP(0.1), group_size=bad)
    assert len(ledger_entries(acct.store, "d")) == 1


# ------------------------------------------------------------------------------------------------ rules


def test_gdp_budget_uses_the_mu_filter(acct: PrivacyAccountant) -> None:
    acct.set_budget("g", GaussianDP(1.0))
    sigma = 8.0  # μ = 1/8 each: exactly 64 fit, Σμ² = 64/64 = 1
    for _ in range(64):
        acct.spend("g", gaussian(sigma))
    assert acct.spent("g").mu == pytest.approx(1.0, rel=1e-14) and acct.spent("g").method == "gdp"
    with pytest.raises(BudgetExceededError):
        acct.spend("g", gaussian(sigma))
    acct.set_budget("p", GaussianDP(1.0))
    acct.spend("p", PureDP(0.5))  # pure ε charges μ = 2Φ⁻¹(e^ε/(1+e^ε))
    assert acct.spent("p").mu == pytest.approx(PureDP(0.5).to_gdp().mu, rel=1e-12)
    with pytest.raises(UnsupportedCompositionError, match="no μ-GDP"):
        acct.spend("p", ApproxDP(0.1, 1e-9))
    with pytest.raises(UnsupportedCompositionError):
        acct.spend("p", PrivacyEvent(kind="guarantee", guarantee=ApproxDP(0.1, 1e-9)))


def test_basic_rule_on_approx_budget(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(3.0, 1e-6))
    event = gaussian_approx(0.125, 1e-8)
    for _ in range(24):
        acct.spend("d", event)
    with pytest.raises(BudgetExceededError):  # basic composition: 25 · 0.125 > 3
        acct.spend("d", event)
    with pytest.raises(UnsupportedCompositionError, match="no single"):
        acct.spend("d", GaussianDP(0.01))
    assert acct.spent("d").method == "basic"


def test_gdp_rule_on_approx_budget_is_tighter_for_many_gaussians(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(3.0, 1e-6), rule="pure_or_gdp")
    event = gaussian_approx(0.1, 1e-8)
    for _ in range(100):  # Σμ² ≈ 100 · 0.0173² ≪ μ_B²: the μ-GDP filter accepts where basic would not
        acct.spend("d", event)
    spent = acct.spent("d")
    assert spent.method == "gdp" and spent.delta == 1e-6 and spent.epsilon < 3.0
    mu = GaussianDP(math.sqrt(100) * event_mu(event))
    assert spent.epsilon == pytest.approx(mu.to_approx_dp(1e-6).epsilon, rel=1e-9)
    with pytest.raises(UnsupportedCompositionError, match="rule='basic'"):
        acct.spend("d", ApproxDP(0.1, 1e-9))  # no μ: not allowed under this rule


def event_mu(event: PrivacyEvent) -> float:
    return float(event.sensitivity or 1.0) / float(event.parameters["sigma"])


def test_gdp_rule_on_approx_budget_keeps_pure_basic_route(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(3.0, 1e-6), rule="pure_or_gdp")
    for _ in range(3):
        acct.spend(
            "d", Laplace(epsilon=1.0, sensitivity=1.0)
        )  # pure: Σε = 3 fits exactly; μ-GDP alone would refuse
    spent = acct.spent("d")
    assert (spent.epsilon, spent.delta, spent.method) == (3.0, 0.0, "basic")
    with pytest.raises(BudgetExceededError):
        acct.spend("d", gaussian(sigma=100.0))  # neither route fits any more
    acct.verify()


def test_mu_limit_is_the_largest_fitting_mu(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 1e-5), rule="pure_or_gdp")
    state = acct.store.head("d")
    assert state is not None
    mu_b = float(state.state.budget["mu_limit"])
    assert GaussianDP(mu_b).to_approx_dp(1e-5).epsilon <= 1.0
    assert GaussianDP(mu_b * (1 + 1e-9)).to_approx_dp(1e-5).epsilon > 1.0
    acct.spend("d", GaussianDP(mu_b))  # the whole μ-budget in one Gaussian release
    with pytest.raises(BudgetExceededError):
        acct.spend("d", GaussianDP(1e-6))


def test_invalid_rule_choices(acct: PrivacyAccountant) -> None:
    with pytest.raises(InvalidParameterError, match="δ > 0"):
        acct.set_budget("d", ApproxDP(1.0, 0.0), rule="pure_or_gdp")
    with pytest.raises(InvalidParameterError):
        acct.set_budget("d", GaussianDP(1.0), rule="basic")
    with pytest.raises(InvalidParameterError):
        acct.set_budget("d", ApproxDP(1.0, 1e-6), rule="pld")
    assert acct.datasets() == []


# ------------------------------------------------------------------------------------------------ plans


def _dp_accounting_epsilon(sigmas: list[float], scales: list[float], delta: float) -> float:
    dp_event = pytest.importorskip("dp_accounting.dp_event")
    pld_privacy_accountant = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for sigma in sigmas:
        accountant.compose(dp_event.GaussianDpEvent(sigma))
    for scale in scales:
        accountant.compose(dp_event.LaplaceDpEvent(scale))
    return float(accountant.get_epsilon(delta))


def test_plan_cost_matches_dp_accounting_and_spend_plan_charges_one_record(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(10.0, 1e-5))
    acct.spend("d", ApproxDP(0.5, 4e-6))  # the plan is composed at the remaining δ = 6e-6
    sigmas, scales = [4.0] * 6, [10.0] * 8
    plan = [gaussian(s) for s in sigmas] + [Laplace(epsilon=1 / b, sensitivity=1.0) for b in scales]
    cost = acct.plan_cost("d", plan)
    reference = _dp_accounting_epsilon(sigmas, scales, 6e-6)
    assert cost.method == "pld" and cost.delta == pytest.approx(6e-6, rel=1e-12)
    assert reference * (1 - 1e-6) <= cost.epsilon <= reference * 1.01
    basic_sum = 0.8 + 6 * GaussianDP(0.25).to_approx_dp(1e-6).epsilon  # far looser one by one
    assert cost.epsilon < basic_sum
    records_before = len(ledger_entries(acct.store, "d"))
    done = acct.spend_plan("d", plan, key="dag-run-1", label="nightly")
    assert done.status == "committed" and done.method == "pld" and done.cost == cost.guarantee
    history = ledger_entries(acct.store, "d")
    assert len(history) == records_before + 2  # one reserve, one commit
    assert len(history[-2].events) == 14 and history[-2].label == "nightly"
    spent = acct.spent("d")
    assert spent.epsilon == pytest.approx(0.5 + cost.epsilon, rel=1e-12) and spent.delta == pytest.approx(
        1e-5
    )
    with pytest.raises(KeyAlreadyUsedError, match="committed"):  # a retry charges and releases nothing
        acct.spend_plan("d", plan, key="dag-run-1")
    assert len(ledger_entries(acct.store, "d")) == records_before + 2


def test_plan_of_pure_spends_is_exact_basic_sum(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(5.0, 0.0))
    cost = acct.plan_cost("d", [PureDP(0.125)] * 40)
    assert (cost.epsilon, cost.delta, cost.method) == (5.0, 0.0, "basic")
    acct.spend_plan("d", [PureDP(0.125)] * 40)
    assert acct.remaining("d").epsilon == 0.0
    with pytest.raises(BudgetExceededError):
        acct.spend_plan("d", [PureDP(0.125)])


def test_pure_plan_is_priced_at_zero_delta_by_default(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(3.0, 1e-6))
    m = Laplace(epsilon=0.5, sensitivity=1.0)
    pure_plan = [m, m, PureDP(0.25), ApproxDP(0.25, 0.0)]
    cost = acct.plan_cost("d", pure_plan)
    assert (cost.epsilon, cost.delta, cost.method) == (1.5, 0.0, "basic")
    at_delta = acct.plan_cost("d", pure_plan, delta=1e-6)  # asked for: the PLD reading at δ > 0
    assert at_delta.delta == 1e-6 and at_delta.epsilon < 1.5
    done = acct.spend_plan("d", pure_plan, key="pure-plan")
    assert done.cost == ApproxDP(1.5, 0.0)
    assert acct.remaining("d").delta == 1e-6  # the δ budget is untouched
    # the δ left still serves an (ε, δ) release afterwards
    acct.spend("d", gaussian_approx(1.0, 1e-6))
    assert acct.remaining("d").delta == 0.0


def test_plan_with_an_approximate_or_gaussian_event_uses_the_remaining_delta(
    acct: PrivacyAccountant,
) -> None:
    acct.set_budget("d", ApproxDP(10.0, 1e-5))
    acct.spend("d", ApproxDP(0.1, 4e-6))  # δ left: 6e-6
    m = Laplace(epsilon=0.5, sensitivity=1.0)
    with_gaussian = acct.plan_cost("d", [m, gaussian(4.0)])  # μ-GDP event: needs δ, read at the δ left
    assert with_gaussian.delta == pytest.approx(6e-6, rel=1e-12) and with_gaussian.method == "pld"
    with_approx = acct.plan_cost("d", [m, ApproxDP(0.5, 1e-7)])
    assert with_approx.delta > 0.0
    # a Gaussian event that claims an (ε, δ) guarantee is never treated as pure
    assert acct.plan_cost("d", [m, gaussian_approx(0.5, 1e-7)]).delta > 0.0


@pytest.mark.parametrize(
    ("budget", "rule", "spent", "plan", "expected"),
    [
        (ApproxDP(1.0, 0.0), "auto", [PureDP(0.5)], [PureDP(0.25)] * 2, True),  # exactly fits
        (ApproxDP(1.0, 0.0), "auto", [PureDP(0.5)], [PureDP(0.25)] * 3, False),
        (ApproxDP(3.0, 1e-6), "auto", [], [gaussian_approx(1.0, 1e-7)] * 3, True),  # tight, not 3.0
        (ApproxDP(3.0, 1e-6), "auto", [ApproxDP(0.5, 1e-6)], [gaussian_approx(1.0, 1e-7)], False),  # δ gone
        (ApproxDP(1.0, 1e-6), "pure_or_gdp", [], [gaussian(20.0)] * 4, True),  # the μ-GDP route
        (ApproxDP(1.0, 1e-6), "pure_or_gdp", [gaussian(8.0)], [gaussian(8.0)] * 3, False),
        (ApproxDP(1.0, 1e-6), "pure_or_gdp", [PureDP(0.5)], [PureDP(0.5)], True),  # the pure route
        (GaussianDP(1.0), "auto", [gaussian(2.0)], [gaussian(2.0)] * 3, True),  # √(4·0.25) = 1 exactly
        (GaussianDP(1.0), "auto", [gaussian(2.0)], [gaussian(2.0)] * 4, False),
    ],
)
def test_plan_fits_says_what_spend_plan_does(
    acct: PrivacyAccountant, budget: Any, rule: str, spent: list[Any], plan: list[Any], expected: bool
) -> None:
    acct.set_budget("d", budget, rule=rule)
    for cost in spent:
        acct.spend("d", cost)
    records = len(ledger_entries(acct.store, "d"))
    assert acct.quote("d", Request.plan(plan)).fits is expected
    assert len(ledger_entries(acct.store, "d")) == records  # nothing charged by the check
    if expected:
        acct.spend_plan("d", plan)
    else:
        with pytest.raises(BudgetExceededError):
            acct.spend_plan("d", plan)


def test_plan_checked_against_the_whole_budget_ignores_what_was_spent(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    acct.spend("d", PureDP(0.75))
    plan = [PureDP(0.25), PureDP(0.5)]
    assert (
        not acct.quote("d", Request.plan(plan)).fits
        and acct.quote("d", Request.plan(plan), against="budget").fits
    )
    assert acct.plan_cost("d", plan, against="budget").epsilon == acct.plan_cost("d", plan).epsilon == 0.75
    gaussians = [gaussian_approx(0.1, 4e-7)] * 3  # Σδ > δ_B, but tight at δ_B; no δ left once spent
    acct.spend("d", ApproxDP(0.0, 1e-6))
    assert (
        not acct.quote("d", Request.plan(gaussians)).fits
        and acct.quote("d", Request.plan(gaussians), against="budget").fits
    )
    records = ledger_entries(acct.store, "d")
    with pytest.raises(InvalidParameterError, match="against"):
        acct.quote("d", Request.plan(plan), against="whole")
    assert ledger_entries(acct.store, "d") == records


def test_plan_fits_refuses_what_cannot_be_charged(acct: PrivacyAccountant) -> None:
    acct.set_budget("g", GaussianDP(1.0))
    with pytest.raises(UnsupportedCompositionError):
        acct.quote("g", Request.plan([ApproxDP(0.1, 1e-6)]))
    with pytest.raises(UnknownDatasetError):
        acct.quote("ghost", Request.plan([PureDP(0.1)]))


def test_plan_on_gdp_budget(acct: PrivacyAccountant) -> None:
    acct.set_budget("g", GaussianDP(2.0))
    plan = [gaussian(2.0), gaussian(4.0), PureDP(0.3)]
    cost = acct.plan_cost("g", plan, group_size=2)
    mus = [1.0, 0.5, 2 * PureDP(0.3).to_gdp().mu]  # k = 2: kμ for Gaussians; μ(2ε) for pure ε
    expected = math.sqrt(1.0 + 0.25 + PureDP(0.6).to_gdp().mu ** 2)
    assert cost.method == "gdp" and cost.mu == pytest.approx(expected, rel=1e-12)
    assert cost.mu < math.sqrt(sum(m * m for m in mus))
    acct.spend_plan("g", plan, group_size=2)
    assert acct.spent("g").mu == pytest.approx(expected, rel=1e-12)


def test_plan_input_errors(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    for bad in ([], "abc", PureDP(0.1), [PureDP(0.1), 3.0], None):
        with pytest.raises(InvalidParameterError):
            acct.plan_cost("d", bad)
    with pytest.raises(InvalidParameterError):
        acct.plan_cost("d", [PureDP(0.1)], delta=2.0)
    assert len(ledger_entries(acct.store, "d")) == 1


# ------------------------------------------------------------------------------------- keys and releases


def test_idempotency_keys(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    first = acct.spend("d", PureDP(0.4), key="job-1")
    assert first.status == "committed" and acct.spent("d").epsilon == 0.4
    acct.set_budget("e", ApproxDP(1.0, 0.0))
    acct.spend("e", PureDP(0.4), key="job-1")  # keys are per dataset
    assert acct.spent("e").epsilon == 0.4
    with pytest.raises(InvalidParameterError, match="different cost"):
        acct.spend("d", PureDP(0.2), key="job-1")
    with pytest.raises(InvalidParameterError, match="different cost"):
        acct.spend("d", PureDP(0.4), key="job-1", group_size=2)
    assert acct.spent("d").epsilon == 0.4 and len(ledger_entries(acct.store, "d")) == 3
    acct.verify()


def _caller_releases(acct: PrivacyAccountant, key: str) -> float:
    """What a caller does with a spend: charge, then draw the noise that the charge paid for."""
    acct.spend("d", Laplace(epsilon=0.5, sensitivity=1.0), key=key)
    return float(Laplace(epsilon=0.5, sensitivity=1.0).randomize(408.0))


def test_a_key_pays_for_one_release_only(acct: PrivacyAccountant) -> None:
    """Three calls with one key: one release is made and charged; the retries draw no noise."""
    acct.set_budget("d", ApproxDP(5.0, 0.0))
    releases = []
    for _ in range(3):
        try:
            releases.append(_caller_releases(acct, "job-1"))
        except KeyAlreadyUsedError as error:
            assert (error.dataset, error.key, error.status) == ("d", "job-1", "committed")
            assert "new key" in str(error) and "nothing was charged" in str(error)
    # the privacy loss is the sum over the releases made (basic composition of pure Laplace, Dwork & Roth
    # Thm 3.16), and that is what the ledger records
    assert len(releases) == 1
    assert acct.spent("d").epsilon == pytest.approx(0.5 * len(releases), abs=0)
    assert [e.kind for e in ledger_entries(acct.store, "d")] == ["budget", "reserve", "commit"]


@pytest.mark.parametrize("call", ["spend", "reserve"])
@pytest.mark.parametrize("first", ["open", "committed", "released"])
def test_every_reuse_of_a_key_is_refused_and_writes_nothing(
    acct: PrivacyAccountant, call: str, first: str
) -> None:
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    reservation = acct.reserve("d", PureDP(0.3), key="k")
    if first == "committed":
        reservation.commit()
    elif first == "released":
        reservation.cancel("the attempt read no data")
    before = ledger_entries(acct.store, "d")
    with pytest.raises(KeyAlreadyUsedError) as refused:
        getattr(acct, call)("d", PureDP(0.3), key="k")
    assert (refused.value.dataset, refused.value.key, refused.value.status) == ("d", "k", first)
    assert isinstance(refused.value, LedgerError) and first in str(refused.value)
    copied = pickle.loads(pickle.dumps(refused.value))
    assert (type(copied), str(copied)) == (KeyAlreadyUsedError, str(refused.value))
    assert ledger_entries(acct.store, "d") == before
    acct.verify()


@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["k1", "k2", "k3", None]), st.sampled_from(["spend", "reserve", "plan"])),
        max_size=12,
    )
)
def test_each_key_pays_for_at_most_one_release(calls: list[tuple[str | None, str]]) -> None:
    """Any interleaving of spends, reservations and plans: a call that returns is one release, each key
    returns at most once, and the ledger records exactly the releases that were returned."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(100.0, 0.0))
    first_call: dict[str, bool] = {}  # key -> whether its first call was a plan
    returned = 0
    for key, call in calls:
        try:
            if call == "plan":
                acct.spend_plan("d", [PureDP(0.125)], key=key)
            else:
                getattr(acct, call)("d", PureDP(0.125), key=key)
        except KeyAlreadyUsedError:
            assert key in first_call and first_call[key] == (call == "plan")
            continue
        except InvalidParameterError:  # the key was first used for a plan, or for a single release
            assert key in first_call and first_call[key] != (call == "plan")
            continue
        assert key is None or key not in first_call
        if key is not None:
            first_call[key] = call == "plan"
        returned += 1
    assert acct.spent("d").epsilon == 0.125 * returned  # exact in binary: 1/8 per returned release
    acct.verify()


def test_the_first_reservation_still_ends_after_a_refused_retry(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    r = acct.reserve("d", PureDP(0.3), key="job-2")
    with pytest.raises(KeyAlreadyUsedError, match="open"):
        acct.spend("d", PureDP(0.3), key="job-2")  # would release fresh noise on the open key's charge
    assert acct.spent("d").epsilon == 0.3 and r.commit().status == "committed"
    r2 = acct.reserve("d", PureDP(0.2), key="job-3")
    with pytest.raises(KeyAlreadyUsedError, match="open"):
        acct.reserve("d", PureDP(0.2), key="job-3")
    assert r2.cancel("nothing read").status == "released" and acct.spent("d").epsilon == 0.3
    acct.verify()


def test_reservation_context_manager_and_release(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    with pytest.raises(RuntimeError, match="boom"), acct.reserve("d", PureDP(0.3), key="a") as r:
        raise RuntimeError("boom")  # the block may have read data: still committed
    assert r.status == "committed" and acct.spent("d").epsilon == 0.3
    with acct.reserve("d", PureDP(0.5), key="b") as r2:
        r2.cancel("source table was empty; nothing was read")
    assert r2.status == "released" and acct.spent("d").epsilon == 0.3
    release = ledger_entries(acct.store, "d")[-1]
    assert release.kind == "release" and release.reason.startswith("source table") and release.actor
    with pytest.raises(LedgerError, match="released"):
        acct.reserve("d", PureDP(0.5), key="b")  # a released attempt's key is not reused
    with pytest.raises(LedgerError, match="released"):
        r2.commit()
    with pytest.raises(LedgerError, match="committed"):
        r.cancel("too late")
    assert acct.reserve("d", PureDP(0.2), key="c").status == "open"
    with pytest.raises(InvalidParameterError, match="reason"):
        acct.cancel("d", "c", "   ")
    released = acct.cancel("d", "c", "worker was killed before reading", actor="ops@example")
    assert released.status == "released" and acct.spent("d").epsilon == 0.3
    entry = ledger_entries(acct.store, "d")[-1]
    assert (entry.actor, entry.reason) == ("ops@example", "worker was killed before reading")
    assert acct.cancel("d", "c", "again").status == "released"  # idempotent, nothing written
    assert ledger_entries(acct.store, "d")[-1].seq == entry.seq
    with pytest.raises(LedgerError, match="no reservation"):
        acct.cancel("d", "missing", "why")
    acct.verify()


def test_open_reservations_count_as_spent(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    acct.reserve("d", PureDP(0.7), key="x")
    spent = acct.spent("d")
    assert spent.epsilon == 0.7 and spent.open_reservations == 1 and "open reservation" in str(spent)
    assert [e.key for e in open_reservations(acct.store, "d")] == ["x"]
    with pytest.raises(BudgetExceededError):
        acct.spend("d", PureDP(0.5))


# ------------------------------------------------------------------------------------------- bad input

_not_a_budget = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.floats(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.floats(), max_size=2),
)


@given(budget=_not_a_budget)
def test_set_budget_rejects_non_budgets(budget: object) -> None:
    acct = PrivacyAccountant("memory://")
    with pytest.raises(InvalidParameterError):
        acct.set_budget("d", budget)  # type: ignore[arg-type]
    assert acct.datasets() == []


@given(
    value=st.one_of(
        st.floats(max_value=-1e-300),
        st.just(math.nan),
        st.just(math.inf),
        st.just(-math.inf),
        st.text(max_size=3),
        st.none(),
        st.booleans(),
    )
)
def test_guarantees_reject_negative_nan_and_wrong_types(value: object) -> None:
    for build in (lambda: ApproxDP(value, 1e-6), lambda: ApproxDP(1.0, value), lambda: GaussianDP(value)):  # type: ignore[arg-type]
        with pytest.raises(InvalidParameterError):
            build()


@given(cost=_not_a_budget, label=st.one_of(st.none(), st.integers(), st.text(max_size=3)))
def test_spend_rejects_bad_costs_and_changes_nothing(cost: object, label: object) -> None:
    store = MemoryLedger()
    acct = PrivacyAccountant(store)
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    with pytest.raises(InvalidParameterError):
        acct.spend("d", cost, label=label)  # type: ignore[arg-type]
    assert len(store.records("d")) == 1


@given(dataset=st.one_of(st.none(), st.integers(), st.just(""), st.text(min_size=256, max_size=300)))
def test_bad_dataset_names(dataset: object) -> None:
    acct = PrivacyAccountant("memory://")
    with pytest.raises(InvalidParameterError):
        acct.set_budget(dataset, ApproxDP(1.0))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        acct.spent(dataset)  # type: ignore[arg-type]
    assert acct.datasets() == []


def test_accountant_rejects_bad_ledgers(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError):
        PrivacyAccountant(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PrivacyAccountant()  # type: ignore[call-arg]  # an explicit URL is required
    with pytest.raises(LedgerError):
        PrivacyAccountant("not a url")


# ------------------------------------------------------------------------------------- copies, pickles


def test_copies_share_the_ledger_and_pickles_reopen_it(tmp_path: Path) -> None:
    acct = PrivacyAccountant(f"sqlite:///{tmp_path / 'ledger.db'}", create=True)
    acct.set_budget("d", ApproxDP(1.0, 0.0))
    assert copy.deepcopy(acct) is acct and copy.copy(acct) is acct
    clone = pickle.loads(pickle.dumps(acct))
    assert clone is not acct
    clone.spend("d", PureDP(0.25))
    assert acct.spent("d").epsilon == 0.25
    memory = PrivacyAccountant("memory://")
    assert copy.deepcopy({"a": memory})["a"] is memory
    with pytest.raises(LedgerError, match="cannot be pickled"):
        pickle.dumps(memory)


def test_plan_needing_more_delta_than_is_left_is_refused(acct: PrivacyAccountant) -> None:
    acct.set_budget("d", ApproxDP(5.0, 1e-6))
    acct.spend("d", ApproxDP(0.1, 1e-6))  # all δ spent
    with pytest.raises(BudgetExceededError):
        acct.spend_plan("d", [gaussian_approx(0.5, 1e-7)] * 2)
    with pytest.raises(UnsupportedCompositionError, match="no finite ε"):
        acct.plan_cost("d", [gaussian(3.0)])  # a μ-GDP event needs some δ
    acct.spend_plan("d", [PureDP(0.5)] * 2)  # pure plans still fit
    assert acct.spent("d").epsilon == pytest.approx(1.1)


def test_history_is_one_entry_per_release_and_records_the_raw_chain() -> None:
    import datetime as dt

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(5.0))
    acct.spend("d", Laplace(epsilon=0.5, sensitivity=1.0), label="count", group_size=3, key="a")
    acct.reserve("d", PureDP(0.25), key="b")
    acct.reserve("d", PureDP(0.125), key="c")
    acct.cancel("d", "c", "never read data", actor="ops")
    acct.set_budget("d", PureDP(6.0))
    records = ledger_entries(acct.store, "d")
    assert [e.kind for e in records] == [
        "budget",
        "reserve",
        "commit",
        "reserve",
        "reserve",
        "release",
        "budget",
    ]
    history = acct.history("d")
    assert [(e.key, e.label, e.group_size, e.status) for e in history] == [
        ("a", "count", 3, "committed"),
        ("b", None, 1, "open"),
        ("c", None, 1, "cancelled"),
    ]
    reserves = [e for e in records if e.kind == "reserve"]
    assert [e.seq for e in history] == [e.seq for e in reserves]
    assert [e.cost for e in history] == [e.guarantee for e in reserves]
    assert history[0].cost == PureDP(1.5).to_approx_dp()  # Laplace at k = 3: sensitivity 3, ε = 1.5
    assert history[0].ended == records[2].time and history[1].ended is None
    assert (history[2].reason, history[2].actor) == ("never read data", "ops")
    assert [e.key for e in acct.history("d", limit=2)] == ["b", "c"]
    assert acct.history("d", since=dt.datetime(2999, 1, 1)) == []
    assert len(acct.history("d", since=history[1].time)) == 2
    with pytest.raises(InvalidParameterError):
        acct.history("d", limit=0)
    with pytest.raises(UnknownDatasetError):
        acct.history("ghost")


def test_a_refusal_shows_the_group_size_and_the_cost_for_one_person() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(0.3))
    with pytest.raises(BudgetExceededError) as info:
        acct.spend("d", Laplace(epsilon=0.1, sensitivity=1.0), group_size=4)
    text = str(info.value)
    # Laplace at k = 4: sensitivity 4, so ε = 0.4 for the group; ε = 0.1 for one person
    assert "requested ε = 0.4, δ = 0 (for a group of k = 4; ε = 0.1, δ = 0 for one person)" in text
    assert info.value.group_size == 4
    assert pickle.loads(pickle.dumps(info.value)).group_size == 4


def test_a_gaussian_on_a_pure_budget_is_told_the_budget_has_delta_zero() -> None:
    from dp_pipeline.mechanisms import Gaussian

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(5.0))
    with pytest.raises(BudgetExceededError, match=r"The budget has δ = 0 \(pure DP\)"):
        acct.spend("d", Gaussian(epsilon=0.1, delta=1e-9, sensitivity=1.0))
    acct.set_budget("d", ApproxDP(0.05, 1e-6))
    with pytest.raises(BudgetExceededError) as info:  # a δ > 0 budget: no such note
        acct.spend("d", Gaussian(epsilon=0.1, delta=1e-9, sensitivity=1.0))
    assert "δ = 0" not in str(info.value).split("Rule:")[1]


def test_an_unknown_dataset_names_the_ledger_and_warns_when_it_is_empty(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    acct = PrivacyAccountant(url, create=True)
    with pytest.raises(UnknownDatasetError) as info:
        acct.spend("patients", PureDP(0.1))
    assert f"in the ledger {url}" in str(info.value)
    assert "a new, empty ledger was opened" in str(info.value) and info.value.empty
    acct.set_budget("other", PureDP(1.0))
    with pytest.raises(UnknownDatasetError) as info:
        acct.remaining("patients")
    assert not info.value.empty and "empty ledger" not in str(info.value)
    assert pickle.loads(pickle.dumps(info.value)).ledger == url
    acct.close()
