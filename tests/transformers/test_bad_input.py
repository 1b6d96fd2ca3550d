"""Bad input gets a clear InvalidParameterError naming the feature or parameter, and is never charged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dp_pipeline import GaussianDP, InvalidParameterError, PrivacyAccountant
from dp_pipeline.transformers import (
    BoundedLaplaceNoise,
    BoundedStaircaseNoise,
    GaussianNoise,
    LaplaceNoise,
    RandomizedResponseEncoder,
)

from .conftest import charges

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
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
        (GaussianNoise(mu=0.5, calibration="analytic", sensitivity=1.0), "mu"),
        (GaussianNoise(mu=0.5, epsilon=2.0, sensitivity=1.0), "epsilon"),
        (GaussianNoise(mu=0.5, delta=1e-6, calibration="gdp", sensitivity=1.0), "delta"),
        (LaplaceNoise(sensitivity=1.0, group_size=0), "group_size"),
        (RandomizedResponseEncoder(group_size=1.5), "group_size"),
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


def test_gaussian_noise_with_mu_alone_is_mu_gdp(acct: PrivacyAccountant) -> None:
    """An explicit mu selects the μ-GDP calibration (it used to be ignored for ε = 1, δ = 1e-5)."""
    t = GaussianNoise(mu=0.5, sensitivity=2.0, accountant=acct, dataset="d").fit(np.zeros((3, 1)))
    assert t.cost_.guarantee == GaussianDP(0.5)
    assert t.noise_std_[0] == pytest.approx(2.0 / 0.5)  # σ = Δ/μ


@pytest.mark.parametrize(
    "transformer",
    [LaplaceNoise(sensitivity=1.0), BoundedLaplaceNoise(lower=0.0, upper=1.0), RandomizedResponseEncoder()],
    ids=["laplace", "bounded", "rr"],
)
@pytest.mark.parametrize("shape", [(0, 2), (3, 0)], ids=["no-rows", "no-columns"])
def test_an_empty_x_is_an_invalid_parameter(acct: PrivacyAccountant, transformer: Any, shape: Any) -> None:
    transformer.set_params(accountant=acct, dataset="d")
    with pytest.raises(InvalidParameterError, match="X is empty") as info:
        transformer.fit(np.zeros(shape))
    assert info.value.parameter == "X"
    fitted = transformer.fit(np.zeros((3, 2)))
    with pytest.raises(InvalidParameterError, match="X is empty"):
        fitted.transform(np.zeros((0, 2)))
    assert charges(acct) == []


PLANTED = 123456.789


@pytest.mark.parametrize(
    "transformer",
    [
        LaplaceNoise(sensitivity=1.0),
        BoundedLaplaceNoise(lower=0.0, upper=1.0),
        BoundedStaircaseNoise(lower=0.0, upper=1.0, gamma=0.3),
        RandomizedResponseEncoder(),
    ],
    ids=["laplace", "bounded", "bounded-staircase", "rr"],
)
@pytest.mark.parametrize(
    "values",
    [
        np.array([[PLANTED + 1j], [2.0 + 0j]]),
        np.r_[np.arange(100.0) * 1j, PLANTED],  # printed on many lines
        np.array([PLANTED, 2.0]),
        np.r_[np.arange(100.0), PLANTED],
        np.array(PLANTED),
    ],
    ids=["complex", "complex-long", "one-dimensional", "one-dimensional-long", "scalar"],
)
def test_a_refused_x_never_quotes_its_values(acct: PrivacyAccountant, transformer: Any, values: Any) -> None:
    """scikit-learn's own messages quote the array (``array=[…]``, complex values): the refusal keeps its
    first line only, raised without the original error attached, and nothing is charged."""
    transformer.set_params(accountant=acct, dataset="d")
    fitted = transformer.fit(np.array([[0.0], [1.0]]))
    for call in (transformer.fit, fitted.transform):
        with pytest.raises(InvalidParameterError) as info:
            call(values)
        error = info.value
        shown = "".join(str(e) for e in (error, error.__cause__, error.__context__) if e is not None)
        assert info.value.parameter == "X" and "123456" not in shown and "1.23456" not in shown
    assert charges(acct) == []
