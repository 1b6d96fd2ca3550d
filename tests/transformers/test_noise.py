"""The continuous-noise transformers add the noise they document, calibrated to the declared bounds."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

from dp_pipeline import ApproxDP, InvalidParameterError, PrivacyLeakWarning, PureDP
from dp_pipeline.mechanisms import BoundedLaplace, Gaussian, Laplace, Staircase, staircase_cdf
from dp_pipeline.transformers import (
    BoundedLaplaceNoise,
    BoundedStaircaseNoise,
    GaussianNoise,
    LaplaceNoise,
    StaircaseNoise,
)

# Seeds make these tests reproducible; the warning they raise is tested in tests/test_seeded_noise.py.
pytestmark = pytest.mark.filterwarnings("ignore:seeded noise:dp_pipeline.exceptions.PrivacyLeakWarning")

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
N = 20_000


def noise_of(transformer: Any, data: np.ndarray) -> np.ndarray:
    """The noise the transformer added: its output minus the (clipped) input."""
    out = transformer.fit_transform(data)
    return out - np.clip(data, transformer.lower_, transformer.upper_)


def test_laplace_scale_is_d_times_sensitivity_over_epsilon() -> None:
    sensitivity = np.array([1.0, 4.0, 0.5])
    t = LaplaceNoise(epsilon=1.5, sensitivity=sensitivity, random_state=0, **OPT_OUT)
    noise = noise_of(t, np.zeros((N, 3)))
    scales = 3 * sensitivity / 1.5
    for j, scale in enumerate(scales):
        assert t.mechanisms_[j].scale == pytest.approx(scale, rel=1e-12)
        assert stats.kstest(noise[:, j], stats.laplace(scale=scale).cdf).pvalue > 1e-3
    assert t.noise_std_ == pytest.approx(math.sqrt(2) * scales)
    # the cost: the composite of the three ε/3 Laplace releases, ε in total, row-level (replace-one)
    assert t.cost_.kind == "composite" and t.cost_.relation == "replace_one"
    assert t.cost_.guarantee == PureDP(1.5)
    assert [p.sensitivity / p.parameters["scale"] for p in t.cost_.parts] == pytest.approx([0.5] * 3)


def test_laplace_noise_at_a_wrong_scale_is_detected() -> None:
    """The KS check above would see noise at 0.8 times the documented scale (so it can fail)."""
    noise = np.random.default_rng(1000).laplace(0.0, 0.8 * 2.0, N)
    assert stats.kstest(noise, stats.laplace(scale=2.0).cdf).pvalue < 1e-6


def test_one_feature_matches_the_mechanism() -> None:
    t = LaplaceNoise(epsilon=0.7, lower=0.0, upper=10.0, **OPT_OUT).fit(np.zeros((2, 1)))
    assert t.mechanisms_ == [Laplace(epsilon=0.7, sensitivity=10.0)]
    assert t.cost_ == Laplace(epsilon=0.7, sensitivity=10.0).event.under("replace_one")


def test_gaussian_sigma_is_the_vector_mechanism_at_sensitivity_root_d() -> None:
    eps, delta, sensitivity = 1.0, 1e-5, np.array([1.0, 2.0, 3.0, 0.5])
    t = GaussianNoise(epsilon=eps, delta=delta, sensitivity=sensitivity, random_state=1, **OPT_OUT)
    noise = noise_of(t, np.zeros((N, 4)))
    unit = t.noise_std_ / sensitivity
    assert unit == pytest.approx(np.full(4, unit[0]), rel=1e-12)
    # independent check of the calibration: Balle & Wang's exact δ(ε) of N(0, σ²) at L2 sensitivity √4 = 2
    s, sigma = 2.0, unit[0]
    exact = special.ndtr(s / (2 * sigma) - eps * sigma / s) - math.exp(eps) * special.ndtr(
        -s / (2 * sigma) - eps * sigma / s
    )
    assert exact <= delta
    assert exact == pytest.approx(delta, rel=1e-6)
    for j in range(4):
        assert stats.kstest(noise[:, j], stats.norm(scale=t.noise_std_[j]).cdf).pvalue > 1e-3
    # σ is the vector mechanism's at sensitivity √4 = 2 ...
    assert sigma == pytest.approx(Gaussian(epsilon=eps, delta=delta, sensitivity=2.0).sigma, rel=1e-12)
    # ... built as the unit mechanism's noise scaled by √d, rounded up, so that the release is a
    # post-processing of the unit mechanism and costs its event whatever d (what is declared before fit)
    one = Gaussian(epsilon=eps, delta=delta, sensitivity=1.0)
    assert all(Fraction(m.sigma) >= 2 * Fraction(m.sensitivity) * Fraction(one.sigma) for m in t.mechanisms_)
    assert t.cost_ == one.event.under("replace_one") == t.declared_cost()
    assert t.cost_.guarantee == ApproxDP(eps, delta)


def test_gaussian_one_feature_has_the_mechanisms_sigma() -> None:
    t = GaussianNoise(epsilon=0.5, delta=1e-6, sensitivity=3.0, **OPT_OUT).fit(np.zeros((2, 1)))
    assert t.noise_std_[0] == pytest.approx(
        Gaussian(epsilon=0.5, delta=1e-6, sensitivity=3.0).sigma, rel=1e-12
    )


def test_gaussian_gdp_calibration() -> None:
    t = GaussianNoise(calibration="gdp", mu=0.5, sensitivity=1.0, **OPT_OUT).fit(np.zeros((2, 4)))
    assert t.noise_std_ == pytest.approx(np.full(4, 2.0 / 0.5))  # σ = √d/μ per unit of Δ
    assert t.cost_.guarantee.mu == pytest.approx(0.5)


def test_staircase_features_get_epsilon_over_d() -> None:
    t = StaircaseNoise(epsilon=2.0, sensitivity=[1.0, 3.0], random_state=2, **OPT_OUT)
    noise = noise_of(t, np.zeros((N, 2)))
    for j, sensitivity in enumerate([1.0, 3.0]):
        assert t.mechanisms_[j] == Staircase(epsilon=1.0, sensitivity=sensitivity)
        gamma = t.mechanisms_[j].effective_gamma
        pvalue = stats.kstest(
            noise[:, j], lambda x, s=sensitivity, g=gamma: staircase_cdf(x, 1.0, s, g)
        ).pvalue
        assert pvalue > 1e-3
    assert t.cost_.kind == "composite" and len(t.cost_.parts) == 2
    assert t.cost_.guarantee == PureDP(2.0)


def test_bounded_laplace_output_stays_in_range_and_follows_the_mechanism() -> None:
    t = BoundedLaplaceNoise(epsilon=1.0, lower=[0.0, -1.0], upper=[10.0, 1.0], random_state=3, **OPT_OUT)
    data = np.column_stack([np.full(N, 7.0), np.full(N, 5.0)])  # the second column is clipped to 1
    out = t.fit_transform(data)
    assert (out >= t.lower_).all() and (out <= t.upper_).all()
    assert t.n_clipped_.tolist() == [0, N]
    expected = BoundedLaplace(epsilon=0.5, lower=0.0, upper=10.0)
    assert t.mechanisms_[0] == expected
    assert stats.kstest(out[:, 0], lambda y: expected.cdf(y, 7.0)).pvalue > 1e-3


def test_bounded_staircase_uses_epsilon_over_d_and_stays_in_range() -> None:
    t = BoundedStaircaseNoise(epsilon=2.0, lower=10.0, upper=20.0, gamma=0.3, random_state=4, **OPT_OUT)
    out = t.fit_transform(np.full((N, 2), 18.0))
    assert (out >= 10.0).all() and (out <= 20.0).all()
    mechanism = t.mechanisms_[1]
    assert (mechanism.epsilon, mechanism.gamma) == (1.0, 0.3)
    assert stats.kstest(out[:, 1], lambda y: mechanism.cdf(y, 18.0)).pvalue > 1e-3


def test_values_outside_the_bounds_are_clipped_and_counted() -> None:
    data = np.array([[-3.0, 0.5], [0.5, 0.5], [2.0, 7.0], [1.0, 1.0]])
    t = LaplaceNoise(epsilon=1e6, lower=0.0, upper=1.0, random_state=0, **OPT_OUT).fit(data)
    assert t.n_clipped_.tolist() == [0, 0]  # nothing released yet
    out = t.transform(data)
    assert t.n_clipped_.tolist() == [2, 1]
    assert out == pytest.approx(np.clip(data, 0.0, 1.0), abs=1e-4)  # ε huge: the output is the clipped input
    t.transform(np.clip(data, 0.0, 1.0))
    assert t.n_clipped_.tolist() == [0, 0]  # the count of the latest release


def test_sensitivity_defaults_to_the_width_of_the_declared_bounds() -> None:
    t = LaplaceNoise(lower=[0, -2], upper=[10, 2], **OPT_OUT).fit(np.zeros((2, 2)))
    assert t.sensitivity_.tolist() == [10.0, 4.0]


def test_bounds_from_the_data_need_the_opt_in_and_warn() -> None:
    data = np.array([[1.0, 5.0], [3.0, 9.0]])
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        t = LaplaceNoise(bounds="data", **OPT_OUT).fit(data)
    assert t.lower_.tolist() == [1.0, 5.0] and t.upper_.tolist() == [3.0, 9.0]
    with pytest.raises(InvalidParameterError) as info:
        LaplaceNoise(bounds="data", lower=0.0, **OPT_OUT).fit(data)
    assert info.value.parameter == "bounds"


def test_random_state_reproduces_and_every_release_is_fresh() -> None:
    data = np.zeros((5, 2))
    a = LaplaceNoise(sensitivity=1.0, random_state=7, **OPT_OUT).fit(data)
    b = LaplaceNoise(sensitivity=1.0, random_state=7, **OPT_OUT).fit(data)
    first = a.transform(data)
    assert np.array_equal(first, b.transform(data))
    assert not np.array_equal(first, a.transform(data))  # the same data released twice gets new noise
