"""The shared release helpers: the ε split, the seeded-noise warning, the per-feature parameters."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dp_pipeline import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline._release import declared_sensitivity, per_feature, plan_noise, release_rng
from dp_pipeline.exact import split_epsilon
from dp_pipeline.frames import dp_count
from dp_pipeline.transformers import LaplaceNoise


@pytest.mark.parametrize("epsilon", [1.0, 0.1, 0.3, 1 / 3, 2.7, 1e-9, 7.0])
@pytest.mark.parametrize("parts", [1, 3, 7, 10, 49])
def test_split_epsilon_never_sums_above_epsilon_and_is_the_largest_such_float(
    epsilon: float, parts: int
) -> None:
    share = split_epsilon(epsilon, parts)
    assert Fraction(share) * parts <= Fraction(epsilon)
    assert Fraction(math.nextafter(share, math.inf)) * parts > Fraction(epsilon)


sensitivity_lists = st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=12)
budgets = st.floats(min_value=1e-6, max_value=20.0)
small_deltas = st.floats(min_value=1e-12, max_value=0.01)


@given(sensitivity_lists, st.floats(min_value=0.01, max_value=5.0), small_deltas)
def test_plan_noise_gaussian_parts_carry_at_least_the_event_noise(
    sensitivities: list[float], epsilon: float, delta: float
) -> None:
    plan = plan_noise("gaussian", sensitivities, epsilon=epsilon, delta=delta, calibration="tail_bound")
    d = len(sensitivities)
    assert Fraction(plan.event.sensitivity) ** 2 >= d  # L2 norm of d unit changes, rounded up
    sigma = Fraction(plan.event.parameters["sigma"])
    for mechanism in plan.mechanisms:
        assert Fraction(mechanism.sigma) >= Fraction(mechanism.sensitivity) * sigma


@given(sensitivity_lists, st.floats(min_value=1e-3, max_value=10.0))
def test_plan_noise_gdp_event_is_within_mu(sensitivities: list[float], mu: float) -> None:
    plan = plan_noise("gaussian", sensitivities, mu=mu, calibration="gdp")
    sigma = Fraction(plan.event.parameters["sigma"])
    assert Fraction(plan.event.sensitivity) ** 2 >= len(sensitivities)
    assert Fraction(plan.event.sensitivity) / sigma <= Fraction(mu)
    for mechanism in plan.mechanisms:
        assert Fraction(mechanism.sigma) >= Fraction(mechanism.sensitivity) * sigma


def test_plan_noise_gaussian_norm_example_that_rounding_to_nearest_gets_wrong() -> None:
    assert Fraction(math.sqrt(3)) ** 2 < 3  # √3 rounds below: the L2 sensitivity would be understated
    plan = plan_noise("gaussian", [1.0, 2.0, 5.0], mu=0.5, calibration="gdp")
    assert Fraction(plan.event.sensitivity) ** 2 >= 3


@given(sensitivity_lists, budgets)
def test_plan_noise_laplace_parts_lose_at_most_epsilon_exactly(
    sensitivities: list[float], epsilon: float
) -> None:
    plan = plan_noise("laplace", sensitivities, epsilon=epsilon)
    # each part's exact loss Δⱼ/bⱼ is within its ε', and the parts' losses sum to at most ε
    losses = [Fraction(m.sensitivity) / Fraction(m.scale) for m in plan.mechanisms]
    assert all(loss <= Fraction(m.epsilon) for loss, m in zip(losses, plan.mechanisms, strict=True))
    assert sum(losses) <= Fraction(epsilon)


def test_plan_noise_laplace_event_covers_the_parts() -> None:
    plan = plan_noise("laplace", [1.0, 2.0, 5.0], epsilon=0.9)
    # the event is the composite of the parts' own events, whose losses Δⱼ/bⱼ sum to at most ε
    assert plan.event.kind == "composite"
    assert list(plan.event.parts) == [m.event.under("replace_one") for m in plan.mechanisms]
    assert sum(Fraction(m.sensitivity) / Fraction(m.scale) for m in plan.mechanisms) <= Fraction(0.9)


def test_release_rng_warns_for_a_seed_and_names_random_state_when_invalid() -> None:
    release_rng(None, "X")  # fresh entropy: no warning (pytest turns PrivacyLeakWarning into an error)
    with pytest.warns(PrivacyLeakWarning, match=r"seeded noise: X\(random_state=3\)"):
        release_rng(3, "X")
    with pytest.warns(PrivacyLeakWarning, match="every copy of the generator repeats"):
        release_rng(np.random.default_rng(), "X")
    with pytest.raises(InvalidParameterError) as info:
        release_rng("seed", "X")
    assert info.value.parameter == "random_state"


def test_seeded_transformers_and_frame_functions_warn() -> None:
    with pytest.warns(PrivacyLeakWarning, match="seeded noise: LaplaceNoise"):
        LaplaceNoise(sensitivity=1.0, accountant="unaccounted", random_state=0).fit(np.zeros((2, 1)))
    with pytest.warns(PrivacyLeakWarning, match="seeded noise: dp_count"):
        dp_count(pd.DataFrame({"a": [1]}), epsilon=1.0, accountant="unaccounted", random_state=0)


def test_per_feature_takes_a_scalar_a_sequence_or_a_mapping() -> None:
    names = ["age", "weight"]
    assert per_feature(2, names, "lower").tolist() == [2.0, 2.0]
    assert per_feature([1, 2], names, "lower").tolist() == [1.0, 2.0]
    assert per_feature({"weight": 3}, names, "lower", default=-np.inf).tolist() == [-np.inf, 3.0]
    for bad in ({"height": 1}, [1, 2, 3], "1", {"age": 1}):
        with pytest.raises(InvalidParameterError) as info:
            per_feature(bad, names, "lower")
        assert info.value.parameter == "lower"


@given(st.floats(-1e6, 1e6), st.floats(1e-9, 1e6))
def test_a_sensitivity_from_the_bounds_is_their_exact_width_rounded_up(low: float, width: float) -> None:
    high = low + width
    if not high > low:
        return
    (got,) = declared_sensitivity(None, np.array([low]), np.array([high]), ["x"])
    exact = Fraction(high) - Fraction(low)  # the least double not below it
    assert Fraction(float(got)) >= exact > Fraction(math.nextafter(float(got), -math.inf))


def test_bounds_whose_float_difference_rounds_down_give_the_width_rounded_up() -> None:
    low, high = np.array([-0.1, -0.7, -2.2]), np.array([0.7, 0.2, 0.3])
    assert any(Fraction(h - lo) < Fraction(h) - Fraction(lo) for lo, h in zip(low, high, strict=True))
    got = declared_sensitivity(None, low, high, ["a", "b", "c"])
    for g, lo, h in zip(got, low, high, strict=True):
        assert Fraction(float(g)) >= Fraction(float(h)) - Fraction(float(lo))
