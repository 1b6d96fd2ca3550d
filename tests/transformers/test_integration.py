"""The transformers inside Pipeline and ColumnTransformer, with pandas output and feature names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

from dp_pipeline import PrivacyAccountant
from dp_pipeline.transformers import (
    AllOrNothing,
    KRandomizedResponseEncoder,
    LaplaceNoise,
    RandomizedResponseEncoder,
)

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

RNG = np.random.default_rng(1000)
DF = pd.DataFrame(
    {
        "age": RNG.uniform(20, 90, 200),
        "weight": RNG.uniform(40, 120, 200),
        "smoker": RNG.random(200) < 0.3,
        "blood": RNG.choice(["A", "B", "AB", "O"], 200),
    },
    index=pd.RangeIndex(100, 300),
)


def test_column_transformer_with_pandas_output_is_charged_once_and_each_step_pays(
    acct: PrivacyAccountant,
) -> None:
    ct = AllOrNothing(
        ColumnTransformer(
            [
                (
                    "noise",
                    LaplaceNoise(lower=[0, 30], upper=[110, 250], accountant=acct, dataset="d"),
                    ["age", "weight"],
                ),
                ("rr", RandomizedResponseEncoder(accountant=acct, dataset="d"), ["smoker"]),
                (
                    "krr",
                    KRandomizedResponseEncoder(
                        categories=["A", "B", "AB", "O"], accountant=acct, dataset="d"
                    ),
                    ["blood"],
                ),
            ],
            verbose_feature_names_out=False,
        ).set_output(transform="pandas")
    )
    out = ct.fit_transform(DF)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["age", "weight", "smoker", "blood"]
    assert out.index.equals(DF.index)
    assert out["smoker"].dtype == bool and set(out["blood"]) <= {"A", "B", "AB", "O"}
    assert list(ct.get_feature_names_out()) == ["age", "weight", "smoker", "blood"]
    assert len(charges(acct)) == 1  # the call's three releases, reserved together
    assert [e.status for e in acct.history("d")] == ["committed", "paid", "paid", "paid"]
    assert acct.spent("d").epsilon == pytest.approx(3.0)


def test_feature_names_are_kept_and_checked(acct: PrivacyAccountant) -> None:
    t = LaplaceNoise(sensitivity=1.0, accountant=acct, dataset="d").fit(DF[["age", "weight"]])
    assert list(t.feature_names_in_) == ["age", "weight"]
    assert list(t.get_feature_names_out()) == ["age", "weight"]
    with pytest.raises(ValueError, match="feature names"):
        t.transform(DF[["weight", "age"]])
    assert charges(acct) == []


def test_pipeline_noise_then_model(acct: PrivacyAccountant) -> None:
    X = DF[["age", "weight"]]
    y = 2 * DF["age"] + DF["weight"]
    model = make_pipeline(
        LaplaceNoise(
            epsilon=50.0, lower=[0, 30], upper=[110, 250], accountant=acct, dataset="d", random_state=0
        ),
        LinearRegression(),
    ).fit(X, y)
    assert len(charges(acct)) == 1
    model.predict(X)
    assert len(charges(acct)) == 2
    assert model.named_steps["linearregression"].coef_[0] > 0
