"""Splitting a release's budget over its parts: the ε split and the noise of each part."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline._splitting import declared_cost, plan_noise

sensitivity_lists = st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=12)
budgets = st.floats(min_value=1e-6, max_value=20.0)
small_deltas = st.floats(min_value=1e-12, max_value=0.01)


@given(sensitivity_lists, st.floats(min_value=0.01, max_value=5.0), small_deltas)
def test_plan_noise_gaussian_parts_carry_at_least_the_event_noise(
    sensitivities: list[float], epsilon: float, delta: float
) -> None:
    plan = plan_noise("gaussian", sensitivities, epsilon=epsilon, delta=delta, calibration="tail_bound")
    _carry_the_event_noise(plan, len(sensitivities))
    # the event is the unit mechanism's, whatever d: what the release is declared to cost before d is known
    assert plan.event == declared_cost("gaussian", epsilon, delta=delta, calibration="tail_bound")


def _carry_the_event_noise(plan: Any, d: int) -> None:
    """Each part's noise is at least √d·Δⱼ times the event's unit noise σ (the L2 norm of d unit changes,
    rounded up), exactly: the release is a post-processing of the event's mechanism."""
    assert plan.event.sensitivity == 1.0
    sigma = Fraction(plan.event.parameters["sigma"])
    for mechanism in plan.parts:
        assert Fraction(mechanism.sigma) ** 2 >= d * (Fraction(mechanism.sensitivity) * sigma) ** 2


@given(sensitivity_lists, st.floats(min_value=1e-3, max_value=10.0))
def test_plan_noise_gdp_event_is_within_mu(sensitivities: list[float], mu: float) -> None:
    plan = plan_noise("gaussian", sensitivities, mu=mu, calibration="gdp")
    _carry_the_event_noise(plan, len(sensitivities))
    assert Fraction(plan.event.sensitivity) / Fraction(plan.event.parameters["sigma"]) <= Fraction(mu)


def test_plan_noise_gaussian_norm_example_that_rounding_to_nearest_gets_wrong() -> None:
    assert Fraction(math.sqrt(3)) ** 2 < 3  # √3 rounds below: the L2 sensitivity would be understated
    plan = plan_noise("gaussian", [1.0, 2.0, 5.0], mu=0.5, calibration="gdp")
    _carry_the_event_noise(plan, 3)


@given(sensitivity_lists, budgets)
def test_plan_noise_laplace_parts_lose_at_most_epsilon_exactly(
    sensitivities: list[float], epsilon: float
) -> None:
    plan = plan_noise("laplace", sensitivities, epsilon=epsilon)
    # each part's exact loss Δⱼ/bⱼ is within its ε', and the parts' losses sum to at most ε
    losses = [Fraction(m.sensitivity) / Fraction(m.scale) for m in plan.parts]
    assert all(loss <= Fraction(m.epsilon) for loss, m in zip(losses, plan.parts, strict=True))
    assert sum(losses) <= Fraction(epsilon)


def test_plan_noise_laplace_event_covers_the_parts() -> None:
    plan = plan_noise("laplace", [1.0, 2.0, 5.0], epsilon=0.9)
    # the event is the composite of the parts' own events, whose losses Δⱼ/bⱼ sum to at most ε
    assert plan.event.kind == "composite"
    assert list(plan.event.parts) == [m.event.under("replace_one") for m in plan.parts]
    assert sum(Fraction(m.sensitivity) / Fraction(m.scale) for m in plan.parts) <= Fraction(0.9)
