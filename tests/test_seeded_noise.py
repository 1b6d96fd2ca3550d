"""Seeded noise: the warning a seed or an unlabelled generator raises in a release."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline.frames import dp_count
from dp_pipeline.mechanisms.sampling import release_rng
from dp_pipeline.transformers import LaplaceNoise


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
