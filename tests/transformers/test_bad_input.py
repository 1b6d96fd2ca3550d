"""Bad input gets a clear InvalidParameterError naming the feature or parameter, and is never charged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import InvalidParameterError, PrivacyAccountant
from dp_pipeline.transformers import (
    BoundedLaplaceNoise,
    BoundedStaircaseNoise,
    GaussianNoise,
    LaplaceNoise,
)

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_release.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")


def test_non_numeric_columns_are_named(acct: PrivacyAccountant) -> None:
    df = pd.DataFrame({"age": [30.0, 40.0], "name": ["ann", "bob"]})
    with pytest.raises(InvalidParameterError, match=r"\['name'\] are not numeric") as info:
        LaplaceNoise(sensitivity=1.0, accountant=acct, dataset="d").fit(df)
    assert info.value.parameter == "X"


def test_strings_in_an_array_are_refused(acct: PrivacyAccountant) -> None:
    with pytest.raises(InvalidParameterError, match="X must be numeric"):
        LaplaceNoise(sensitivity=1.0, accountant=acct, dataset="d").fit(
            np.array([["1.0", "x"]], dtype=object)
        )


def test_nan_and_infinity_name_the_feature(acct: PrivacyAccountant) -> None:
    df = pd.DataFrame({"age": [30.0, 40.0], "weight": [70.0, np.nan]})
    with pytest.raises(InvalidParameterError, match="feature 'weight' contains NaN"):
        LaplaceNoise(sensitivity=1.0, accountant=acct, dataset="d").fit(df)
    t = LaplaceNoise(sensitivity=1.0, accountant=acct, dataset="d").fit(np.zeros((2, 2)))
    with pytest.raises(InvalidParameterError, match=r"feature x1 \(column 1\) contains NaN, infinite"):
        t.transform(np.array([[0.0, np.inf], [0.0, 0.0]]))
    assert charges(acct) == []


def test_a_missing_column_at_transform_is_an_error(acct: PrivacyAccountant) -> None:
    df = pd.DataFrame({"age": [30.0, 40.0], "weight": [70.0, 80.0]})
    t = LaplaceNoise(sensitivity=1.0, accountant=acct, dataset="d").fit(df)
    with pytest.raises(ValueError, match="weight"):
        t.transform(df[["age"]])
    assert charges(acct) == []


@pytest.mark.parametrize(
    ("transformer", "parameter"),
    [
        (LaplaceNoise(), "sensitivity"),  # neither sensitivity nor bounds
        (LaplaceNoise(lower=0.0), "sensitivity"),
        (LaplaceNoise(epsilon=0.0, sensitivity=1.0), "epsilon"),
        (LaplaceNoise(epsilon="1", sensitivity=1.0), "epsilon"),
        (LaplaceNoise(sensitivity=-1.0), "sensitivity"),
        (LaplaceNoise(sensitivity=[1.0, 2.0, 3.0]), "sensitivity"),  # X has 2 features
        (LaplaceNoise(lower=5.0, upper=1.0), "upper"),
        (LaplaceNoise(lower=0.0, upper=1.0, bounds="minmax"), "bounds"),
        (LaplaceNoise(sensitivity=1.0, random_state=-1), "random_state"),
        (GaussianNoise(delta=0.0, sensitivity=1.0), "delta"),
        (GaussianNoise(calibration="gdp", sensitivity=1.0), "mu"),
        (BoundedLaplaceNoise(upper=1.0), "lower"),
        (BoundedLaplaceNoise(lower=0.0, upper=1.0, sensitivity=2.0), "sensitivity"),
        (BoundedStaircaseNoise(lower=0.0, upper=1.0, gamma=1.5), "gamma"),
    ],
)
def test_bad_parameters_raise_in_fit_naming_the_parameter(
    acct: PrivacyAccountant, transformer: Any, parameter: str
) -> None:
    transformer.set_params(accountant=acct, dataset="d")
    with pytest.raises(InvalidParameterError) as info:
        transformer.fit(np.zeros((3, 2)))
    assert info.value.parameter == parameter
