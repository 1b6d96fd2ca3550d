"""add_noise and randomized_response: one release per call, noise as documented, bad answers refused."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import InvalidParameterError, PrivacyAccountant, PrivacyLeakWarning
from dp_pipeline.frames import add_noise, randomized_response

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
N = 20_000


def test_add_noise_scales_each_column_and_charges_once(acct: PrivacyAccountant) -> None:
    df = pd.DataFrame({"age": np.full(N, 50.0), "weight": np.full(N, 300.0), "id": np.arange(N)})
    out = df.pipe(
        add_noise,
        ["age", "weight"],
        epsilon=2.0,
        lower={"age": 0, "weight": 30},
        upper={"age": 110, "weight": 250},
        accountant=acct,
        dataset="d",
        random_state=0,
    )
    assert (
        out["id"].equals(df["id"]) and df["weight"].eq(300.0).all()
    )  # other columns and the input untouched
    # Laplace of scale d·Δⱼ/ε = 2·110/2 and 2·220/2; weight was clipped to 250 first
    assert stats.kstest(out["age"] - 50.0, stats.laplace(scale=110.0).cdf).pvalue > 1e-3
    assert stats.kstest(out["weight"] - 250.0, stats.laplace(scale=220.0).cdf).pvalue > 1e-3
    (entry,) = charges(acct)
    assert entry.guarantee.epsilon == 2.0 and entry.label == "add_noise to ['age', 'weight']"


def test_add_noise_gaussian_needs_delta_and_uses_sensitivity() -> None:
    df = pd.DataFrame({"x": np.zeros(N)})
    with pytest.raises(InvalidParameterError) as info:
        df.pipe(add_noise, "x", epsilon=1.0, mechanism="gaussian", sensitivity=1.0, **OPT_OUT)
    assert info.value.parameter == "delta"
    out = df.pipe(
        add_noise,
        "x",
        epsilon=1.0,
        mechanism="gaussian",
        delta=1e-5,
        sensitivity=2.0,
        random_state=1,
        **OPT_OUT,
    )
    assert stats.kstest(out["x"], stats.norm(scale=2 * 3.7307).cdf).pvalue > 1e-3  # σ(1, 1e-5) ≈ 3.7307


def test_binary_randomized_response_keeps_the_dtype_and_flip_rate(acct: PrivacyAccountant) -> None:
    truth = pd.DataFrame({"smoker": np.random.default_rng(1002).random(N) < 0.2})
    out = truth.pipe(randomized_response, "smoker", epsilon=1.0, accountant=acct, dataset="d", random_state=2)
    assert out["smoker"].dtype == bool
    kept = int((out["smoker"] == truth["smoker"]).sum())
    assert stats.binomtest(kept, N, math.exp(1) / (1 + math.exp(1))).pvalue > 1e-3
    assert len(charges(acct)) == 1


def test_krr_randomized_response_over_declared_categories(acct: PrivacyAccountant) -> None:
    truth = pd.DataFrame({"blood": np.random.default_rng(1003).choice(["A", "B", "O"], N)})
    out = truth.pipe(
        randomized_response,
        "blood",
        categories=["A", "B", "AB", "O"],
        epsilon=1.0,
        accountant=acct,
        dataset="d",
        random_state=3,
    )
    p = math.exp(1) / (math.exp(1) + 3)
    assert stats.binomtest(int((out["blood"] == truth["blood"]).sum()), N, p).pvalue > 1e-3
    assert set(out["blood"]) == {"A", "B", "AB", "O"}


def test_unseen_answers_and_missing_values_are_refused_before_any_charge(acct: PrivacyAccountant) -> None:
    df = pd.DataFrame({"blood": ["A", "AB", "B"], "smoker": [1, 2, 0], "gap": [True, None, False]})
    with pytest.raises(InvalidParameterError, match=r"column 'blood'.*not among the 2 categories") as info:
        df.pipe(
            randomized_response, "blood", categories=["A", "B"], epsilon=1.0, accountant=acct, dataset="d"
        )
    assert info.value.parameter == "column"
    with pytest.raises(InvalidParameterError, match="column 'smoker': 1 value is not True/False or 0/1"):
        df.pipe(randomized_response, "smoker", epsilon=1.0, accountant=acct, dataset="d")
    with pytest.raises(InvalidParameterError, match="column 'gap' contains missing values"):
        df.pipe(randomized_response, "gap", epsilon=1.0, accountant=acct, dataset="d")
    with pytest.raises(InvalidParameterError, match=f"has dtype {df['blood'].dtype}"):
        df.pipe(randomized_response, "blood", epsilon=1.0, accountant=acct, dataset="d")
    assert charges(acct) == []


def test_categories_from_the_data_warn() -> None:
    df = pd.DataFrame({"blood": ["A", "O", "A"]})
    with pytest.warns(PrivacyLeakWarning):
        out = df.pipe(randomized_response, "blood", categories="data", epsilon=1.0, **OPT_OUT)
    assert set(out["blood"]) <= {"A", "O"}
