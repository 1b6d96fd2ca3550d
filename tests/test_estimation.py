"""Estimators from randomised reports: unbiasedness by exact summation, variances, interval coverage."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from dp_pipeline import InvalidParameterError
from dp_pipeline.estimation import (
    Estimate,
    krr_counts,
    krr_counts_from_tally,
    ldp_mean,
    rr_count,
    rr_share,
    rr_share_from_counts,
)
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    BoundedStaircase,
    KRandomizedResponse,
    Laplace,
    secure_rng,
)

Z95 = stats.norm.ppf(0.975)


def literal_p_coin(epsilon: float) -> float:
    """The truth-or-coin p = (e^ε − 1)/(e^ε + 1), written out literally."""
    return (math.exp(epsilon) - 1) / (math.exp(epsilon) + 1)


def literal_p_spinner(epsilon: float) -> float:
    """ε = ln(p/(1 − p)) solved for p, literally."""
    return math.exp(epsilon) / (1 + math.exp(epsilon))


def report_distribution_fixed(n_yes: int, n: int, p_true: float, p_other: float) -> np.ndarray:
    """Exact law of the number of 1-reports when n_yes of n respondents truly say yes (a convolution)."""
    from_yes = stats.binom.pmf(np.arange(n_yes + 1), n_yes, p_true)
    from_no = stats.binom.pmf(np.arange(n - n_yes + 1), n - n_yes, p_other)
    return np.convolve(from_yes, from_no)


# ---------------------------------------------------------------------------------------------------------
# Binary randomized response: the estimator written per variant
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.3, 1.0, math.log(3.0), 4.0])
def test_share_is_the_seed_formula(epsilon: float) -> None:
    rng = np.random.default_rng(1)
    reports = rng.integers(0, 2, size=(500, 4))
    noisy = reports.mean(axis=0)
    coin = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner_coin")
    spinner = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner")
    p = literal_p_coin(epsilon)
    seed_share = (noisy - 0.5 * (1 - p)) / p  # 001, post 9
    np.testing.assert_allclose(rr_share(reports, coin).value, seed_share, rtol=1e-12)
    np.testing.assert_allclose(rr_count(reports, coin).value, seed_share * 500, rtol=1e-12)  # count = π̂·n
    s = literal_p_spinner(epsilon)
    np.testing.assert_allclose(rr_share(reports, spinner).value, (noisy - (1 - s)) / (2 * s - 1), rtol=1e-12)
    # the two variants are one distribution at the same ε, so one estimate
    np.testing.assert_allclose(rr_share(reports, spinner).value, rr_share(reports, coin).value, rtol=1e-12)
    # the variance worked out directly: Var(π_noisy)/p² with Var(π_noisy) = λ̂(1 − λ̂)/n
    np.testing.assert_allclose(rr_share(reports, coin).variance, noisy * (1 - noisy) / 500 / p**2, rtol=1e-12)


def test_share_vectorises_over_items_and_pools_with_axis_none() -> None:
    m = BinaryRandomizedResponse(epsilon=1.0)
    reports = np.random.default_rng(2).integers(0, 2, size=(300, 3)).astype(bool)
    together = rr_share(reports, m)
    assert np.shape(together.value) == (3,)
    for j in range(3):
        one = rr_share(reports[:, j], m)
        assert isinstance(one.value, float)
        assert together.value[j] == pytest.approx(one.value)
        assert together.ci_low[j] == pytest.approx(one.ci_low)
    with pytest.raises(ValueError, match="read-only"):
        together.value[0] = 0.0
    pooled = rr_share(reports, m, axis=None)
    assert pooled.value == pytest.approx(rr_share(reports.ravel(), m).value)
    assert rr_share(reports.T, m, axis=1).value == pytest.approx(together.value)


def test_interval_is_wald_clipped_to_the_range() -> None:
    m = BinaryRandomizedResponse(epsilon=1.0)
    est = rr_share_from_counts(np.array([0, 140, 260, 400]), 400, m)
    se = np.sqrt(est.variance)
    np.testing.assert_allclose(est.std_error, se)
    np.testing.assert_allclose(est.ci_low, np.clip(est.value - Z95 * se, 0, 1))
    np.testing.assert_allclose(est.ci_high, np.clip(est.value + Z95 * se, 0, 1))
    assert est.value[0] < 0 < 1 < est.value[-1]  # unbiased estimates are not clipped
    assert np.all((est.ci_low >= 0) & (est.ci_high <= 1))
    wider = rr_share_from_counts(140, 400, m, level=0.99)
    assert wider.ci_high - wider.ci_low > est.ci_high[1] - est.ci_low[1]


# ---------------------------------------------------------------------------------------------------------
# Binary: exact expectation, variance and coverage by summing over the report distribution
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 3.0])
@pytest.mark.parametrize("variant", ["spinner", "spinner_coin"])
@pytest.mark.parametrize("n_yes", [0, 7, 31, 60])
def test_share_is_exactly_unbiased_for_fixed_respondents(epsilon: float, variant: str, n_yes: int) -> None:
    n = 60
    m = BinaryRandomizedResponse(epsilon=epsilon, variant=variant)
    p = literal_p_spinner(epsilon)  # P(report = truth), from the definition
    law = report_distribution_fixed(n_yes, n, p, 1 - p)
    est = rr_share_from_counts(np.arange(n + 1), n, m)
    mean = float(law @ est.value)
    assert mean == pytest.approx(n_yes / n, abs=1e-11)
    counts = rr_count(np.r_[np.ones(n_yes), np.zeros(n - n_yes)], m)  # the count of one outcome, shape ok
    assert isinstance(counts.value, float)
    # fixed respondents: the true variance is the i.i.d. one minus π(1 − π)/n (module docstring)
    pi = n_yes / n
    lam = pi * p + (1 - pi) * (1 - p)
    exact_var = float(law @ (est.value - pi) ** 2)
    iid_var = lam * (1 - lam) / (n * (2 * p - 1) ** 2)
    assert exact_var == pytest.approx(iid_var - pi * (1 - pi) / n, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
@pytest.mark.parametrize("pi", [0.05, 0.4, 0.9])
def test_share_variance_formula_and_plug_in_bias_for_iid_reports(epsilon: float, pi: float) -> None:
    n = 80
    m = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner_coin")
    p = literal_p_coin(epsilon)
    lam = p * pi + 0.5 * (1 - p)  # P(report 1) for a random respondent
    law = stats.binom.pmf(np.arange(n + 1), n, lam)
    est = rr_share_from_counts(np.arange(n + 1), n, m)
    assert float(law @ est.value) == pytest.approx(pi, abs=1e-12)
    exact_var = float(law @ (est.value - pi) ** 2)
    assert exact_var == pytest.approx(lam * (1 - lam) / (n * p**2), rel=1e-9)
    # the plug-in variance has expectation (1 − 1/n) × the exact one, as documented
    assert float(law @ est.variance) == pytest.approx((1 - 1 / n) * exact_var, rel=1e-9)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("pi", [0.1, 0.5, 0.8])
def test_share_interval_exact_coverage_is_95_percent(epsilon: float, pi: float) -> None:
    n = 2000
    m = BinaryRandomizedResponse(epsilon=epsilon)
    p = literal_p_spinner(epsilon)
    lam = pi * p + (1 - pi) * (1 - p)
    y = np.arange(n + 1)
    est = rr_share_from_counts(y, n, m)
    coverage = stats.binom.pmf(y, n, lam)[(est.ci_low <= pi) & (pi <= est.ci_high)].sum()
    assert abs(coverage - 0.95) < 0.01, coverage


def _coverage_bounds(hits: int, trials: int) -> tuple[float, float]:
    """Clopper–Pearson 99.9% interval for the observed coverage."""
    low = stats.beta.ppf(0.0005, hits, trials - hits + 1) if hits else 0.0
    high = stats.beta.ppf(0.9995, hits + 1, trials - hits) if hits < trials else 1.0
    return float(low), float(high)


def test_share_interval_covers_95_percent_in_simulation() -> None:
    # respondents drawn i.i.d. from a population with share π, reports through randomize()
    sims, n, pi = 3000, 1000, 0.3
    rng = np.random.default_rng(99)
    m = BinaryRandomizedResponse(epsilon=1.0, variant="spinner_coin")
    truth = rng.random((n, sims)) < pi
    est = rr_share(m.randomize(truth, rng=secure_rng(5)), m)  # one estimate per column
    hits = int(np.count_nonzero((est.ci_low <= pi) & (pi <= est.ci_high)))
    low, high = _coverage_bounds(hits, sims)
    assert low <= 0.95 <= high, (hits / sims, low, high)
    # and the estimates average to π within their standard error
    assert abs(np.mean(est.value) - pi) < 4 * np.std(est.value) / math.sqrt(sims)


# ---------------------------------------------------------------------------------------------------------
# k-RR counts
# ---------------------------------------------------------------------------------------------------------


def test_krr_counts_match_the_mechanism_and_the_seed_formula() -> None:
    m = KRandomizedResponse(epsilon=1.2, categories=["A", "B", "C", "D"])
    rng = np.random.default_rng(3)
    answers = rng.choice(["A", "B", "C", "D"], size=5000, p=[0.5, 0.3, 0.15, 0.05])
    reports = m.randomize(answers, rng=secure_rng(4))
    est = krr_counts(reports, m)
    tally = np.array([np.count_nonzero(reports == c) for c in "ABCD"])
    e = math.exp(1.2)
    p, q = e / (e + 3), 1 / (e + 3)  # k-RR's p and q = (1 − p)/(k − 1)
    seed = (tally - 5000 * q) / (p - q)
    np.testing.assert_allclose(est.value, seed, rtol=1e-12)
    assert est.to_dict() == pytest.approx(m.estimate_counts(reports))
    assert est.labels == ("A", "B", "C", "D")
    # the variance of the counts among these 5000 respondents, at the estimate (clipped to [0, N])
    held = np.clip(seed, 0, 5000)
    np.testing.assert_allclose(
        est.variance, (held * p * (1 - p) + (5000 - held) * q * (1 - q)) / (p - q) ** 2, rtol=1e-12
    )
    one = est["B"]
    assert isinstance(one, Estimate) and one.value == pytest.approx(seed[1])
    assert one.ci_low == pytest.approx(max(0.0, seed[1] - Z95 * math.sqrt(est.variance[1])))
    with pytest.raises(InvalidParameterError, match="label"):
        est["Z"]
    with pytest.raises(InvalidParameterError, match="label"):
        rr_share([0, 1], BinaryRandomizedResponse(epsilon=1.0))["a"]


@pytest.mark.parametrize("epsilon", [0.4, 2.0])
def test_krr_counts_exactly_unbiased_over_the_multinomial(epsilon: float) -> None:
    k, total = 3, 14
    m = KRandomizedResponse(epsilon=epsilon, categories=["x", "y", "z"])
    share = np.array([0.6, 0.3, 0.1])
    e = math.exp(epsilon)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    lam = q + (p - q) * share  # P(report v) for a random respondent
    outcomes = [c for c in itertools.product(range(total + 1), repeat=k) if sum(c) == total]
    weights = np.array([stats.multinomial.pmf(c, total, lam) for c in outcomes])
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    values = np.array([krr_counts_from_tally(c, m).value for c in outcomes])
    mean = weights @ values
    np.testing.assert_allclose(mean, total * share, rtol=1e-10)
    exact_var = weights @ (values - total * share) ** 2
    np.testing.assert_allclose(exact_var, total * lam * (1 - lam) / (p - q) ** 2, rtol=1e-9)
    # the population's variance is the expected conditional variance (what krr_counts reports, for the
    # respondents drawn) plus the variance of their true counts, N·π(1 − π) (law of total variance)
    drawn_var = total * (share * p * (1 - p) + (1 - share) * q * (1 - q)) / (p - q) ** 2
    np.testing.assert_allclose(exact_var, drawn_var + total * share * (1 - share), rtol=1e-9)


def test_krr_counts_unbiased_through_randomize_for_fixed_respondents() -> None:
    categories = [("t", 1), ("t", 2), "other", 4]
    m = KRandomizedResponse(epsilon=0.7, categories=categories)
    true_counts = np.array([400_000, 300_000, 200_000, 100_000])
    values = np.empty(true_counts.sum(), dtype=object)
    values[:] = [c for c, n in zip(categories, true_counts, strict=True) for _ in range(n)]
    est = krr_counts(m.randomize(values, rng=secure_rng(17)), m)
    # exact variance for fixed respondents: Σ over truth groups of binomial variances
    p, q = m.pmf(categories[0], categories[0]), m.pmf(categories[1], categories[0])
    n = true_counts.sum()
    var_tally = true_counts * p * (1 - p) + (n - true_counts) * q * (1 - q)
    sd = np.sqrt(var_tally) / (p - q)
    assert np.all(np.abs(est.value - true_counts) < 4.5 * sd), (est.value - true_counts) / sd
    # the variance is linear in the count, evaluated at the estimate: off by its slope times the error
    slope = (p * (1 - p) - q * (1 - q)) / (p - q) ** 2
    assert np.all(np.abs(est.variance - var_tally / (p - q) ** 2) <= abs(slope) * 4.5 * sd)


def test_krr_interval_covers_95_percent_in_simulation() -> None:
    # the respondents' own counts are the target: each simulated survey has its own true tally
    sims, n = 1500, 600
    categories = [0, 1, 2]
    share = np.array([0.5, 0.35, 0.15])
    m = KRandomizedResponse(epsilon=1.5, categories=categories)
    rng = np.random.default_rng(41)
    answers = rng.choice(3, size=(sims, n), p=share)
    reports = m.randomize(answers, rng=secure_rng(8))
    hits = np.zeros(3, dtype=int)
    for truth, row in zip(answers, reports, strict=True):
        est = krr_counts(row, m)
        counts = np.bincount(truth, minlength=3)
        hits += (est.ci_low <= counts) & (counts <= est.ci_high)
    for h in hits:
        low, high = _coverage_bounds(int(h), sims)
        assert low <= 0.95 <= high, (h / sims, low, high)


# ---------------------------------------------------------------------------------------------------------
# Means from the bounded mechanisms
# ---------------------------------------------------------------------------------------------------------


def _mean_output_by_quadrature(m: Any, t: float) -> float:
    value, _ = integrate.quad(lambda y: y * m.pdf(y, t), m.lower, m.upper, points=[t], limit=200)
    return float(value)


def test_ldp_mean_matches_the_mean_report_through_the_exact_density() -> None:
    m = BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0)
    reports = m.randomize(np.full(200_000, 7.0), rng=secure_rng(21))
    est = ldp_mean(reports, m)
    # θ̂ solves E[Y | θ] = ȳ, with E[Y | θ] integrated from the pdf here (independent of expected_output)
    assert _mean_output_by_quadrature(m, est.value) == pytest.approx(reports.mean(), abs=1e-9)
    # consistent for respondents sharing one value: within the delta-method standard error
    assert abs(est.value - 7.0) < 4.5 * est.std_error
    assert est.ci_low < 7.0 < est.ci_high
    theta = est.value
    slope = (_mean_output_by_quadrature(m, theta + 0.01) - _mean_output_by_quadrature(m, theta - 0.01)) / 0.02
    assert est.variance == pytest.approx(reports.var(ddof=1) / (reports.size * slope**2), rel=1e-3)


def test_ldp_mean_is_unbiased_for_populations_symmetric_about_the_middle() -> None:
    m = BoundedLaplace(epsilon=2.0, lower=-1.0, upper=1.0)
    rng = np.random.default_rng(5)
    truth = np.concatenate([x := rng.uniform(-1.0, 1.0, 150_000), -x])
    est = ldp_mean(m.randomize(truth, rng=secure_rng(6)), m)
    assert abs(est.value) < 4.5 * est.std_error


def test_ldp_mean_refuses_when_the_mean_report_does_not_identify_the_mean() -> None:
    # E[Y | t] of this bounded staircase falls and rises again near the ends of the range
    m = BoundedStaircase(epsilon=1.0, lower=0.0, upper=10.0, gamma=0.3)
    g = np.array([_mean_output_by_quadrature(m, t) for t in (0.0, 1.0)])
    assert g[1] < g[0]
    with pytest.raises(InvalidParameterError, match=r"at ε = 1 use gamma ≥ 0\.41, or BoundedLaplace") as info:
        ldp_mean(m.randomize(np.full(100, 5.0), rng=secure_rng(1)), m)
    assert info.value.parameter == "mechanism"
    monotone = BoundedStaircase(epsilon=1.0, lower=0.0, upper=10.0, gamma=0.5)
    est = ldp_mean(monotone.randomize(np.full(100_000, 3.0), rng=secure_rng(2)), monotone)
    assert abs(est.value - 3.0) < 4.5 * est.std_error


# ---------------------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------------------


def _raises_naming(name: str, call: Any, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call(*args, **kwargs)
    assert info.value.parameter == name
    assert name in str(info.value)


BINARY = BinaryRandomizedResponse(epsilon=1.0)
KRR = KRandomizedResponse(epsilon=1.0, categories=["a", "b", "c"])
BOUNDED = BoundedLaplace(epsilon=1.0, lower=0.0, upper=1.0)

non_binary = st.floats().filter(lambda x: x not in (0.0, 1.0))
bad_reports = st.one_of(
    st.sampled_from([[], np.array([]), "0101", None, [None, 1], [[0, 1], [1]], [0.5], [2], [np.nan]]),
    st.sampled_from([[np.inf], [-np.inf], [1 + 1j], {0: 1}]),
    st.lists(non_binary, min_size=1, max_size=4).map(lambda x: [1, *x]),
)


@given(reports=bad_reports)
def test_binary_estimators_reject_bad_reports(reports: Any) -> None:
    _raises_naming("reports", rr_share, reports, BINARY)
    _raises_naming("reports", rr_count, reports, BINARY)


bad_level = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 0.0, 1.0, "0.95", None, True]),
                      st.floats(min_value=1.0), st.floats(max_value=0.0))


@given(level=bad_level)
def test_every_estimator_rejects_a_bad_level(level: Any) -> None:
    _raises_naming("level", rr_share, [0, 1, 1], BINARY, level=level)
    _raises_naming("level", rr_count, [0, 1, 1], BINARY, level=level)
    _raises_naming("level", rr_share_from_counts, 1, 3, BINARY, level=level)
    _raises_naming("level", krr_counts, ["a", "b"], KRR, level=level)
    _raises_naming("level", ldp_mean, [0.2, 0.5], BOUNDED, level=level)


@given(n=st.one_of(st.integers(max_value=0), st.sampled_from([1.5, math.nan, math.inf, "3", None, True])))
def test_share_from_counts_rejects_bad_n(n: Any) -> None:
    _raises_naming("n", rr_share_from_counts, 0, n, BINARY)


@given(yes=st.one_of(st.integers(max_value=-1), st.integers(min_value=11),
                     st.sampled_from([0.5, math.nan, math.inf, "1", None, [], [1, np.nan], [[1], [2, 3]]])))
def test_share_from_counts_rejects_bad_counts(yes: Any) -> None:
    _raises_naming("yes", rr_share_from_counts, yes, 10, BINARY)


@given(counts=st.one_of(st.lists(st.integers(0, 9), min_size=0, max_size=5).filter(lambda c: len(c) != 3),
                        st.sampled_from([[0, 0, 0], [1, -1, 2], [1.5, 1, 1], [1, np.nan, 2], [[1, 2, 3]]])))
def test_krr_from_tally_rejects_bad_counts(counts: Any) -> None:
    _raises_naming("counts", krr_counts_from_tally, counts, KRR)


@given(mechanism=st.sampled_from([None, "rr", 1.0, KRR, BINARY, Laplace(epsilon=1.0, sensitivity=1.0)]))
def test_estimators_reject_the_wrong_mechanism(mechanism: Any) -> None:
    if not isinstance(mechanism, BinaryRandomizedResponse):
        _raises_naming("mechanism", rr_share, [0, 1], mechanism)
        _raises_naming("mechanism", rr_count, [0, 1], mechanism)
        _raises_naming("mechanism", rr_share_from_counts, 1, 2, mechanism)
    if not isinstance(mechanism, KRandomizedResponse):
        _raises_naming("mechanism", krr_counts, ["a"], mechanism)
        _raises_naming("mechanism", krr_counts_from_tally, [1, 2, 3], mechanism)
    _raises_naming("mechanism", ldp_mean, [0.5], mechanism)


def test_other_bad_arguments() -> None:
    _raises_naming("reports", krr_counts, ["a", "zz"], KRR)
    _raises_naming("reports", krr_counts, [], KRR)
    _raises_naming("axis", rr_share, [[0, 1]], BINARY, axis=2)
    _raises_naming("axis", rr_share, [[0, 1]], BINARY, axis=True)
    _raises_naming("axis", rr_share, [[0, 1]], BINARY, axis="0")
    _raises_naming("reports", ldp_mean, [0.5, 1.5], BOUNDED)
    _raises_naming("reports", ldp_mean, [np.nan], BOUNDED)
    _raises_naming("reports", ldp_mean, [], BOUNDED)
    _raises_naming("grid", ldp_mean, [0.5], BOUNDED, grid=2)


@given(yes=st.integers(0, 50), n_extra=st.integers(0, 50), epsilon=st.floats(1e-6, 30.0))
def test_estimates_are_always_finite(yes: int, n_extra: int, epsilon: float) -> None:
    n = yes + n_extra if yes + n_extra > 0 else 1
    for variant in ("spinner", "spinner_coin"):
        est = rr_share_from_counts(yes, n, BinaryRandomizedResponse(epsilon=epsilon, variant=variant))
        fields = [est.value, est.variance, est.ci_low, est.ci_high]
        assert all(math.isfinite(v) for v in fields)
        assert est.ci_low <= est.ci_high


def test_ldp_mean_single_report_has_an_infinite_not_nan_variance() -> None:
    est = ldp_mean([0.4], BOUNDED)
    assert est.variance == math.inf
    assert (est.ci_low, est.ci_high) == (0.0, 1.0)
    assert not any(math.isnan(v) for v in (est.value, est.variance, est.ci_low, est.ci_high))


def test_root_finding_reference() -> None:
    # ldp_mean's inversion agrees with a root found here from the pdf alone
    m = BoundedLaplace(epsilon=0.5, lower=2.0, upper=5.0)
    target = 3.45
    theta = optimize.brentq(lambda t: _mean_output_by_quadrature(m, t) - target, 2.0, 5.0, xtol=1e-12)
    assert ldp_mean(np.full(10, target), m).value == pytest.approx(theta, abs=1e-8)
    # a mean report beyond E[Y | lower] (about 3.376 here) maps to the end of the range
    assert _mean_output_by_quadrature(m, 2.0) > 3.3
    assert ldp_mean(np.full(10, 3.3), m).value == 2.0
    assert ldp_mean(np.full(10, 3.7), m).value == 5.0


# ---------------------------------------------------------------------------------------------------------
# Counts of fixed respondents: the variance is the mechanism's alone
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.2, math.log(3.0), 3.0])
@pytest.mark.parametrize("variant", ["spinner", "spinner_coin"])
@pytest.mark.parametrize("n_yes", [0, 13, 40])
def test_rr_count_variance_is_the_exact_variance_for_these_respondents(
    epsilon: float, variant: str, n_yes: int
) -> None:
    n = 40
    m = BinaryRandomizedResponse(epsilon=epsilon, variant=variant)
    p = literal_p_spinner(epsilon)  # P(report = truth), from the definition
    law = report_distribution_fixed(n_yes, n, p, 1 - p)
    ones = [np.r_[np.ones(yes), np.zeros(n - yes)] for yes in range(n + 1)]
    estimates = [rr_count(row, m) for row in ones]
    values = np.array([float(e.value) for e in estimates])
    exact_var = float(law @ (values - n_yes) ** 2)  # summed over the exact law of the reports
    bernoulli = (n_yes * p * (1 - p) + (n - n_yes) * (1 - p) * p) / (2 * p - 1) ** 2  # Σ Bernoulli variances
    assert exact_var == pytest.approx(bernoulli, rel=1e-9)
    for estimate in estimates:  # the same whatever the reports: exact, not a plug-in
        assert float(estimate.variance) == pytest.approx(exact_var, rel=1e-9)


def test_rr_count_of_300_yes_among_1000_has_variance_750_not_960() -> None:
    m = BinaryRandomizedResponse(epsilon=math.log(3.0))  # p_t = 3/4, q = 1/4, p_t − q = 1/2
    reports = np.r_[np.ones(400), np.zeros(600)]  # λ̂ = 0.4 = q + (p_t − q)·0.3: the estimate is 300
    estimate = rr_count(reports, m)
    assert float(estimate.value) == pytest.approx(300.0)
    assert float(estimate.variance) == pytest.approx(1000 * (3 / 4) * (1 / 4) / (1 / 2) ** 2)  # 750
    population = 1000 * 0.4 * 0.6 / (1 / 2) ** 2  # Wang et al.'s variance for sampled respondents: 960
    assert population - float(estimate.variance) == pytest.approx(1000 * 0.3 * 0.7)  # N·f(1 − f)


def test_rr_count_variance_and_interval_by_simulation_for_fixed_respondents() -> None:
    sims, n, n_yes = 4000, 1000, 300
    m = BinaryRandomizedResponse(epsilon=math.log(3.0))
    truth = np.r_[np.ones(n_yes, dtype=bool), np.zeros(n - n_yes, dtype=bool)]
    reports = m.randomize(np.broadcast_to(truth, (sims, n)), rng=secure_rng(23))
    estimate = rr_count(reports, m, axis=1)
    values = np.asarray(estimate.value)
    assert abs(values.mean() - n_yes) < 4 * math.sqrt(750 / sims)
    # the sample variance of 4000 draws lies within its chi-square 99.9% band around the stated 750
    low, high = stats.chi2.ppf([0.0005, 0.9995], sims - 1) / (sims - 1)
    assert 750 * low <= values.var(ddof=1) <= 750 * high
    np.testing.assert_allclose(estimate.variance, 750.0, rtol=1e-12)
    hits = int(np.count_nonzero((estimate.ci_low <= n_yes) & (n_yes <= estimate.ci_high)))
    lo, hi = _coverage_bounds(hits, sims)
    assert lo <= 0.95 <= hi, hits / sims


@pytest.mark.parametrize("n_v", [0, 9, 25])
def test_krr_count_variance_is_the_exact_variance_for_these_respondents(n_v: int) -> None:
    total, k, epsilon = 25, 4, 1.1
    m = KRandomizedResponse(epsilon=epsilon, categories=["a", "b", "c", "d"])
    e = math.exp(epsilon)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    law = report_distribution_fixed(n_v, total, p, q)  # N_a: n_v reports at p plus the others at q
    estimates = [krr_counts_from_tally([c, total - c, 0, 0], m)["a"] for c in range(total + 1)]
    values = np.array([float(x.value) for x in estimates])
    variances = np.array([float(x.variance) for x in estimates])
    exact_var = float(law @ (values - n_v) ** 2)
    assert float(law @ values) == pytest.approx(n_v, abs=1e-9)
    assert exact_var == pytest.approx((n_v * p * (1 - p) + (total - n_v) * q * (1 - q)) / (p - q) ** 2)
    inside = (values >= 0) & (values <= total)  # unclipped: the variance is linear in the estimate
    unclipped = ((values * (p * (1 - p)) + (total - values) * (q * (1 - q))) / (p - q) ** 2)[inside]
    np.testing.assert_allclose(variances[inside], unclipped, rtol=1e-12)
    assert np.all(variances > 0)
