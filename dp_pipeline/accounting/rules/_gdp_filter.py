"""The μ-GDP filter on a μ-GDP budget: Σμᵢ² ≤ μ_B²."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import ClassVar

from dp_pipeline import _exact as exact
from dp_pipeline.accounting._composition import compose_plan_gdp, group_event
from dp_pipeline.accounting.rules._base import Charge, PlanCharge, Totals
from dp_pipeline.accounting.rules._sums import SumsRule, gaussian_mu, gdp_cost, gdp_left, sums
from dp_pipeline.events import PrivacyEvent, flatten_events
from dp_pipeline.guarantees import GaussianDP, Guarantee

__all__ = ["GaussianDPFilter"]


@dataclass(frozen=True)
class GaussianDPFilter(SumsRule):
    """The μ-GDP privacy filter on a ``GaussianDP(μ_B)`` budget (``rule="gdp_filter"``).

    Each spend's μᵢ is the tightest μ of the event for its group: kS/σ for Gaussian noise (exact, whatever
    calibration chose σ), kμ for a μ-GDP guarantee, μ = −2Φ⁻¹(e^{−x/2}/2) for Laplace noise of exact loss
    x = kΔ/b (its own trade-off, :func:`~dp_pipeline.accounting._composition.laplace_mu`), and
    μ = 2Φ⁻¹(e^{kε}/(1 + e^{kε})) for any other pure kε-DP release. A spend is
    accepted iff Σμᵢ² ≤ μ_B² over all active spends, the squares summed exactly. An (ε, δ > 0) spend has no
    μ-GDP guarantee (f_ε,δ(0) = 1 − δ < 1 = G_μ(0)) and is refused with
    :class:`~dp_pipeline.exceptions.UnsupportedCompositionError`. The default rule of μ-GDP budgets.

    **Validity.** μᵢ-GDP releases compose to √(Σμᵢ²)-GDP (Dong, Roth & Su 2022, Cor. 3.3), and the filter
    that stops before Σμᵢ² would exceed μ_B² is μ_B-GDP even when each μᵢ is chosen after the earlier results
    are known (Smith & Thakurta 2022, fully adaptive composition).

    **Plans** cost √Σμᵢ², the same as their releases spent one by one (μ-GDP composition is exact for
    Gaussian noise, so a plan gains nothing).

    References
    ----------
    Dong, Roth & Su, "Gaussian differential privacy", JRSS-B 84(1), 2022.
    Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy", arXiv:2210.17520, 2022.
    """

    name: ClassVar[str] = "gdp"
    names: ClassVar[tuple[str, ...]] = ("gdp_filter",)
    currency: ClassVar[type[Guarantee]] = GaussianDP
    title: ClassVar[str] = "μ-GDP filter"

    @property
    def _mu2(self) -> Decimal:
        assert isinstance(self.budget, GaussianDP)
        return exact.square(exact.to_decimal(self.budget.mu))

    def charge_event(self, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
        hint = "give the dataset an (ε, δ) budget with basic composition"
        mu = gaussian_mu(event, group_event(event, k), k, self, hint)
        return sums(None, None, exact.square(mu)), GaussianDP(exact.float_up(mu))

    def charge_cost(self, charge: Charge) -> Guarantee:
        return gdp_cost(charge)

    def method_of(self, charge: Charge) -> str:
        return "gdp"

    def charge_plan(
        self, events: Sequence[PrivacyEvent], k: int, delta: float | None, totals: Totals
    ) -> PlanCharge:
        total = self.charge_each(events, k)
        composed = compose_plan_gdp([group_event(e, k) for e in flatten_events(events)]).guarantee
        assert isinstance(composed, GaussianDP)
        return PlanCharge(total, GaussianDP(max(gdp_cost(total).mu, composed.mu)), "gdp")

    def fits(self, totals: Totals) -> bool:
        return totals.counts["no_mu"] == 0 and totals.sums["mu2"] <= self._mu2

    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        return GaussianDP(exact.sqrt_up(totals.sums["mu2"])), "gdp"

    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        return GaussianDP(exact.sqrt_down(exact.subtract(self._mu2, totals.sums["mu2"]))), "gdp"

    def left(self, limit: Charge, paid: Charge) -> tuple[Guarantee, str]:
        return gdp_left(limit, paid), "gdp"

    def describe(self) -> str:
        return f"{self.budget!r} (μ-GDP filter)"
