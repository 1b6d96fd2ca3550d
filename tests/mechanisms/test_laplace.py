"""Laplace mechanism against its definition."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from dp_pipeline import InvalidParameterError, PureDP
from dp_pipeline.mechanisms import Laplace, secure_rng
from tests.mechanisms.empirical import assert_empirically_dp, seeded


def test_scale_and_guarantee() -> None:
    m = Laplace(epsilon=0.5, sensitivity=2.0)
    assert m.scale == 4.0
    assert m.guarantee == PureDP(0.5)
    assert m.event.kind == "laplace"
    assert m.event.parameters["scale"] == 4.0
    assert m.event.sensitivity == 2.0


def test_pdf_is_a_density_with_the_stated_variance() -> None:
    m = Laplace(epsilon=0.7, sensitivity=1.5)
    mass, _ = integrate.quad(lambda y: m.pdf(y, 3.0), -np.inf, np.inf)
    second, _ = integrate.quad(lambda y: (y - 3.0) ** 2 * m.pdf(y, 3.0), -np.inf, np.inf)
    assert mass == pytest.approx(1.0, abs=1e-9)
    assert second == pytest.approx(m.variance, rel=1e-7)
    np.testing.assert_allclose(m.pdf([0.0, 1.0], 0.2), stats.laplace.pdf([0.0, 1.0], loc=0.2, scale=m.scale))


def test_density_ratio_of_neighbours_is_bounded_by_exp_epsilon() -> None:
    m = Laplace(epsilon=0.9, sensitivity=1.0)
    y = np.linspace(-20, 20, 40001)
    ratio = m.pdf(y, 0.0) / m.pdf(y, 1.0)
    assert ratio.max() <= np.exp(0.9) * (1 + 1e-12)
    assert ratio.max() == pytest.approx(np.exp(0.9))


def test_randomize_is_vectorised_and_reproducible() -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    x = np.arange(12.0).reshape(3, 4)
    a, b = m.randomize(x, rng=secure_rng(7)), m.randomize(x, rng=secure_rng(7))
    assert a.shape == (3, 4)
    np.testing.assert_array_equal(a, b)
    assert isinstance(m.randomize(5.0, rng=secure_rng(1)), float)
    assert isinstance(m.randomize(5, rng=secure_rng(1)), int)  # an integer query gets integer noise
    assert m.randomize([1, 2, 3]).shape == (3,)


@pytest.mark.slow
def test_noise_is_laplace_distributed() -> None:
    m = Laplace(epsilon=0.8, sensitivity=2.0)
    noise = m.randomize(np.zeros(200_000), rng=secure_rng(3))
    assert stats.kstest(noise, stats.laplace(scale=m.scale).cdf).pvalue > 1e-3


@pytest.mark.parametrize("bad", [[np.nan], [np.inf], [], "abc", [[1, 2], [3]], [1 + 2j], [True, False]])
def test_randomize_rejects_bad_values(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="values"):
        Laplace(epsilon=1.0, sensitivity=1.0).randomize(bad)


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(5e-324, 1.0), (1e-300, 1e300), (1e-10, 1.7e300)])
def test_a_scale_beyond_the_largest_float_is_refused(epsilon: float, sensitivity: float) -> None:
    with pytest.raises(InvalidParameterError, match="beyond the largest float"):
        Laplace(epsilon=epsilon, sensitivity=sensitivity)
    assert Laplace(epsilon=1e-300, sensitivity=1e-10).scale == pytest.approx(1e290)


def test_randomize_rejects_bad_rng() -> None:
    with pytest.raises(InvalidParameterError, match="rng"):
        Laplace(epsilon=1.0, sensitivity=1.0).randomize([1.0], rng="seed")  # type: ignore[arg-type]


@pytest.mark.slow
def test_empirical_ratio_within_exp_epsilon() -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    ratio = assert_empirically_dp(seeded(m), 0.0, 1.0, 1.0, bins=np.linspace(-6, 7, 60))
    # the check has power: the certified ratio gets close to the true worst case e^ε
    assert ratio > np.exp(1.0) * 0.85
    # and it catches a mechanism with half the claimed noise
    half = Laplace(epsilon=2.0, sensitivity=1.0)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(
            seeded(half),
            0.0,
            1.0,
            1.0,
            bins=np.linspace(-6, 7, 60),
        )


def test_the_signature_is_readable_and_positional_arguments_are_refused_clearly() -> None:
    import inspect

    from dp_pipeline.exceptions import InvalidParameterError
    from dp_pipeline.mechanisms import Gaussian

    assert str(inspect.signature(Laplace)) == "(*, epsilon: float, sensitivity: float)"
    assert "sensitivity: float, mu: float | None = None" in str(inspect.signature(Gaussian))
    with pytest.raises(
        InvalidParameterError, match=r"Laplace takes keyword arguments only, e\.g\. Laplace\("
    ):
        Laplace(1.0, 1.0)  # type: ignore[misc]


@pytest.mark.parametrize("name", ["Laplace", "Gaussian", "Staircase"])
def test_sensitivity_must_be_stated(name: str) -> None:
    """No silent Δ = 1: the sensitivity is part of the query, as in OpenDP."""
    from dp_pipeline import mechanisms
    from dp_pipeline.exceptions import InvalidParameterError

    kwargs = {"epsilon": 1.0, "delta": 1e-6} if name == "Gaussian" else {"epsilon": 1.0}
    with pytest.raises(InvalidParameterError, match="'sensitivity'"):
        getattr(mechanisms, name)(**kwargs)
    from_mu = mechanisms.Gaussian.from_mu
    with pytest.raises(TypeError):
        from_mu(0.5)  # type: ignore[call-arg]
