"""The composite mechanism: one release of several parts, its event, its guarantee and its noise."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, stats

from dp_pipeline import ApproxDP, GaussianDP, InvalidParameterError, PureDP
from dp_pipeline.mechanisms import (
    BoundedLaplace,
    Composite,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
    secure_rng,
)


def least_double_at_least(exact: Fraction) -> float:
    """The least double not below ``exact``, found from the nearest double by stepping."""
    value = float(exact)
    while Fraction(value) < exact:
        value = math.nextafter(value, math.inf)
    while Fraction(math.nextafter(value, -math.inf)) >= exact:
        value = math.nextafter(value, -math.inf)
    return value


epsilons = st.floats(min_value=1e-6, max_value=10.0)


@given(st.lists(epsilons, min_size=2, max_size=8))
def test_pure_parts_compose_to_the_exact_sum_rounded_up(parts: list[float]) -> None:
    m = Composite(parts=[Laplace(epsilon=e, sensitivity=1.0) for e in parts])
    exact = sum((Fraction(e) for e in parts), Fraction(0))
    assert m.guarantee == PureDP(least_double_at_least(exact))
    assert m.event.kind == "composite"
    assert m.event.guarantee == m.guarantee


@given(st.lists(st.floats(min_value=1e-3, max_value=5.0), min_size=2, max_size=8))
def test_gdp_parts_compose_to_the_root_sum_of_squares_rounded_up(mus: list[float]) -> None:
    m = Composite(parts=[Gaussian.from_mu(mu=mu, sensitivity=1.0) for mu in mus])
    assert isinstance(m.guarantee, GaussianDP)
    exact = sum((Fraction(mu) ** 2 for mu in mus), Fraction(0))
    assert Fraction(m.guarantee.mu) ** 2 >= exact  # never below the loss
    assert Fraction(math.nextafter(m.guarantee.mu, 0.0)) ** 2 < exact  # and the least such double


def test_approximate_parts_sum_epsilon_and_delta() -> None:
    gaussian = Gaussian(epsilon=0.5, delta=1e-6, sensitivity=1.0)
    m = Composite(parts=[gaussian, Laplace(epsilon=0.25, sensitivity=1.0)])
    assert m.guarantee == ApproxDP(0.75, 1e-6)


def test_the_event_lists_each_part_under_the_release_relation() -> None:
    parts = [Laplace(epsilon=0.5, sensitivity=1.0), Staircase(epsilon=0.5, sensitivity=2.0)]
    event = Composite(parts=parts, relation="add_remove").event
    assert [p.kind for p in event.parts] == ["laplace", "staircase"]
    assert list(event.parts) == [part.event.under("add_remove") for part in parts]
    assert event.relation == "add_remove"


def test_one_part_is_charged_as_itself() -> None:
    laplace = Laplace(epsilon=0.5, sensitivity=1.0)
    assert Composite(parts=[laplace], relation="replace_one").event == laplace.event.under("replace_one")


def test_a_joint_gaussian_is_charged_as_the_joint_mechanism() -> None:
    joint = Gaussian(epsilon=1.0, delta=1e-6, sensitivity=math.sqrt(2.0) * (1 + 1e-15))
    unit_mu = Fraction(1) / Fraction(joint.sigma)
    parts = [Gaussian.from_mu(mu=float(unit_mu) * (1 - 1e-15), sensitivity=s) for s in (1.0, 4.0)]
    m = Composite(parts=parts, joint=joint, relation="replace_one")
    assert m.event == joint.event.under("replace_one")
    assert m.guarantee == ApproxDP(1.0, 1e-6)  # two separate (1, 1e-6) Gaussians would cost (2, 2e-6)


def test_a_joint_gaussian_needs_parts_with_at_least_its_noise() -> None:
    joint = Gaussian.from_mu(mu=1.0, sensitivity=math.sqrt(2.0))
    # each part at μ = 1 gives √2 in all, more than the joint mechanism's μ = 1 accounts for
    too_little = [Gaussian.from_mu(mu=1.0, sensitivity=s) for s in (1.0, 3.0)]
    with pytest.raises(InvalidParameterError, match="less noise than 'joint'"):
        Composite(parts=too_little, joint=joint)
    with pytest.raises(InvalidParameterError, match="Gaussian parts"):
        Composite(parts=[Laplace(epsilon=1.0, sensitivity=1.0)], joint=joint)


def test_replace_one_sensitivities_are_stated_by_each_laplace_part() -> None:
    parts = [Laplace(epsilon=0.5, sensitivity=1.0), Laplace(epsilon=0.5, sensitivity=2.0)]
    event = Composite(parts=parts, relation="add_remove", replace_one=[2.0, 4.0]).event
    assert [p.parameters["replace_one_sensitivity"] for p in event.parts] == [2.0, 4.0]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"parts": []}, "parts"),
        ({"parts": [Composite(parts=[Laplace(epsilon=1.0, sensitivity=1.0)])]}, "composite"),
        ({"parts": [KRandomizedResponse(epsilon=1.0, categories=["a", "b"])]}, "relation='replace_one'"),
        ({"parts": [Laplace(epsilon=1.0, sensitivity=1.0)], "replace_one": [2.0]}, "add_remove release"),
        (
            {
                "parts": [Laplace(epsilon=1.0, sensitivity=1.0)],
                "relation": "add_remove",
                "replace_one": [1, 2],
            },
            "2 entries for 1 part",
        ),
        (
            {
                "parts": [Staircase(epsilon=1.0, sensitivity=1.0)],
                "relation": "add_remove",
                "replace_one": [2],
            },
            "Laplace parts",
        ),
    ],
)
def test_inconsistent_releases_are_refused(arguments: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidParameterError, match=problem):
        Composite(**arguments)


def test_local_parts_are_released_under_their_own_relation() -> None:
    rr = KRandomizedResponse(epsilon=1.0, categories=["a", "b"])
    assert Composite(parts=[rr, rr], relation="replace_one").guarantee == PureDP(2.0)


def test_each_part_randomises_its_own_entry() -> None:
    parts = [Laplace(epsilon=1.0, sensitivity=1.0), Laplace(epsilon=1.0, sensitivity=100.0)]
    m = Composite(parts=parts)
    values = np.zeros((20_000, 2))
    out = m.randomize(values, secure_rng(11))
    assert out.shape == values.shape
    for j, part in enumerate(parts):  # each column follows its own part's Laplace law
        assert stats.kstest(out[:, j], "laplace", args=(0.0, part.scale)).pvalue > 1e-4


def test_randomize_reproduces_with_a_labelled_seed_and_refuses_a_wrong_shape() -> None:
    m = Composite(parts=[Laplace(epsilon=1.0, sensitivity=1.0)] * 3)
    values = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(m.randomize(values, secure_rng(3)), m.randomize(values, secure_rng(3)))
    with pytest.raises(InvalidParameterError, match=r"3 entries along its last axis") as info:
        m.randomize(np.zeros((4, 2)))
    assert info.value.parameter == "values"


def test_noise_std_of_additive_parts_is_their_standard_deviation() -> None:
    parts = [Laplace(epsilon=0.5, sensitivity=1.0), Gaussian.from_mu(mu=0.5, sensitivity=3.0)]
    std = Composite(parts=parts).noise_std
    laplace_second, _ = integrate.quad(lambda y: y * y * parts[0].pdf(y, 0.0), -np.inf, np.inf)
    assert std[0] == pytest.approx(math.sqrt(laplace_second), rel=1e-7)
    assert std[1] == pytest.approx(6.0, rel=1e-12)  # σ = Δ/μ


def test_noise_std_of_a_bounded_part_is_its_largest_mean_squared_error_on_the_grid() -> None:
    bounded = BoundedLaplace(epsilon=1.0, lower=0.0, upper=2.0)
    (std,) = Composite(parts=[bounded], relation="replace_one").noise_std
    grid = np.linspace(0.0, 2.0, 101)
    by_quadrature = [
        integrate.quad(lambda y, t=t: (y - t) ** 2 * bounded.pdf(y, t), 0.0, 2.0)[0] for t in grid
    ]
    assert std == pytest.approx(math.sqrt(max(by_quadrature)), rel=1e-7)


def test_parts_without_noise_on_real_values_have_no_noise_std() -> None:
    rr = KRandomizedResponse(epsilon=1.0, categories=["a", "b"])
    with pytest.raises(InvalidParameterError, match="no noise_std"):
        _ = Composite(parts=[rr], relation="replace_one").noise_std


def test_a_composite_pickles_to_an_equal_mechanism() -> None:
    m = Composite(parts=[Laplace(epsilon=0.5, sensitivity=1.0), Staircase(epsilon=0.5, sensitivity=1.0)])
    assert pickle.loads(pickle.dumps(m)).event == m.event
