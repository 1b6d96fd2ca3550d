"""What the built-in rules share: running sums Σε, Σδ, Σμ², the counters beside them, and exact amounts.

The three rules of the first ledgers keep one layout of totals (``epsilon``, ``delta``, ``mu2``, ``impure``,
``no_mu``) and store ``mu_limit`` with every budget (None where unused), so ledgers written before rules were
classes open unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar

from dp_pipeline import _exact as exact
from dp_pipeline.accounting._composition import as_approx_dp, event_gdp
from dp_pipeline.accounting.rules._base import BudgetRule, Charge
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import UnsupportedCompositionError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee

__all__ = [
    "SumsRule",
    "gaussian_mu",
    "gdp_cost",
    "gdp_left",
    "is_pure",
    "laplace_loss",
    "pure_cost",
    "pure_epsilon",
    "pure_left",
    "sums",
]

_ZERO = Decimal(0)


def sums(epsilon: Decimal | None, delta: Decimal | None, mu2: Decimal | None) -> Charge:
    """A charge of ε, δ and μ² (None where the request has none under the rule)."""
    return Charge({"epsilon": epsilon, "delta": delta, "mu2": mu2})


@dataclass(frozen=True)
class SumsRule(BudgetRule):
    """A rule over Σε, Σδ and Σμ², with counters ``impure`` (charges that are not pure ε-DP) and ``no_mu``
    (charges without a μ)."""

    amounts: ClassVar[tuple[str, ...]] = ("epsilon", "delta", "mu2")
    counters: ClassVar[tuple[str, ...]] = ("impure", "no_mu")

    def parameters(self) -> dict[str, Any]:
        return {"mu_limit": None}

    def counts(self, charge: Charge) -> dict[str, int]:
        return {"impure": 0 if is_pure(charge) else 1, "no_mu": 1 if charge["mu2"] is None else 0}


def is_pure(charge: Charge) -> bool:
    """Whether a charge is pure ε-DP: it has an ε and δ = 0."""
    return charge["epsilon"] is not None and charge["delta"] == 0


def laplace_loss(event: PrivacyEvent, k: int) -> Fraction | None:
    """k·Δ/b, the exact ε of a Laplace event's noise for a group of k; None for other kinds of event.

    The scale was rounded up from Δ/ε, so this is at most the float ε and often exactly the decimal the
    user wrote (Laplace(ε = 0.2) has b = 5 and loses exactly 1/5).
    """
    scale = event.parameters.get("scale")
    if event.kind != "laplace" or event.sensitivity is None or not isinstance(scale, float | int):
        return None
    if not (math.isfinite(scale) and scale > 0.0):
        return None
    return k * Fraction(event.sensitivity) / Fraction(scale)


def pure_epsilon(event: PrivacyEvent, grouped: ApproxDP, k: int) -> Decimal:
    """ε of a pure group charge: never less than k times the exact ε of one individual (exactly kε). For
    Laplace noise, never less than the exact loss of the noise itself, k·Δ/b: the smaller of the two when
    the claim covers it (the scale was rounded up), and k·Δ/b rounded up to 40 digits when a hand-built
    event claims a hair less (inside the tolerance of the check that its claim matches its noise)."""
    epsilon = exact.to_decimal(grouped.epsilon)
    if not isinstance(event.guarantee, GaussianDP):
        single = as_approx_dp(event.guarantee)
        if single.delta == 0.0:
            epsilon = max(epsilon, exact.multiply(Decimal(k), exact.to_decimal(single.epsilon)))
    loss = laplace_loss(event, k)
    if loss is None:
        return epsilon
    noise = exact.decimal_up(loss)
    return min(epsilon, noise) if Fraction(epsilon) >= loss else noise


def gaussian_mu(event: PrivacyEvent, grouped: PrivacyEvent, k: int, rule: BudgetRule, hint: str) -> Decimal:
    """μ of a group charge under a μ-GDP rule: the tightest μ of the grouped event, and for Gaussian noise
    or a μ-GDP guarantee at least k times the individual's μ (group privacy of μ-GDP is exactly kμ).

    An event with δ > 0 and no μ (f_ε,δ(0) = 1 − δ < 1 = G_μ(0)) raises UnsupportedCompositionError,
    ending with ``hint`` (what to do instead).
    """
    try:
        mu = exact.to_decimal(event_gdp(grouped).mu)
    except UnsupportedCompositionError:
        raise UnsupportedCompositionError(
            f"the spend {grouped.guarantee!r} has δ > 0 and no μ-GDP guarantee (f_ε,δ(0) = 1 − δ < 1 = "
            f"G_μ(0)), so it cannot be charged to the budget {rule.describe()}. Use a pure or Gaussian "
            f"mechanism, or {hint}."
        ) from None
    if event.kind == "gaussian" or isinstance(event.guarantee, GaussianDP):
        mu = max(mu, exact.multiply(Decimal(k), exact.to_decimal(event_gdp(event).mu)))
    return mu


def pure_cost(charge: Charge) -> Guarantee:
    """A charge with ε and δ as ApproxDP(Σε, Σδ), rounded up."""
    epsilon, delta = charge["epsilon"], charge["delta"]
    assert epsilon is not None and delta is not None
    return ApproxDP(exact.float_up(epsilon), exact.float_up(delta))


def _left(limit: Charge, paid: Charge, name: str) -> Decimal:
    cap, used = limit[name], paid[name]
    assert cap is not None
    return max(_ZERO, exact.subtract(cap, used or _ZERO))


def pure_left(limit: Charge, paid: Charge) -> ApproxDP:
    """ApproxDP of the ε and δ of ``limit`` that ``paid`` leaves, rounded down (never below 0)."""
    return ApproxDP(
        exact.float_down(_left(limit, paid, "epsilon")), exact.float_down(_left(limit, paid, "delta"))
    )


def gdp_left(limit: Charge, paid: Charge) -> GaussianDP:
    """GaussianDP(√(μ²_limit − μ²_paid)), rounded down (never below 0)."""
    return GaussianDP(exact.sqrt_down(_left(limit, paid, "mu2")))


def gdp_cost(charge: Charge) -> GaussianDP:
    """A charge with μ² as GaussianDP(√Σμ²), rounded up."""
    mu2 = charge["mu2"]
    assert mu2 is not None
    return GaussianDP(exact.sqrt_up(mu2))
