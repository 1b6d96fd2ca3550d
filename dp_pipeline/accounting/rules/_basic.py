"""Basic composition on an (ε, δ) budget: Σεᵢ ≤ ε_B and Σδᵢ ≤ δ_B."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import ClassVar

from dp_pipeline import _exact as exact
from dp_pipeline.accounting._composition import as_approx_dp, compose_plan, group_event
from dp_pipeline.accounting.rules._base import Charge, PlanCharge, Totals
from dp_pipeline.accounting.rules._sums import SumsRule, pure_cost, pure_epsilon, pure_left, sums
from dp_pipeline.events import PrivacyEvent, flatten_events
from dp_pipeline.exceptions import UnsupportedCompositionError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee

__all__ = ["BasicComposition"]


@dataclass(frozen=True)
class BasicComposition(SumsRule):
    """Basic composition of every spend against an ``ApproxDP(ε_B, δ_B)`` budget (``rule="basic"``).

    A spend of (εᵢ, δᵢ) for groups of k (its group guarantee, :func:`~dp_pipeline.accounting._composition.
    group_event`) is accepted iff Σεᵢ ≤ ε_B and Σδᵢ ≤ δ_B over all active spends, the sums taken exactly at
    the doubles' binary values. A pure Laplace spend is charged at the exact loss k·Δ/b of its noise when
    that is below its ε. A μ-GDP spend has no single (ε, δ) and is refused with
    :class:`~dp_pipeline.exceptions.UnsupportedCompositionError`. The default rule of (ε, δ) budgets, and
    the only one that takes releases with δ > 0 that are not Gaussian.

    **Validity.** Basic composition holds when each spend is chosen after the earlier results are known,
    i.e. as a privacy filter that stops before the sums would exceed the budget (Dwork & Roth 2014,
    Thm 3.16; Rogers, Roth, Ullman & Vadhan 2016, basic composition as a filter).

    **Plans** (releases declared before any runs) are charged as one record at their tight total from
    :func:`~dp_pipeline.accounting.compose_plan`, read at the δ asked for, or by default at
    δ = 0 when every release is pure ε-DP (so pure plans leave the δ budget alone) and at the budget's
    remaining δ otherwise, unless the exact sums Σεᵢ, Σδᵢ are no larger. The record then counts in the
    sums with that (ε, δ): tight composition is valid for the plan, which was fixed in advance, and the
    plan as a whole is one adaptive step of the filter.

    References
    ----------
    Dwork & Roth, "The algorithmic foundations of differential privacy", 2014.
    Rogers, Roth, Ullman & Vadhan, "Privacy odometers and filters: pay-as-you-go composition", NeurIPS 2016.
    """

    name: ClassVar[str] = "basic"
    names: ClassVar[tuple[str, ...]] = ("basic",)
    currency: ClassVar[type[Guarantee]] = ApproxDP
    title: ClassVar[str] = "basic composition"

    @property
    def _budget(self) -> ApproxDP:
        assert isinstance(self.budget, ApproxDP)
        return self.budget

    def charge_event(self, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
        g = group_event(event, k).guarantee
        if isinstance(g, GaussianDP):
            raise UnsupportedCompositionError(
                f"a μ-GDP spend ({g!r}) has no single (ε, δ), so basic composition cannot charge it to the "
                f"(ε, δ) budget {self.budget!r}. Spend a mechanism calibrated to (ε, δ), give the dataset a "
                "GaussianDP budget, or set this budget with rule='pure_or_gdp'."
            )
        approx = as_approx_dp(g)
        if approx.delta == 0.0:
            return sums(pure_epsilon(event, approx, k), Decimal(0), None), approx
        return sums(exact.to_decimal(approx.epsilon), exact.to_decimal(approx.delta), None), approx

    def charge_cost(self, charge: Charge) -> Guarantee:
        return pure_cost(charge)

    def method_of(self, charge: Charge) -> str:
        return "basic"

    def charge_plan(
        self, events: Sequence[PrivacyEvent], k: int, delta: float | None, totals: Totals
    ) -> PlanCharge:
        grouped = [group_event(e, k) for e in events]  # a composite stays one release of grouped parts
        basis: Decimal | None = None
        if delta is not None:
            target = delta
        elif all(_is_pure_event(e) for e in flatten_events(events)):
            # Composing pure releases at a δ > 0 would buy a slightly smaller ε with δ that later (ε, δ)
            # releases need, and the spend would make the dataset's δ budget unusable: price them at δ = 0.
            target = 0.0
        else:
            basis = self.plan_basis(totals)
            target = exact.float_down(basis)
        total: Charge | None
        try:
            total = self.charge_each(events, k)
        except UnsupportedCompositionError:  # a μ-GDP event has no single (ε, δ); the PLD composes it
            total = None
        try:
            composed = compose_plan(grouped, delta=target)
        except UnsupportedCompositionError as err:
            if total is not None:
                # no finite ε at the δ left: charge the exact sums (the check refuses them if they exceed)
                return PlanCharge(total, pure_cost(total), "basic", basis)
            raise UnsupportedCompositionError(
                f"the plan has no finite ε at δ = {target} (the δ left in budget {self.budget!r}): {err}"
            ) from None
        g = composed.guarantee
        assert isinstance(g, ApproxDP)
        pld = sums(exact.to_decimal(g.epsilon), exact.to_decimal(g.delta), None)
        if total is not None and (composed.method == "basic" or _no_larger(total, pld)):
            # the exact decimal sums: never above what spending the events one by one would charge
            return PlanCharge(total, pure_cost(total), "basic", basis)
        return PlanCharge(pld, g, composed.method, basis)

    def plan_basis(self, totals: Totals) -> Decimal:
        """The δ the budget has left: a plan with releases that are not pure is read at it by default."""
        return max(Decimal(0), exact.subtract(exact.to_decimal(self._budget.delta), totals.sums["delta"]))

    def fits(self, totals: Totals) -> bool:
        epsilon, delta = totals.sums["epsilon"], totals.sums["delta"]
        return epsilon <= exact.to_decimal(self._budget.epsilon) and delta <= exact.to_decimal(
            self._budget.delta
        )

    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        return ApproxDP(exact.float_up(totals.sums["epsilon"]), exact.float_up(totals.sums["delta"])), "basic"

    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        g = self._budget
        left = ApproxDP(
            exact.float_down(exact.subtract(exact.to_decimal(g.epsilon), totals.sums["epsilon"])),
            exact.float_down(exact.subtract(exact.to_decimal(g.delta), totals.sums["delta"])),
        )
        return left, "basic"

    def left(self, limit: Charge, paid: Charge) -> tuple[Guarantee, str]:
        return pure_left(limit, paid), "basic"

    def describe(self) -> str:
        return f"{self.budget!r} (basic composition)"

    def refusal_hint(self, cost: Guarantee) -> str:
        if self._budget.delta == 0 and isinstance(cost, ApproxDP) and cost.delta > 0:
            return (
                "The budget has δ = 0 (pure DP): no release with δ > 0 fits it, however large its noise. Use "
                "pure noise (Laplace, staircase) or set a budget with δ > 0."
            )
        return ""


def _is_pure_event(event: PrivacyEvent) -> bool:
    """Whether an event is pure ε-DP: a guarantee with δ = 0 and noise that is not Gaussian."""
    if event.kind == "gaussian" or isinstance(event.guarantee, GaussianDP):
        return False
    return as_approx_dp(event.guarantee).delta == 0.0


def _no_larger(total: Charge, pld: Charge) -> bool:
    """Whether the exact sums are no larger than the PLD total in both ε and δ."""
    eps, delta, pld_eps, pld_delta = total["epsilon"], total["delta"], pld["epsilon"], pld["delta"]
    assert eps is not None and delta is not None and pld_eps is not None and pld_delta is not None
    return delta <= pld_delta and eps <= pld_eps
