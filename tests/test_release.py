"""The shared release helpers: the ε split, the seeded-noise warning, the per-feature parameters."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

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


def test_plan_noise_laplace_event_covers_the_parts() -> None:
    plan = plan_noise("laplace", [1.0, 2.0, 5.0], epsilon=0.9)
    # every part's noise, in units of its sensitivity, is at least the event's scale
    for mechanism in plan.mechanisms:
        assert mechanism.scale / mechanism.sensitivity >= plan.event.parameters["scale"] * (1 - 1e-15)
    assert plan.event.sensitivity / plan.event.parameters["scale"] <= 0.9


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
