"""Guarantees against independent computations: mpmath at high precision, scipy, and dp-accounting."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats

from dp_pipeline import ApproxDP, GaussianDP, InvalidParameterError, PureDP, UnsupportedCompositionError
from dp_pipeline.guarantees import format_guarantee, guarantee_from_dict

mpmath.mp.dps = 60


def mp_gdp_delta(mu: float, eps: float) -> mpmath.mpf:
    """δ(ε) of μ-GDP at 60 digits, straight from Dong, Roth & Su, Corollary 2.13."""
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize(
    ("mu", "eps"),
    [(0.5, 0.0), (0.5, 1.0), (1.0, 0.3), (2.0, 3.0), (5.0, 20.0), (30.0, 400.0), (100.0, 4000.0), (0.1, 2.0)],
)
def test_gdp_delta_matches_mpmath(mu: float, eps: float) -> None:
    reference = mp_gdp_delta(mu, eps)
    value = GaussianDP(mu).delta(eps)
    assert math.isfinite(value)
    if reference < mpmath.mpf("1e-300"):
        assert value < 1e-290
    else:
        assert value == pytest.approx(float(reference), rel=1e-9)


@given(mu=st.floats(1e-3, 100.0), eps=st.floats(0.0, 10_000.0))
def test_gdp_delta_is_finite_and_a_probability(mu: float, eps: float) -> None:
    value = GaussianDP(mu).delta(eps)
    assert math.isfinite(value)
    assert 0.0 <= value <= 1.0


def test_gdp_delta_equals_gaussian_mechanism_pld_from_dp_accounting() -> None:
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    for mu in (0.3, 1.0, 2.5):
        dist = pld.from_gaussian_mechanism(standard_deviation=1.0 / mu, value_discretization_interval=1e-4)
        for eps in (0.0, 0.5, 1.0, 3.0):
            anchor = dist.get_delta_for_epsilon(eps)
            # dp-accounting's discretised PLD is pessimistic up to its truncation of the tails.
            assert GaussianDP(mu).delta(eps) <= anchor * (1 + 1e-9) + 1e-12
            assert GaussianDP(mu).delta(eps) == pytest.approx(anchor, rel=1e-2, abs=1e-10)


@pytest.mark.parametrize(
    ("mu", "delta"), [(0.5, 1e-5), (1.0, 1e-6), (3.0, 1e-10), (100.0, 1e-8), (0.01, 1e-3), (0.002, 1e-4)]
)
def test_to_approx_dp_inverts_delta_and_rounds_up(mu: float, delta: float) -> None:
    g = GaussianDP(mu).to_approx_dp(delta)
    assert g.delta == delta
    # independent inversion with mpmath's root finder at 60 digits
    if mp_gdp_delta(mu, 0.0) <= delta:
        assert g.epsilon == 0.0
        return
    lo, hi = mpmath.mpf(0), mpmath.mpf(mu) * (mpmath.mpf(mu) / 2 + 10)
    for _ in range(200):  # plain bisection at 60 digits: δ(ε) decreases in ε
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mp_gdp_delta(mu, mid) > delta else (lo, mid)
    root = hi
    assert g.epsilon >= float(root) * (1 - 1e-12)
    assert g.epsilon == pytest.approx(float(root), rel=1e-9)
    assert mp_gdp_delta(mu, g.epsilon) <= delta


def test_gdp_tradeoff_is_the_neyman_pearson_error_of_two_normals() -> None:
    # T(N(0,1), N(μ,1))(α): reject when X > z_{1-α}; type II error is P[N(μ,1) ≤ z_{1-α}].
    alpha = np.linspace(0.0, 1.0, 101)
    mu = 1.3
    reference = stats.norm.cdf(stats.norm.ppf(1 - alpha), loc=mu)
    np.testing.assert_allclose(GaussianDP(mu).tradeoff(alpha), reference, atol=1e-12)


def test_approx_tradeoff_matches_definition_by_linear_programming() -> None:
    # f_{ε,δ}(α) is the least β with β ≥ 0, β ≥ 1 − δ − e^ε α and β ≥ e^{−ε}(1 − δ − α): solve it as an LP.
    eps, delta = 0.7, 0.05
    g = ApproxDP(eps, delta)
    for alpha in np.linspace(0, 1, 23):
        res = optimize.linprog(
            c=[1.0],
            A_ub=[[-1.0], [-1.0]],
            b_ub=[-(1 - delta - math.exp(eps) * alpha), -math.exp(-eps) * (1 - delta - alpha)],
            bounds=[(0, None)],
        )
        assert g.tradeoff(alpha) == pytest.approx(res.x[0], abs=1e-9)
    assert PureDP(eps).tradeoff(0.3) == ApproxDP(eps, 0.0).tradeoff(0.3)


@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 3.0, 10.0])
def test_pure_to_gdp_is_the_least_dominating_mu(eps: float) -> None:
    mu = PureDP(eps).to_gdp().mu
    # closed form evaluated independently in high precision
    reference = 2 * mpmath.erfinv(2 * mpmath.exp(eps) / (1 + mpmath.exp(eps)) - 1) * mpmath.sqrt(2)
    assert mu == pytest.approx(float(reference), rel=1e-10)
    assert mu >= float(reference) * (1 - 1e-15)
    # ε-DP implies μ-GDP: G_μ ≤ f_{ε,0} everywhere, with equality at the kink α = 1/(1+e^ε)
    alpha = np.linspace(0, 1, 2001)
    assert np.all(GaussianDP(mu).tradeoff(alpha) <= PureDP(eps).tradeoff(alpha) + 1e-12)
    kink = 1 / (1 + math.exp(eps))
    assert GaussianDP(mu).tradeoff(kink) == pytest.approx(PureDP(eps).tradeoff(kink), abs=1e-9)


def test_group_privacy() -> None:
    assert PureDP(0.5).group(3) == PureDP(1.5)
    assert GaussianDP(0.5).group(4) == GaussianDP(2.0)
    g = ApproxDP(0.2, 1e-6).group(3)
    assert g.epsilon == pytest.approx(0.6)
    exact = mpmath.mpf(1e-6) * (1 + mpmath.exp(mpmath.mpf(0.2)) + mpmath.exp(2 * mpmath.mpf(0.2)))
    assert exact <= g.delta <= exact * (1 + 1e-9)
    assert ApproxDP(0.0, 1e-6).group(5).delta == pytest.approx(5e-6, rel=1e-9)
    with pytest.raises(InvalidParameterError, match="δ ≥ 1"):
        ApproxDP(5.0, 0.1).group(10)
    with pytest.raises(InvalidParameterError, match="'k'"):
        PureDP(1.0).group(0)


def test_gdp_group_matches_composed_tradeoff() -> None:
    # f-DP group privacy: [1 − (1 − f)^{∘k}]; for G_μ this is G_{kμ} (Dong, Roth & Su, Thm 2.14).
    mu, k = 0.4, 3
    alpha = np.linspace(0.001, 0.999, 50)
    one_minus_f = lambda a: 1 - GaussianDP(mu).tradeoff(a)  # noqa: E731
    composed = one_minus_f(one_minus_f(one_minus_f(alpha)))
    np.testing.assert_allclose(GaussianDP(mu).group(k).tradeoff(alpha), 1 - composed, atol=1e-10)


def test_approx_with_delta_has_no_gdp() -> None:
    with pytest.raises(UnsupportedCompositionError, match="no μ-GDP"):
        ApproxDP(1.0, 1e-6).to_gdp()
    assert ApproxDP(1.0).to_gdp() == PureDP(1.0).to_gdp()


@given(
    bad=st.one_of(
        st.just(float("nan")),
        st.just(float("inf")),
        st.just(-float("inf")),
        st.floats(max_value=-1e-9),
        st.text(),
        st.booleans(),
        st.none(),
        st.lists(st.floats()),
    )
)
def test_constructors_reject_bad_values(bad: object) -> None:
    for build in (lambda: PureDP(bad), lambda: ApproxDP(bad, 0.0), lambda: GaussianDP(bad)):
        with pytest.raises(InvalidParameterError):
            build()


@given(delta=st.one_of(st.floats(min_value=1.0), st.floats(max_value=-1e-12), st.just(float("nan"))))
def test_delta_outside_unit_interval_is_rejected(delta: float) -> None:
    with pytest.raises(InvalidParameterError, match="delta"):
        ApproxDP(1.0, delta)


def test_round_trip_through_plain_data() -> None:
    for g in (PureDP(1.0), ApproxDP(0.5, 1e-7), GaussianDP(0.8)):
        assert guarantee_from_dict(g.to_dict()) == g
    with pytest.raises(InvalidParameterError):
        guarantee_from_dict({"type": "os.system", "epsilon": 1.0})


@pytest.mark.parametrize("k", [2, 3, 7, 10])
@pytest.mark.parametrize("value", [0.1, 0.7, 1 / 3, 1.3])
def test_group_never_rounds_privacy_loss_down(k: int, value: float) -> None:
    from fractions import Fraction

    exact = k * Fraction(value)  # the exact product of the stored doubles
    assert Fraction(PureDP(value).group(k).epsilon) >= exact
    assert Fraction(ApproxDP(value, 1e-12).group(k).epsilon) >= exact
    assert Fraction(GaussianDP(value).group(k).mu) >= exact
    assert PureDP(value).group(k).epsilon == pytest.approx(k * value, rel=1e-15)


@pytest.mark.parametrize(
    ("guarantee", "options", "text"),
    [
        (PureDP(0.5), {}, "ε = 0.5"),
        (ApproxDP(1.0, 1e-6), {}, "ε = 1, δ = 1e-06"),
        (ApproxDP(1 / 3, 0.0), {}, "ε = 0.333333, δ = 0"),
        (GaussianDP(0.8), {}, "μ = 0.8"),
        (ApproxDP(1 / 3, 1 / 7 * 1e-5), {"digits": 8}, "ε = 0.33333333, δ = 1.4285714e-06"),
        (ApproxDP(1.0, 0.0), {"compact": True}, "ε=1"),
        (ApproxDP(1 / 3, 1 / 7 * 1e-5), {"compact": True, "delta_digits": 3}, "ε=0.333333, δ=1.43e-06"),
        (GaussianDP(1 / 3), {"compact": True}, "μ=0.333333"),
    ],
)
def test_one_formatter_prints_every_guarantee(
    guarantee: object, options: dict[str, object], text: str
) -> None:
    assert format_guarantee(guarantee, **options) == text


def test_str_of_a_guarantee_is_the_formatter_at_eight_digits() -> None:
    assert str(ApproxDP(1 / 3, 1e-6)) == "ε = 0.33333333, δ = 1e-06"
    assert str(GaussianDP(math.pi)) == "μ = 3.1415927"
    with pytest.raises(InvalidParameterError):
        format_guarantee(0.5)
