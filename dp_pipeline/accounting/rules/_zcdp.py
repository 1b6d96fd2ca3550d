"""Pure spends by basic composition, or the zCDP filter, on one (ε, δ > 0) budget: mixed Laplace and Gaussian
releases chosen one after another."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar, Self

from dp_pipeline import _exact as exact
from dp_pipeline.accounting._composition import as_approx_dp, group_event
from dp_pipeline.accounting._concentrated import bounded_range_rho, laplace_rho, zcdp_epsilon, zcdp_rho_limit
from dp_pipeline.accounting.rules._base import BudgetRule, Charge, PlanCharge, Totals, parse_decimal
from dp_pipeline.accounting.rules._sums import gaussian_mu, laplace_loss, pure_epsilon
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError, UnsupportedCompositionError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee

__all__ = ["ZeroConcentratedDP"]

_HALF = Decimal("0.5")
_TWO = Decimal(2)


def _half_square(value: Decimal) -> Decimal:
    """x²/2, exactly."""
    return exact.multiply(exact.square(value), _HALF)


def _gaussian_rho(event: PrivacyEvent, k: int) -> Decimal | None:
    """(kΔ)²/(2σ²), the exact ρ of a Gaussian event's noise for a group of k, rounded up to 40 digits; None
    for other kinds of event."""
    sigma = event.parameters.get("sigma")
    if event.kind != "gaussian" or event.sensitivity is None or not isinstance(sigma, float | int):
        return None
    if not (math.isfinite(sigma) and sigma > 0.0):
        return None
    return exact.decimal_up((k * Fraction(event.sensitivity)) ** 2 / (2 * Fraction(sigma) ** 2))


def _pure_rho(event: PrivacyEvent, epsilon: Decimal, k: int) -> Decimal:
    """ρ of a pure release charged ε for a group of k: the Laplace noise's own ρ at its exact loss kΔ/b,
    (kε)²/8 for an exponential mechanism (kε-bounded range), else ε²/2."""
    loss = laplace_loss(event, k)
    if loss is not None:
        return laplace_rho(loss)
    if event.kind == "exponential":
        return bounded_range_rho(epsilon)
    return _half_square(epsilon)


@dataclass(frozen=True)
class ZeroConcentratedDP(BudgetRule):
    """Pure spends by basic composition, or every spend by the zero-concentrated DP filter, on an
    ``ApproxDP(ε_B, δ_B > 0)`` budget (``rule="zcdp"``).

    Each spend is charged ρᵢ (Bun & Steinke 2016): Laplace noise by its own Rényi curve, ρ = ε + e^{−ε} − 1
    at the exact loss ε = kΔ/b of the noise for a group of k (:func:`~dp_pipeline.accounting._concentrated.
    laplace_rho`, the least ρ with D_α ≤ ρα for every α); an exponential mechanism at ε, which is
    ε-bounded range, as ρ = (kε)²/8 (Cesar & Rogers 2021, :func:`~dp_pipeline.accounting._concentrated.
    bounded_range_rho`); any other pure ε-DP release as ρ = ε²/2 (Prop. 1.4); Gaussian noise exactly as
    ρ = (kΔ)²/(2σ²) whatever calibration chose σ (Prop. 1.6); and a μ-GDP guarantee as ρ = (kμ)²/2 (by
    Blackwell's theorem a μ-GDP pair is a post-processing of N(0, 1) against N(μ, 1), Dong, Roth & Su 2022,
    §2, and Rényi divergences do not grow under post-processing). Each is a zCDP guarantee of the release
    whatever query it answers, so the filter below applies to it. Ledgers written when Laplace and
    exponential releases were charged ε²/2 keep those (larger) charges and still verify.
    A spend with δ > 0 that is not Gaussian has no zCDP guarantee and is refused with
    :class:`~dp_pipeline.exceptions.UnsupportedCompositionError`. Let ρ_B be the largest ρ whose (ε, δ_B)
    reading is within ε_B (:func:`~dp_pipeline.accounting._concentrated.zcdp_rho_limit`: Canonne, Kamath &
    Steinke's conversion, rounded down, computed when the budget is set and stored with it). A spend is
    accepted iff, over all active spends,

    (P) every spend is pure and Σεᵢ ≤ ε_B, or
    (Z) Σρᵢ ≤ ρ_B,

    the sums taken exactly. Reports name the route that gives the smaller ε: ``"basic"`` (Σεᵢ, δ = 0) or
    ``"zcdp"`` (the (ε, δ_B) reading of Σρᵢ). What remains is the largest pure ε one more release can have
    (ε_B − Σεᵢ while every spend is pure, else √(2(ρ_B − Σρᵢ)), which is also the largest μ of one more
    Gaussian release).

    **Validity of the zCDP filter (Z alone).** Fix neighbours D, D' and an order α > 1. Each release i is
    chosen, with its ρᵢ, after the earlier outputs y₁..yᵢ₋₁ are known, and conditionally on them satisfies
    D_α(Mᵢ(D) ‖ Mᵢ(D')) ≤ αρᵢ. The filter refuses a release that would take Σρᵢ above ρ_B, so Σρᵢ ≤ ρ_B on
    every transcript. Feldman & Zrnic's Rényi filter (2021) then bounds the whole transcript: D_α ≤ αρ_B.
    (Sketch: with Lᵢ the privacy loss of step i under D, E_D[e^{(α−1)Lᵢ} | past] ≤ e^{(α−1)αρᵢ} with ρᵢ
    known from the past, so exp((α−1)(Σ_{j≤i} Lⱼ − αΣ_{j≤i} ρⱼ)) is a supermartingale; at the filter's stop
    E_D[e^{(α−1)L}] ≤ e^{(α−1)αρ_B}, which is D_α ≤ αρ_B.)
    This holds for every α at once, so the transcript is ρ_B-zCDP (Whitehouse, Ramdas, Rogers & Wu 2023,
    fully adaptive zCDP filters), and by Canonne, Kamath & Steinke 2020 (§2.3, which uses one order α at a
    time) it is (ε_B, δ_B)-DP.

    **Validity of P-or-Z.** As for :class:`~dp_pipeline.accounting.rules.PureOrGaussianDP`: split the
    transcripts by the final set of accepted spends. Where it satisfies P, every spend was pure and the
    loss is at most Σεᵢ ≤ ε_B pathwise, so those transcripts add nothing to the hockey-stick divergence at
    ε_B. Every other transcript satisfies Z at its end, hence at every step (the sums only grow), so it is
    also a transcript of the Z-only filter with the same probabilities under D and D'; their part of the
    divergence is at most that filter's, which is at most δ_B. Spends with δ > 0 that are not Gaussian are
    never mixed in (see PureOrGaussianDP, "Why not basic or G"): keep ``rule="basic"`` for them.

    **Plans** cost what their releases cost one by one (Σεᵢ if all are pure, else Σρᵢ): a plan's tight PLD
    total is an (ε, δ) amount with no ρ.

    References
    ----------
    Bun & Steinke, "Concentrated differential privacy: simplifications, extensions, and lower bounds",
    TCC 2016.
    Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.
    Cesar & Rogers, "Bounding, concentrating, and truncating: unifying privacy loss composition for data
    analytics", ALT 2021.
    Harrison & Manurangsi, "Exact zCDP characterizations for fundamental differentially private mechanisms",
    FORC 2026.
    Feldman & Zrnic, "Individual privacy accounting via a Rényi filter", NeurIPS 2021.
    Whitehouse, Ramdas, Rogers & Wu, "Fully-adaptive composition in differential privacy", ICML 2023.
    """

    rho_limit: Decimal | None = None

    name: ClassVar[str] = "zcdp"
    names: ClassVar[tuple[str, ...]] = ("zcdp",)
    currency: ClassVar[type[Guarantee]] = ApproxDP
    title: ClassVar[str] = "pure ε or zCDP filter"
    amounts: ClassVar[tuple[str, ...]] = ("epsilon", "rho")
    counters: ClassVar[tuple[str, ...]] = ("impure",)

    # ------------------------------------------------------------------------------ budget and storage

    @classmethod
    def create(cls, budget: Guarantee) -> Self:
        assert isinstance(budget, ApproxDP)
        if budget.delta == 0.0:
            raise InvalidParameterError(
                "rule 'zcdp' needs δ > 0: zero-concentrated DP implies no pure ε-DP guarantee", "rule"
            )
        return cls(budget, zcdp_rho_limit(budget.epsilon, budget.delta))

    @classmethod
    def from_parameters(cls, budget: Guarantee, parameters: Mapping[str, Any], where: str) -> Self:
        raw = parameters.get("rho_limit")
        return cls(budget, None if raw is None else parse_decimal(raw, where))

    def parameters(self) -> dict[str, Any]:
        return {"rho_limit": None if self.rho_limit is None else str(self.rho_limit)}

    def check_parameters(self) -> str | None:
        allowed = zcdp_rho_limit(self._budget.epsilon, self._budget.delta)
        if self.rho_limit is not None and self.rho_limit > allowed:
            return f"the budget's ρ limit {self.rho_limit} is above the one its (ε, δ) allows"
        return None

    @property
    def _budget(self) -> ApproxDP:
        assert isinstance(self.budget, ApproxDP)
        return self.budget

    def counts(self, charge: Charge) -> dict[str, int]:
        return {"impure": 0 if charge["epsilon"] is not None else 1}

    # ------------------------------------------------------------------------------ pricing

    def charge_event(self, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
        grouped = group_event(event, k)
        g = grouped.guarantee
        if event.kind == "gaussian" or isinstance(event.guarantee, GaussianDP) or isinstance(g, GaussianDP):
            mu = gaussian_mu(event, grouped, k, self, "set this (ε, δ) budget with rule='basic'")
            rho = _gaussian_rho(event, k)
            return Charge({"epsilon": None, "rho": _half_square(mu) if rho is None else rho}), g
        approx = as_approx_dp(g)
        if approx.delta > 0.0:
            raise UnsupportedCompositionError(
                f"the spend {g!r} has δ > 0 and is not Gaussian noise, so it has no zCDP guarantee and "
                f"cannot be charged to the budget {self.describe()}. Use a pure or Gaussian mechanism, or "
                "set this (ε, δ) budget with rule='basic'."
            )
        epsilon = pure_epsilon(event, approx, k)
        return Charge({"epsilon": epsilon, "rho": _pure_rho(event, epsilon, k)}), g

    def charge_cost(self, charge: Charge) -> Guarantee:
        return self._cheapest(charge["epsilon"], _rho(charge))[0]

    def method_of(self, charge: Charge) -> str:
        return self._cheapest(charge["epsilon"], _rho(charge))[1]

    def charge_plan(
        self, events: Sequence[PrivacyEvent], k: int, delta: float | None, totals: Totals
    ) -> PlanCharge:
        total = self.charge_each(events, k)
        cost, method = self._cheapest(total["epsilon"], _rho(total))
        return PlanCharge(total, cost, method)

    # ------------------------------------------------------------------------------ the check and reports

    def fits(self, totals: Totals) -> bool:
        pure_route = totals.counts["impure"] == 0 and totals.sums["epsilon"] <= exact.to_decimal(
            self._budget.epsilon
        )
        return pure_route or (self.rho_limit is not None and totals.sums["rho"] <= self.rho_limit)

    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        pure = totals.sums["epsilon"] if totals.counts["impure"] == 0 else None
        return self._cheapest(pure, totals.sums["rho"])

    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        g = self._budget
        candidates: list[tuple[ApproxDP, str]] = []
        if totals.counts["impure"] == 0:
            left = exact.subtract(exact.to_decimal(g.epsilon), totals.sums["epsilon"])
            candidates.append((ApproxDP(exact.float_down(left), g.delta), "basic"))
        if self.rho_limit is not None:
            rho_left = exact.subtract(self.rho_limit, totals.sums["rho"])
            candidates.append((ApproxDP(exact.sqrt_down(exact.multiply(_TWO, rho_left)), 0.0), "zcdp"))
        if not candidates:
            return ApproxDP(0.0, 0.0), "zcdp"
        return max(candidates, key=lambda c: (c[0].epsilon, c[1] == "basic"))

    def left(self, limit: Charge, paid: Charge) -> tuple[Guarantee, str]:
        # a pure reservation takes pure releases only (its ε caps them); any other, releases by their ρ,
        # shown as the pure ε whose ρ = ε²/2 is what is left
        if limit["epsilon"] is not None:
            left = exact.subtract(limit["epsilon"], paid["epsilon"] or Decimal(0))
            return ApproxDP(exact.float_down(max(Decimal(0), left)), 0.0), "basic"
        rho_left = max(Decimal(0), exact.subtract(_rho(limit), _rho(paid)))
        return ApproxDP(exact.sqrt_down(exact.multiply(_TWO, rho_left)), 0.0), "zcdp"

    def describe(self) -> str:
        return (
            f"{self.budget!r} (pure spends by basic composition, or the zCDP filter Σρ ≤ {self._limit:.6g})"
        )

    @property
    def _limit(self) -> float:
        return 0.0 if self.rho_limit is None else float(self.rho_limit)

    def refusal_hint(self, cost: Guarantee) -> str:
        return (
            "Under this rule a release that is not pure ε-DP (Gaussian noise) fits only while Σρ stays "
            f"within ρ_B = {self._limit:.6g} (ρ = μ²/2; Laplace noise counts ε + e^{{−ε}} − 1, an "
            "exponential mechanism ε²/8, other pure ε ε²/2), whatever ε the pure route still shows as "
            "remaining."
        )

    def _cheapest(self, epsilon: Decimal | None, rho: Decimal) -> tuple[Guarantee, str]:
        """The smaller reading of a pure total Σε (None: not pure) and of Σρ, as (ε, δ), rounded up."""
        candidates: list[tuple[ApproxDP, str]] = []
        if epsilon is not None:
            candidates.append((ApproxDP(exact.float_up(epsilon), 0.0), "basic"))
        if rho > 0:
            g = self._budget
            reading = zcdp_epsilon(rho, g.delta)
            if self.rho_limit is not None and rho <= self.rho_limit:
                reading = min(reading, g.epsilon)  # ρ ≤ ρ_B is certified to read within ε_B
            candidates.append((ApproxDP(reading, g.delta), "zcdp"))
        if not candidates:
            return ApproxDP(0.0, 0.0), "zcdp"
        return min(candidates, key=lambda c: (c[0].epsilon, c[1] != "basic"))


def _rho(charge: Charge) -> Decimal:
    rho = charge["rho"]
    assert rho is not None  # every charge of this rule has a ρ
    return rho
