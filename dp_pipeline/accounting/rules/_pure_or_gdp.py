"""Pure spends by basic composition, or the μ-GDP filter, on one (ε, δ > 0) budget."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar, Self

from dp_pipeline import _exact as exact
from dp_pipeline.accounting._composition import as_approx_dp, group_event
from dp_pipeline.accounting.rules._base import Charge, PlanCharge, Totals, parse_decimal
from dp_pipeline.accounting.rules._sums import (
    SumsRule,
    gaussian_mu,
    gdp_cost,
    gdp_left,
    is_pure,
    pure_cost,
    pure_epsilon,
    pure_left,
    sums,
)
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, least_double_where

__all__ = ["PureOrGaussianDP", "mu_limit"]


def mu_limit(budget: ApproxDP) -> Decimal:
    """μ_B: the largest μ (a double, rounded down) with GaussianDP(μ).to_approx_dp(δ_B).ε ≤ ε_B.

    ε(μ) grows with μ, so the first μ beyond the limit is found by bisecting the doubles (at most 64
    conversions); a μ with no finite ε at δ_B is beyond it.
    """

    def beyond(mu: float) -> bool:
        try:
            return GaussianDP(mu).to_approx_dp(budget.delta).epsilon > budget.epsilon
        except InvalidParameterError:
            return True

    return exact.to_decimal(math.nextafter(least_double_where(beyond, 0.0, sys.float_info.max), 0.0))


@dataclass(frozen=True)
class PureOrGaussianDP(SumsRule):
    """Pure spends by basic composition or every spend by the μ-GDP filter, on an ``ApproxDP(ε_B, δ_B > 0)``
    budget (``rule="pure_or_gdp"``).

    Let μ_B be the largest μ whose (ε, δ_B) reading, ``GaussianDP(μ).to_approx_dp(δ_B)``, is within ε_B
    (:func:`mu_limit`, computed once when the budget is set and stored with it). Every spend must have a μ
    (pure ε or Gaussian noise); one with δ > 0 and no μ is refused with
    :class:`~dp_pipeline.exceptions.UnsupportedCompositionError`. A spend is accepted iff

    (P) every active spend is pure and Σεᵢ ≤ ε_B, or
    (G) Σμᵢ² ≤ μ_B².

    The report names the route that gives the smaller ε. Much tighter than basic composition for many
    Gaussian releases.

    **Validity of P-or-G.** Let L be the privacy loss of the whole transcript. Split the transcripts by the
    final set of accepted spends. Where it satisfies P, every spend was pure and L ≤ Σεᵢ ≤ ε_B on that
    transcript (pure losses bound the loss pathwise), so it adds nothing to the hockey-stick divergence
    E[(1 − e^{ε_B − L})₊]. Every other transcript satisfies G at its end, hence at every step (the sums only
    grow), so it is also a transcript of the G-only filter, with the same probabilities under both
    neighbouring datasets; its part of the divergence is at most that of the G-only filter, which is
    μ_B-GDP (Smith & Thakurta 2022) and so (ε_B, δ_B)-DP (Dong, Roth & Su 2022, Cor. 2.13). Hence the whole
    is (ε_B, δ_B)-DP.

    **Why not "basic or G" with δ.** If the route that may fail is basic composition with δᵢ > 0, neither
    part contributes zero: an analyst can branch on an earlier output, spend non-Gaussian (ε, δ) releases
    on one branch and Gaussian releases up to μ_B on the other, and the two parts may each approach δ_B.
    So a δ-carrying basic rule is never mixed with the μ-GDP filter on one budget; which rule a budget
    uses is fixed when the budget is set, before any spend, and cannot change while spends are recorded.

    **Plans** cost Σεᵢ when every release is pure, √Σμᵢ² otherwise: the same as their releases one by one.

    References
    ----------
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
    Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy", arXiv:2210.17520, 2022.
    """

    mu_limit: Decimal | None = None

    name: ClassVar[str] = "gdp"
    names: ClassVar[tuple[str, ...]] = ("pure_or_gdp",)
    currency: ClassVar[type[Guarantee]] = ApproxDP
    title: ClassVar[str] = "pure ε or μ-GDP filter"

    @classmethod
    def create(cls, budget: Guarantee) -> Self:
        assert isinstance(budget, ApproxDP)
        if budget.delta == 0.0:
            raise InvalidParameterError(
                "rule 'pure_or_gdp' needs δ > 0: μ-GDP implies no pure ε-DP guarantee", "rule"
            )
        return cls(budget, mu_limit(budget))

    @classmethod
    def from_parameters(cls, budget: Guarantee, parameters: Mapping[str, Any], where: str) -> Self:
        raw = parameters.get("mu_limit")
        return cls(budget, None if raw is None else parse_decimal(raw, where))

    def parameters(self) -> dict[str, Any]:
        return {"mu_limit": None if self.mu_limit is None else str(self.mu_limit)}

    def check_parameters(self) -> str | None:
        # as a double: older ledgers stored the limit's shortest decimal (see Charge.covers)
        if self.mu_limit is not None and float(self.mu_limit) > float(mu_limit(self._budget)):
            return f"the budget's μ limit {self.mu_limit} is above the one its (ε, δ) allows"
        return None

    @property
    def _budget(self) -> ApproxDP:
        assert isinstance(self.budget, ApproxDP)
        return self.budget

    def charge_event(self, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
        grouped = group_event(event, k)
        mu2 = exact.square(gaussian_mu(event, grouped, k, self, "set this (ε, δ) budget with rule='basic'"))
        g = grouped.guarantee
        if not isinstance(g, GaussianDP):
            approx = as_approx_dp(g)
            if approx.delta == 0.0:
                return sums(pure_epsilon(event, approx, k), Decimal(0), mu2), g
        return sums(None, None, mu2), g

    def charge_cost(self, charge: Charge) -> Guarantee:
        return pure_cost(charge) if is_pure(charge) else gdp_cost(charge)

    def method_of(self, charge: Charge) -> str:
        return "basic" if is_pure(charge) else "gdp"

    def charge_plan(
        self, events: Sequence[PrivacyEvent], k: int, delta: float | None, totals: Totals
    ) -> PlanCharge:
        total = self.charge_each(events, k)
        return PlanCharge(total, self.charge_cost(total), self.method_of(total))

    def fits(self, totals: Totals) -> bool:
        pure_route = totals.counts["impure"] == 0 and totals.sums["epsilon"] <= exact.to_decimal(
            self._budget.epsilon
        )
        gdp_route = (
            totals.counts["no_mu"] == 0
            and self.mu_limit is not None
            and totals.sums["mu2"] <= exact.square(self.mu_limit)
        )
        return pure_route or gdp_route

    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        candidates: list[tuple[ApproxDP, str]] = []
        if totals.counts["impure"] == 0:
            candidates.append((ApproxDP(exact.float_up(totals.sums["epsilon"]), 0.0), "basic"))
        if totals.counts["no_mu"] == 0:
            gdp = GaussianDP(exact.sqrt_up(totals.sums["mu2"]))
            candidates.append(
                (gdp.to_approx_dp(self._budget.delta) if gdp.mu > 0 else ApproxDP(0.0, 0.0), "gdp")
            )
        return min(candidates, key=lambda c: (c[0].epsilon, c[1] != "basic"))

    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        spent, method = self.spent(totals)
        assert isinstance(spent, ApproxDP)
        g = self._budget
        left = ApproxDP(
            exact.float_down(exact.subtract(exact.to_decimal(g.epsilon), exact.to_decimal(spent.epsilon))),
            exact.float_down(exact.subtract(exact.to_decimal(g.delta), exact.to_decimal(spent.delta))),
        )
        return left, method

    def left(self, limit: Charge, paid: Charge) -> tuple[Guarantee, str]:
        # a pure reservation takes pure releases only (its ε caps them); any other, releases with a μ
        if is_pure(limit):
            return pure_left(limit, paid), "basic"
        return gdp_left(limit, paid), "gdp"

    def describe(self) -> str:
        return f"{self.budget!r} (basic composition of pure spends, or the μ-GDP filter)"
