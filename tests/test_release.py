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
from dp_pipeline._release import per_feature, plan_noise, release_rng, split_epsilon
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


@given(sensitivity_lists, budgets)
def test_plan_noise_laplace_event_covers_the_parts_exactly(
    sensitivities: list[float], epsilon: float
) -> None:
    plan = plan_noise("laplace", sensitivities, epsilon=epsilon)
    scale = Fraction(plan.event.parameters["scale"])
    for mechanism in plan.mechanisms:
        assert Fraction(mechanism.sensitivity) / Fraction(mechanism.scale) <= Fraction(mechanism.epsilon)
        if len(sensitivities) > 1:  # the noise of every part, in units of its sensitivity, covers the event's
            assert Fraction(mechanism.scale) >= Fraction(mechanism.sensitivity) * scale
    # and the event's noise is ε-DP: exact L1 sensitivity over exact scale
    assert Fraction(plan.event.sensitivity) / scale <= Fraction(epsilon)
    assert plan.event.guarantee.epsilon == epsilon
    assert len(plan.mechanisms) * Fraction(plan.mechanisms[0].epsilon) <= Fraction(epsilon)


def test_plan_noise_laplace_example_that_rounding_to_nearest_gets_wrong() -> None:
    # 1/ε' (the unit scale of three parts at ε = 1) rounds to nearest below the exact quotient
    share = split_epsilon(1.0, 3)
    assert Fraction(1.0 / share) < 1 / Fraction(share)
    plan = plan_noise("laplace", [1.0, 2.0, 5.0], epsilon=1.0)
    assert 3 / Fraction(plan.event.parameters["scale"]) <= 1


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
