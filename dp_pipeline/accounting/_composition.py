"""Composition of privacy guarantees and events, one import for every rule.

Re-exports :mod:`dp_pipeline.accounting._analysis.composition` (basic composition, μ-GDP composition, group
privacy, conversions between guarantees) and :mod:`dp_pipeline.accounting._analysis.pld` (tight composition
of a plan fixed in advance, :func:`compose_plan`, and its proven lower bound :func:`plan_epsilon_floor`),
which hold the formulas, guarantees and references. Which rule is valid depends on how the spends arrive:
basic composition always (adaptively); μ-GDP composition adaptively as a privacy filter (exact for Gaussian
noise); PLD and bounded-range composition for a plan whose releases are all fixed before any of them runs.
All results round toward more privacy loss.
"""

from dp_pipeline.accounting._analysis.composition import (
    PRICING,
    Composition,
    as_approx_dp,
    as_gdp,
    compose_basic,
    compose_gdp,
    compose_plan_gdp,
    composite_event,
    event_gdp,
    flatten_events,
    group_event,
    group_plan,
    laplace_mu,
)
from dp_pipeline.accounting._analysis.pld import compose_plan, plan_epsilon_floor

__all__ = [
    "PRICING",
    "Composition",
    "as_approx_dp",
    "as_gdp",
    "compose_basic",
    "compose_gdp",
    "compose_plan",
    "compose_plan_gdp",
    "composite_event",
    "event_gdp",
    "flatten_events",
    "group_event",
    "group_plan",
    "laplace_mu",
    "plan_epsilon_floor",
]
