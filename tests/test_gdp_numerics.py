"""μ-GDP ↔ (ε, δ) conversions over the whole accepted range, against the exact formula in mpmath.

δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Corollary 2.13) is evaluated here as
written, at 60 significant digits plus the digits its subtraction cancels, so that every reference value is
correct to at least 40 digits; the library never forms that difference.
"""

from __future__ import annotations

import math
import sys

import mpmath
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, GaussianDP, InvalidParameterError, PureDP
from dp_pipeline.guarantees import least_double_where

TIGHT = 1e-9  # relative tolerance for "tight"
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ncdf(t: mpmath.mpf) -> mpmath.mpf:
    # mpmath's erfc fails beyond |t| ≈ 1e154; there Φ is 0 or 1 to far more than the working precision.
    if abs(t) > mpmath.mpf("1e154"):
        return mpmath.mpf(0) if t < 0 else mpmath.mpf(1)
    return mpmath.ncdf(t)


def exact_delta(mu: float, eps: float) -> mpmath.mpf:
    """δ(ε) of μ-GDP from the formula as written; the precision covers the digits its subtraction loses."""
    m, e = mpmath.mpf(mu), mpmath.mpf(eps)
    lost = max(0, -math.log10(mu)) + 2 * max(0, math.log10(mu)) + float(mpmath.log10(e / m + 2))
    with mpmath.workdps(60 + int(lost) + 10):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        value = _ncdf(-e / m + m / 2) - mpmath.exp(e) * _ncdf(-e / m - m / 2)
    with mpmath.workdps(60):
        return +value


def assert_valid_and_tight(mu: float, eps: float, delta: float) -> None:
    """The true δ(ε) is within δ, and ε is not larger than needed: a slightly smaller ε (1e-9 relative, or
    the next double down where doubles are coarser) is not valid, or δ(ε) is already within 1e-9 relative
    of δ (where δ barely changes with ε)."""
    assert exact_delta(mu, eps) <= delta
    if eps > 0.0:
        smaller = min(eps * (1 - TIGHT), math.nextafter(eps, 0.0))
        assert exact_delta(mu, smaller) > delta or exact_delta(mu, eps) >= delta * (1 - TIGHT)


def _mu(log10_mu: float) -> float:
    return max(10.0**log10_mu, 5e-324)


mus = st.floats(-323.0, 150.0).map(_mu)
ratios = st.floats(-8.0, 1.7).map(lambda t: 10.0**t)  # ε/μ, where δ goes from about 1/2 to 1e-300
epsilons = st.one_of(
    st.just(0.0),
    st.floats(-320.0, 4.0).map(lambda t: 10.0**t),
    st.tuples(mus, ratios, st.booleans()).map(lambda t: t[0] * t[1] + (t[0] * t[0] / 2 if t[2] else 0.0)),
)
deltas = st.one_of(
    st.floats(-300.0, -0.3).map(lambda t: 10.0**t),
    st.floats(-16.0, -1.0).map(lambda t: 1.0 - 10.0**t),
    st.sampled_from([sys.float_info.min, 5e-324, 1e-300, 0.5, math.nextafter(1.0, 0.0)]),
)


@SETTINGS
@given(mu=mus, eps=epsilons)
def test_delta_is_a_tight_upper_bound(mu: float, eps: float) -> None:
    if not math.isfinite(eps) or (eps > 0 and not math.isfinite(eps / mu)):
        eps = 1.0
    value = GaussianDP(mu).delta(eps)
    reference = exact_delta(mu, eps)
    assert 0.0 < value <= 1.0
    assert value >= reference
    if reference >= sys.float_info.min:
        assert value <= reference * (1 + TIGHT) or value == 1.0


@SETTINGS
@given(mu=mus, delta=deltas)
def test_to_approx_dp_is_valid_and_tight(mu: float, delta: float) -> None:
    result = GaussianDP(mu).to_approx_dp(delta)
    assert result.delta == delta
    assert_valid_and_tight(mu, result.epsilon, delta)


@pytest.mark.parametrize(("mu", "delta"), [(1e-12, 1e-300), (1e-16, 1e-20), (1e-10, 1e-12), (3e-300, 1e-300)])
def test_small_mu_conversion_is_valid_and_positive(mu: float, delta: float) -> None:
    # previously ε = 2.947e-11 (true δ 1.15e-204) and ε = 0 for the first two
    eps = GaussianDP(mu).to_approx_dp(delta).epsilon
    assert eps > 0.0
    assert_valid_and_tight(mu, eps, delta)


@pytest.mark.parametrize("eps", [0.0, 1e-11, 1e-10, 3e-10, 1e-9, 3e-9])
def test_delta_at_mu_1e_10_is_an_upper_bound(eps: float) -> None:
    # previously up to 3.1% below the true δ
    reference = exact_delta(1e-10, eps)
    value = GaussianDP(1e-10).delta(eps)
    assert reference <= value <= reference * (1 + TIGHT)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    ("mu", "delta"), [(3.162277660168379e-08, 1e-08), (15.510844769528406, 1 - 1e-15)]
)
def test_former_hangs_and_raw_errors_end_with_a_valid_epsilon(mu: float, delta: float) -> None:
    assert_valid_and_tight(mu, GaussianDP(mu).to_approx_dp(delta).epsilon, delta)


@pytest.mark.parametrize("mu", [1e155, 1e200, sys.float_info.max])
def test_no_finite_epsilon_is_a_clear_error(mu: float) -> None:
    # ε ≥ μ(μ/2 − Φ⁻¹(δ)) exceeds the largest double
    assert mpmath.mpf(mu) * (mpmath.mpf(mu) / 2 + 7) > sys.float_info.max
    with pytest.raises(InvalidParameterError, match="no finite ε"):
        GaussianDP(mu).to_approx_dp(1e-6)
    assert GaussianDP(mu).delta(1.0) == 1.0


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-9, 1.5, float("nan"), float("inf"), "0.1", None, True])
def test_to_approx_dp_rejects_bad_delta(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="delta"):
        GaussianDP(0.5).to_approx_dp(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1e-300, float("nan"), float("inf"), "1", None])
def test_delta_rejects_bad_epsilon(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="epsilon"):
        GaussianDP(0.5).delta(bad)  # type: ignore[arg-type]


@given(threshold=st.floats(min_value=0.0, max_value=sys.float_info.max, exclude_min=True))
def test_least_double_where_finds_the_threshold_in_64_steps(threshold: float) -> None:
    calls = []

    def holds(value: float) -> bool:
        calls.append(value)
        return value >= threshold

    assert least_double_where(holds, 0.0, sys.float_info.max) == threshold
    assert len(calls) <= 64


# ------------------------------------------------------------------------------------------------------
# pure ε-DP → μ-GDP at extreme ε


@mpmath.workdps(60)
def exact_pure_to_gdp(eps: float) -> mpmath.mpf:
    """μ = 2Φ⁻¹(e^ε/(1 + e^ε)) at 60 digits: through erf⁻¹(tanh(ε/2)) below ε = 1, above as twice the
    root of log Φ(−z) = −log(1 + e^ε) (1 − e^ε/(1 + e^ε) underflows any fixed precision)."""
    e = mpmath.mpf(eps)
    if eps < 1:  # Φ(z) = e^ε/(1+e^ε) ⇔ erf(z/√2) = tanh(ε/2)
        with mpmath.workdps(60 + max(0, int(-math.log10(eps)))):
            return +(2 * mpmath.sqrt(2) * mpmath.erfinv(mpmath.tanh(mpmath.mpf(eps) / 2)))
    target = -(e + mpmath.log1p(mpmath.exp(-e)))
    z = mpmath.sqrt(2 * e)
    for _ in range(40):  # Newton on log Φ(−z), whose derivative is −φ(z)/Φ(−z)
        step = (mpmath.log(_ncdf(-z)) - target) / (-mpmath.npdf(z) / _ncdf(-z))
        z -= step
        if abs(step) < z * mpmath.mpf("1e-55"):
            return 2 * z
    raise AssertionError("no convergence")


@pytest.mark.parametrize(
    "eps", [5e-324, 1e-310, 1e-200, 1e-8, 0.3, 3.0, 100.0, 708.0, 740.0, 800.0, 1e300, 1e307]
)
def test_pure_to_gdp_rounds_up_at_extreme_epsilon(eps: float) -> None:
    # previously μ = 0 at ε = 5e-324, a subnormal Φ⁻¹ argument near 740 and an error past 745
    mu = PureDP(eps).to_gdp().mu
    reference = exact_pure_to_gdp(eps)
    assert mu >= reference
    assert mu <= max(reference * (1 + 1e-12), reference + 1e-323)  # subnormals: two units
    assert ApproxDP(eps).to_gdp() == PureDP(eps).to_gdp()


# ------------------------------------------------------------------------------------------------------
# (ε, δ) group privacy: δ·Σᵢ₌₀ᵏ⁻¹ e^{iε} (Vadhan 2017, Lemma 2.2)


@mpmath.workdps(60)
def exact_group_delta(eps: float, delta: float, k: int) -> mpmath.mpf:
    return mpmath.mpf(delta) * mpmath.fsum(mpmath.exp(i * mpmath.mpf(eps)) for i in range(k))


def test_group_delta_worked_example() -> None:
    # (0.5, 1e-6) for 3: 1e-6·(1 + e^0.5 + e) = 5.367e-6, not 3·e·1e-6 = 8.15e-6
    g = ApproxDP(0.5, 1e-6).group(3)
    assert g.epsilon == 1.5
    reference = exact_group_delta(0.5, 1e-6, 3)
    assert reference <= g.delta <= reference * (1 + TIGHT)
    assert g.delta < 5.4e-6


@settings(max_examples=300, deadline=None)
@given(
    eps=st.one_of(st.just(0.0), st.floats(-320.0, 2.0).map(lambda t: 10.0**t)),
    delta=st.floats(-320.0, -0.5).map(lambda t: max(10.0**t, 5e-324)),
    k=st.integers(1, 400),
)
def test_group_delta_is_the_tight_sum_rounded_up(eps: float, delta: float, k: int) -> None:
    reference = exact_group_delta(eps, delta, k)
    if reference >= 1:
        with pytest.raises(InvalidParameterError, match="δ ≥ 1"):
            ApproxDP(eps, delta).group(k)
        return
    if reference > 1 - 1e-9:  # rounding up may reach 1: either answer is right
        return
    g = ApproxDP(eps, delta).group(k)
    assert g.delta >= reference
    assert g.delta <= max(reference * (1 + TIGHT), reference + 1e-323)  # subnormals: two units
    assert mpmath.mpf(g.epsilon) >= k * mpmath.mpf(eps)


@pytest.mark.parametrize(
    "build",
    [
        lambda: PureDP(1e300).group(10**10),
        lambda: ApproxDP(1e300, 1e-6).group(10**10),
        lambda: ApproxDP(1.0, 1e-6).group(10**400),
        lambda: GaussianDP(1e300).group(10**10),
    ],
)
def test_group_overflow_is_a_clear_error(build: object) -> None:
    with pytest.raises(InvalidParameterError, match="exceeds the largest float"):
        build()  # type: ignore[operator]


def test_group_of_any_int_size_is_exact_then_rounded_up() -> None:
    from fractions import Fraction

    g = PureDP(1e-300).group(10**400)
    assert Fraction(g.epsilon) >= 10**400 * Fraction(1e-300)
    assert g.epsilon == math.nextafter(float(10**400 * Fraction(1e-300)), math.inf) or Fraction(
        g.epsilon
    ) == 10**400 * Fraction(1e-300)
    assert PureDP(0.0).group(10**400) == PureDP(0.0)
    assert GaussianDP(0.0).group(10**400) == GaussianDP(0.0)


# ------------------------------------------------------------------------------------------------------
# the accountant's μ-GDP paths at tiny budgets


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("epsilon", "delta"), [(1e-7, 1e-6), (1e-12, 1e-10), (1e-200, 1e-300), (1.0, 1e-6), (50.0, 1e-300)]
)
def test_mu_limit_of_a_budget_is_valid_and_tight(epsilon: float, delta: float) -> None:
    from dp_pipeline.accounting import PrivacyAccountant
    from dp_pipeline.accounting.rules._pure_or_gdp import mu_limit

    limit = float(mu_limit(ApproxDP(epsilon, delta)))
    assert limit > 0.0
    assert exact_delta(limit, epsilon) <= delta  # a limit-GDP release is truly (ε_B, δ_B)-DP
    assert exact_delta(limit * (1 + 1e-8), epsilon) > delta  # and the limit is not far below the largest
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(epsilon, delta), rule="pure_or_gdp")  # previously never returned
    assert acct.budget("d").guarantee == ApproxDP(epsilon, delta)


@pytest.mark.timeout(60)
def test_compose_plan_of_a_tiny_mu_ends_with_a_valid_epsilon() -> None:
    from dp_pipeline.accounting import compose_plan
    from dp_pipeline.events import PrivacyEvent

    mu, delta = 3.162277660168379e-08, 1e-08
    event = PrivacyEvent(kind="guarantee", guarantee=GaussianDP(mu))
    result = compose_plan([event], delta=delta).guarantee
    assert isinstance(result, ApproxDP)
    assert result.delta <= delta
    assert exact_delta(mu, result.epsilon) <= result.delta  # previously never returned
