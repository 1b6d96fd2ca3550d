"""Budget rules: each built-in rule passes the rule contract; the registry, the names, the deprecated
aliases, and a new rule added as one class and one registry entry, keeping its own running totals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import ClassVar

import pytest
from scipy import special

from dp_pipeline import ApproxDP, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline._exact import add, multiply, sqrt_down, sqrt_up, square, subtract, to_decimal
from dp_pipeline.accounting import ledger_entries, rules
from dp_pipeline.accounting._composition import composite_event, event_gdp, group_event, laplace_mu
from dp_pipeline.accounting.rules import (
    BasicComposition,
    BudgetRule,
    Charge,
    GaussianDPFilter,
    PlanCharge,
    PureOrGaussianDP,
    Totals,
    register_rule,
    stored_rule,
    user_rule,
)
from dp_pipeline.accounting.testing import BudgetRuleContract, gaussian_event, laplace_event
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    LedgerError,
    UnsupportedCompositionError,
)
from dp_pipeline.guarantees import Guarantee

# ------------------------------------------------------------------------------------------------ contracts


class TestBasicComposition(BudgetRuleContract):
    def make_rules(self) -> list[BudgetRule]:
        return [BasicComposition.create(ApproxDP(2.0, 1e-5)), BasicComposition.create(ApproxDP(1.5, 0.0))]


class TestGaussianDPFilter(BudgetRuleContract):
    def make_rules(self) -> list[BudgetRule]:
        return [GaussianDPFilter.create(GaussianDP(1.5))]


class TestPureOrGaussianDP(BudgetRuleContract):
    def make_rules(self) -> list[BudgetRule]:
        return [PureOrGaussianDP.create(ApproxDP(2.0, 1e-5))]

    def remaining_spend(self, rule: BudgetRule, totals: Totals) -> Guarantee | None:
        """While every spend is pure, what remains is pure ε (an (ε, δ > 0) guarantee has no μ, and a pure
        spend after the μ-GDP route is not promised to fit)."""
        left, method = rule.remaining(totals)
        assert isinstance(left, ApproxDP)
        return PureDP(left.epsilon) if method == "basic" else None


# ------------------------------------------------------------------------------------------------ registry


def test_the_stored_names_pick_the_classes_that_earlier_ledgers_mean() -> None:
    # ledgers store the budget's type and a method; these pairs are what every existing ledger holds
    assert stored_rule("basic", ApproxDP(1.0, 1e-6), "x") is BasicComposition
    assert stored_rule("gdp", GaussianDP(1.0), "x") is GaussianDPFilter
    assert stored_rule("gdp", ApproxDP(1.0, 1e-6), "x") is PureOrGaussianDP
    for name, budget in (("basic", GaussianDP(1.0)), ("pld", ApproxDP(1.0, 1e-6))):
        with pytest.raises(LedgerError, match="unknown composition method"):
            stored_rule(name, budget, "x")


@pytest.mark.parametrize(
    ("name", "budget", "expected"),
    [
        ("auto", ApproxDP(1.0, 1e-6), BasicComposition),
        ("auto", GaussianDP(1.0), GaussianDPFilter),
        ("basic", ApproxDP(1.0, 0.0), BasicComposition),
        ("gdp_filter", GaussianDP(1.0), GaussianDPFilter),
        ("pure_or_gdp", ApproxDP(1.0, 1e-6), PureOrGaussianDP),
    ],
)
def test_user_names_pick_a_rule_for_the_budget(name: str, budget: Guarantee, expected: type) -> None:
    assert user_rule(name, budget) is expected


def test_a_name_that_does_not_fit_the_budget_lists_the_ones_that_do() -> None:
    with pytest.raises(InvalidParameterError, match="'gdp_filter' is for GaussianDP budgets") as info:
        user_rule("gdp_filter", ApproxDP(1.0, 1e-6))
    assert "'basic', 'pure_or_gdp'" in str(info.value)
    with pytest.raises(InvalidParameterError, match="must be one of 'auto', 'basic'") as info:
        user_rule("fancy", ApproxDP(1.0, 1e-6))
    assert info.value.parameter == "rule"


def test_a_rule_that_would_make_a_name_ambiguous_is_not_registered() -> None:
    @dataclass(frozen=True)
    class Shadow(BasicComposition):
        names: ClassVar[tuple[str, ...]] = ("other",)

    before = list(rules.RULES)
    with pytest.raises(InvalidParameterError, match="already has"):
        register_rule(Shadow)  # the stored name "basic" on ApproxDP is taken
    assert before == rules.RULES


# ------------------------------------------------------------------------------------------------ aliases


def test_the_removed_aliases_are_gone_and_the_stored_names_still_read() -> None:
    """``set_budget(method=)``, the user rule name ``"gdp"`` and ``PrivacyAccountant.release`` were removed;
    the stored name ``"gdp"`` still picks its rule for ledgers that hold it, and a cancellation is still
    stored as a ``release`` record."""
    acct = PrivacyAccountant("memory://")
    with pytest.raises(TypeError, match="method"):
        acct.set_budget("d", ApproxDP(1.0, 1e-6), method="gdp")  # type: ignore[call-arg]
    with pytest.raises(InvalidParameterError, match="must be one of"):
        acct.set_budget("d", ApproxDP(1.0, 1e-6), rule="gdp")
    assert acct.datasets() == []  # nothing was written
    acct.set_budget("e", ApproxDP(1.0, 1e-6), rule="pure_or_gdp")
    assert acct.budget("e").method == "gdp" and acct.store.head("e").state.method == "gdp"  # type: ignore[union-attr]
    assert not hasattr(acct, "release")
    acct.reserve("e", PureDP(0.25), key="a")
    assert acct.cancel("e", "a", "read nothing").status == "released"
    assert [e.kind for e in ledger_entries(acct.store, "e")][-1] == "release"  # the stored kind is unchanged


# ------------------------------------------------------------------------------------------------ a new rule


_HALF, _TWO = Decimal("0.5"), Decimal(2)


@dataclass(frozen=True)
class _ZeroConcentratedFilter(BudgetRule):
    """A test rule with its own running total: zCDP ρ on a μ-GDP budget, Σρᵢ ≤ ρ_B = μ_B²/2 (Gaussian noise
    of σ is (Δ²/2σ²)-zCDP, and the zCDP filter is valid adaptively; Bun & Steinke 2016, Whitehouse et al.
    2023). It takes μ-GDP releases only, and keeps ρ, never μ², in the ledger's totals."""

    name: ClassVar[str] = "zcdp"
    names: ClassVar[tuple[str, ...]] = ("zcdp",)
    currency: ClassVar[type[Guarantee]] = GaussianDP
    title: ClassVar[str] = "zCDP filter"
    amounts: ClassVar[tuple[str, ...]] = ("rho",)

    @property
    def _rho(self) -> Decimal:
        assert isinstance(self.budget, GaussianDP)
        return multiply(square(to_decimal(self.budget.mu)), _HALF)

    def charge_event(self, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
        mu = event_gdp(group_event(event, k)).mu
        return Charge({"rho": multiply(square(to_decimal(mu)), _HALF)}), GaussianDP(mu)

    def charge_cost(self, charge: Charge) -> Guarantee:
        rho = charge["rho"]
        assert rho is not None
        return GaussianDP(sqrt_up(multiply(_TWO, rho)))

    def method_of(self, charge: Charge) -> str:
        return "zcdp"

    def charge_plan(
        self, events: Sequence[PrivacyEvent], k: int, delta: float | None, totals: Totals
    ) -> PlanCharge:
        total = self.charge_each(events, k)
        return PlanCharge(total, self.charge_cost(total), "zcdp")

    def fits(self, totals: Totals) -> bool:
        return totals.sums["rho"] <= self._rho

    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        return GaussianDP(sqrt_up(multiply(_TWO, totals.sums["rho"]))), "zcdp"

    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        return GaussianDP(sqrt_down(multiply(_TWO, subtract(self._rho, totals.sums["rho"])))), "zcdp"

    def describe(self) -> str:
        return f"{self.budget!r} (zCDP filter)"


def test_a_new_rule_is_one_class_and_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "RULES", list(rules.RULES))
    register_rule(_ZeroConcentratedFilter)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", GaussianDP(1.0), rule="zcdp")
    for _ in range(4):
        acct.spend("d", gaussian_event(0.5))  # ρ = 1/8 each: exactly ρ_B = 1/2
    with pytest.raises(BudgetExceededError):
        acct.spend("d", gaussian_event(0.01))
    with pytest.raises(UnsupportedCompositionError):
        acct.spend("d", ApproxDP(0.1, 1e-9))  # no μ: refused, nothing written
    totals = acct.store.head("d").state.totals  # type: ignore[union-attr]
    assert set(totals) == {"rho", "active", "open"} and Decimal(totals["rho"]) == Decimal("0.5")
    assert acct.spent("d").mu == 1.0 and acct.spent("d").method == "zcdp"
    assert acct.verify().records == 9  # the replay reads and re-prices the rule's own totals
    assert acct.budget("d").method == "zcdp"


def test_a_new_rule_starts_from_its_own_empty_totals_when_nothing_is_active(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rules, "RULES", list(rules.RULES))
    register_rule(_ZeroConcentratedFilter)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", GaussianDP(1.0))
    acct.reserve("d", gaussian_event(0.5), key="k").cancel("read nothing")  # nothing active
    acct.set_budget("d", GaussianDP(1.0), rule="zcdp")
    acct.spend("d", gaussian_event(1.0))  # ρ = 1/2: the whole budget
    assert set(acct.store.head("d").state.totals) == {"rho", "active", "open"}  # type: ignore[union-attr]
    with pytest.raises(InvalidParameterError, match="cannot change"):
        acct.set_budget("d", GaussianDP(2.0), rule="gdp_filter")  # a spend is active: the rule is fixed
    acct.verify()


# ------------------------------------------------------------------------------------------------ arithmetic


def test_pure_or_gdp_mu_limit_matches_an_independent_conversion() -> None:
    rule = PureOrGaussianDP.create(ApproxDP(1.0, 1e-5))
    assert rule.mu_limit is not None
    mu = float(rule.mu_limit)

    def delta(m: float, eps: float) -> float:  # Dong, Roth & Su 2022, Cor. 2.13, by scipy
        return float(special.ndtr(-eps / m + m / 2) - math.exp(eps) * special.ndtr(-eps / m - m / 2))

    assert delta(mu, 1.0) <= 1e-5 * (1 + 1e-9)  # the limit's (1, δ(1)) is within the budget
    assert delta(mu * (1 + 1e-8), 1.0) > 1e-5  # and it is the largest such μ, to 1e-8
    assert rule.parameters() == {"mu_limit": str(rule.mu_limit)}


def test_composite_charges_are_the_sums_of_their_parts() -> None:
    parts = [laplace_event(0.25), laplace_event(0.5)]
    composite = composite_event(parts, "replace_one")
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", GaussianDP(1.0))
    acct.spend("d", composite)
    mus = [laplace_mu(0.25).mu, laplace_mu(0.5).mu]  # each part's Laplace μ (test_pure_curves checks it)
    assert acct.spent("d").mu == sqrt_up(add(square(to_decimal(mus[0])), square(to_decimal(mus[1]))))
    assert acct.spent("d").mu < laplace_mu(0.75).mu  # Σμᵢ² is tighter than the μ of the summed loss
