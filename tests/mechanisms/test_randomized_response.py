"""Binary and k-ary randomized response against their definitions and worked examples."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import optimize, stats

from dp_pipeline import InvalidParameterError, PrivacyEvent, PureDP
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    KRandomizedResponse,
    fast_rng,
    sampling,
    secure_rng,
)
from tests.mechanisms.empirical import assert_empirically_dp, max_certified_ratio, seeded

EPSILONS = [0.05, 0.5, 1.0, math.log(3.0), 2.0, 5.0, 12.0]


# ---------------------------------------------------------------------------------------------------------
# Independent reference: p solved from the defining likelihood ratio, never from the class's formulas
# ---------------------------------------------------------------------------------------------------------


def solve_p(ratio_minus_target: Any) -> float:
    """Root in (0, 1) of the defining equation, by bracketing; tight tolerances."""
    return float(optimize.brentq(ratio_minus_target, 1e-15, 1.0 - 1e-15, xtol=1e-17, rtol=1e-15, maxiter=500))


def reference_spinner_p(epsilon: float) -> float:
    """Spinner only: P(yes | yes)/P(yes | no) = p/(1 − p) = e^ε; solve in log form."""
    return solve_p(lambda p: math.log(p) - math.log1p(-p) - epsilon)


def reference_coin_p(epsilon: float) -> float:
    """Spinner + coin: (p + (1 − p)/2)/((1 − p)/2) = e^ε."""
    return solve_p(lambda p: math.log(p + (1 - p) / 2) - math.log((1 - p) / 2) - epsilon)


def reference_krr_p(epsilon: float, k: int) -> float:
    """k-RR: p/q = e^ε with q = (1 − p)/(k − 1)."""
    return solve_p(lambda p: math.log(p) - math.log((1 - p) / (k - 1)) - epsilon)


def literal_binary_pmf(variant: str, epsilon: float) -> np.ndarray:
    """P(report y | truth t) as the variant's story tells it, indexed [y, t]."""
    out = np.empty((2, 2))
    for y, t in itertools.product((0, 1), repeat=2):
        if variant == "spinner":
            p = reference_spinner_p(epsilon)
            out[y, t] = p if y == t else 1 - p  # truth, else the opposite
        else:
            p = reference_coin_p(epsilon)
            out[y, t] = p * (y == t) + (1 - p) * 0.5  # truth, else a fair coin
    return out


# ---------------------------------------------------------------------------------------------------------
# Probabilities and exact privacy
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_binary_p_solves_the_defining_equation(epsilon: float) -> None:
    spinner = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner")
    coin = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner_coin")
    assert spinner.p == pytest.approx(reference_spinner_p(epsilon), rel=1e-12)
    assert coin.p == pytest.approx(reference_coin_p(epsilon), rel=1e-12)
    for variant, m in (("spinner", spinner), ("spinner_coin", coin)):
        # 1 − p loses digits when p is near 1 (ε = 12), hence 1e-10
        pmf = m.pmf([[0, 0], [1, 1]], [[0, 1], [0, 1]])
        np.testing.assert_allclose(pmf, literal_binary_pmf(variant, epsilon), rtol=1e-10)


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("k", [2, 3, 7, 50])
def test_krr_p_and_q_solve_the_defining_equation(epsilon: float, k: int) -> None:
    m = KRandomizedResponse(epsilon=epsilon, categories=list(range(k)))
    p = reference_krr_p(epsilon, k)
    assert m.p == pytest.approx(p, rel=1e-12)
    assert m.q == pytest.approx((1 - p) / (k - 1), rel=1e-10)
    assert m.p + (k - 1) * m.q == pytest.approx(1.0, rel=1e-14)
    assert m.p_minus_q == pytest.approx(m.p - m.q, rel=1e-12, abs=1e-300)


def _max_ratio(pmf: np.ndarray) -> tuple[float, float]:
    """Largest and smallest pmf[y, t]/pmf[y, t'] over all y and t ≠ t'."""
    k = pmf.shape[1]
    ratios = [pmf[:, t] / pmf[:, s] for t in range(k) for s in range(k) if t != s]
    return float(np.max(ratios)), float(np.min(ratios))


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("variant", ["spinner", "spinner_coin"])
def test_binary_pmf_ratio_is_exactly_exp_epsilon(epsilon: float, variant: str) -> None:
    m = BinaryRandomizedResponse(epsilon=epsilon, variant=variant)
    pmf = np.array([[m.pmf(y, t) for t in (0, 1)] for y in (0, 1)])
    np.testing.assert_allclose(pmf.sum(axis=0), 1.0, rtol=1e-15)
    high, low = _max_ratio(pmf)
    assert high == pytest.approx(math.exp(epsilon), rel=1e-12)
    assert low == pytest.approx(math.exp(-epsilon), rel=1e-12)
    assert m.guarantee == PureDP(epsilon)
    # booleans and 0/1 mean the same
    assert m.pmf(True, False) == m.pmf(1, 0)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0, 9.0])
@pytest.mark.parametrize("k", [2, 3, 5, 16])
def test_krr_pmf_ratio_is_exactly_exp_epsilon(epsilon: float, k: int) -> None:
    categories = [f"c{i}" for i in range(k)]
    m = KRandomizedResponse(epsilon=epsilon, categories=categories)
    y, t = np.meshgrid(np.array(categories, dtype=object), np.array(categories, dtype=object), indexing="ij")
    pmf = m.pmf(y, t)
    assert pmf.shape == (k, k)
    np.testing.assert_allclose(pmf.sum(axis=0), 1.0, rtol=1e-14)
    high, low = _max_ratio(pmf)
    assert high == pytest.approx(math.exp(epsilon), rel=1e-12)
    assert low == pytest.approx(math.exp(-epsilon), rel=1e-12)
    assert m.guarantee == PureDP(epsilon)


def test_both_binary_variants_are_the_same_output_distribution() -> None:
    for epsilon in EPSILONS:
        a = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner")
        b = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner_coin")
        assert a.p != b.p
        assert a.p_true == pytest.approx(b.p + (1 - b.p) / 2, rel=1e-14)
        assert a.event == b.event


def test_extreme_epsilon_stays_finite() -> None:
    tiny = BinaryRandomizedResponse(epsilon=1e-12, variant="spinner_coin")
    assert tiny.p == pytest.approx(5e-13, rel=1e-9)  # tanh(ε/2) without cancellation
    huge = KRandomizedResponse(epsilon=5000.0, categories=["a", "b", "c"])
    assert (huge.p, huge.q) == (1.0, 0.0)
    assert huge.randomize(["a", "b", "c"], rng=secure_rng(0)).tolist() == ["a", "b", "c"]
    small = KRandomizedResponse(epsilon=1e-10, categories=list(range(4)))
    assert small.p_minus_q == pytest.approx(1e-10 / 4, rel=1e-6)
    assert all(math.isfinite(v) for v in small.event.parameters.values() if isinstance(v, float))


# ---------------------------------------------------------------------------------------------------------
# Worked examples (k-RR with two and three answers; the truth-or-coin design of Dwork & Roth, Sec. 3.2)
# ---------------------------------------------------------------------------------------------------------


def test_two_answer_example_p_75_q_25() -> None:
    # "어제 운동을 하셨나요?" (k = 2): the true answer with p = 75%, the other with q = 25%; p/q = e^ε.
    m = KRandomizedResponse(epsilon=math.log(0.75 / 0.25), categories=["예", "아니오"])
    assert m.p == pytest.approx(0.75, rel=1e-14)
    assert m.q == pytest.approx(0.25, rel=1e-14)
    assert m.p + (m.k - 1) * m.q == pytest.approx(1.0)


def test_three_answers_a_b_c() -> None:
    # 'A', 'B', 'C' (k = 3), truth 'A': 'A' with p, 'B' or 'C' with q each, p + 2q = 1, p/q = e^ε.
    epsilon = 1.0
    m = KRandomizedResponse(epsilon=epsilon, categories=["A", "B", "C"])
    assert m.pmf("A", "A") == pytest.approx(math.e / (math.e + 2), rel=1e-14)
    assert m.pmf("B", "A") == m.pmf("C", "A") == pytest.approx(1 / (math.e + 2), rel=1e-14)
    assert m.pmf("A", "A") + m.pmf("B", "A") + m.pmf("C", "A") == pytest.approx(1.0)


def test_count_relation_inverts_exactly() -> None:
    # N_v = p n_v + q (N − n_v) solved for n_v gives n_v = (N_v − qN)/(p − q). With k = 3 and ε = ln 3,
    # p = 3/5 and q = 1/5, so the expected report counts are whole numbers.
    m = KRandomizedResponse(epsilon=math.log(3.0), categories=["A", "B", "C"])
    assert (m.p, m.q) == (pytest.approx(0.6, rel=1e-14), pytest.approx(0.2, rel=1e-14))
    true_counts = {"A": 5_000, "B": 3_000, "C": 2_000}
    reported = {v: 0.6 * n + 0.2 * (10_000 - n) for v, n in true_counts.items()}
    assert reported == {"A": 4_000, "B": 3_200, "C": 2_800}
    reports = np.repeat(list(reported), [int(reported[v]) for v in reported])
    estimates = m.estimate_counts(reports)
    assert list(estimates) == ["A", "B", "C"]
    for v, n in true_counts.items():
        assert estimates[v] == pytest.approx(n, rel=1e-12)


def test_coin_variant_at_p_one_half_is_ln3() -> None:
    # P(yes | yes) = p + (1 − p)/2 = 3/4, P(yes | no) = 1/4 for p = 1/2: ratio 3 = e^ε.
    m = BinaryRandomizedResponse(epsilon=math.log(3.0), variant="spinner_coin")
    assert m.p == pytest.approx(0.5, rel=1e-14)
    assert m.pmf(1, 1) == pytest.approx(0.75, rel=1e-14)
    assert m.pmf(1, 0) == pytest.approx(0.25, rel=1e-14)
    assert BinaryRandomizedResponse(epsilon=math.log(3.0), variant="spinner").p == pytest.approx(0.75)


# ---------------------------------------------------------------------------------------------------------
# Events, guarantees, multiple choice
# ---------------------------------------------------------------------------------------------------------


def test_events_carry_the_parameters_the_accountant_reads() -> None:
    b = BinaryRandomizedResponse(epsilon=1.3, variant="spinner_coin")
    ev = b.event
    assert ev.kind == "randomized_response"
    assert ev.sensitivity is None
    assert set(ev.parameters) == {"categories", "p_true", "p_other"}
    assert ev.parameters["categories"] == 2
    assert ev.parameters["p_true"] == pytest.approx(b.pmf(1, 1))
    assert ev.parameters["p_other"] == pytest.approx(b.pmf(0, 1))
    assert ev.guarantee == PureDP(1.3)
    assert PrivacyEvent.from_dict(ev.to_dict()) == ev

    k = KRandomizedResponse(epsilon=0.7, categories=("x", 2, (3, 4)))
    ev = k.event
    assert ev.parameters == {"categories": 3, "p_true": k.p, "p_other": k.q}
    assert ev.parameters["p_true"] / ev.parameters["p_other"] == pytest.approx(math.exp(0.7))
    assert PrivacyEvent.from_dict(ev.to_dict()) == ev


@pytest.mark.parametrize("changed", [1, 2, 3])
def test_multiple_choice_cost_is_the_worst_ratio_over_items(changed: int) -> None:
    epsilon, items = 0.6, 3
    m = BinaryRandomizedResponse(epsilon=epsilon)
    answers = list(itertools.product((0, 1), repeat=items))
    worst = 0.0
    for a, b in itertools.product(answers, repeat=2):
        if sum(x != y for x, y in zip(a, b, strict=True)) > changed:
            continue
        for report in answers:  # reports are answers too: m bits
            pa = math.prod(m.pmf(r, x) for r, x in zip(report, a, strict=True))
            pb = math.prod(m.pmf(r, x) for r, x in zip(report, b, strict=True))
            worst = max(worst, pa / pb)
    claimed = m.multiple_choice_guarantee(changed).epsilon  # cε rounded up: never below the exact product
    assert Fraction(math.nextafter(claimed, 0.0)) < changed * Fraction(epsilon) <= Fraction(claimed)
    assert math.log(worst) == pytest.approx(m.multiple_choice_guarantee(changed).epsilon, rel=1e-12)
    with pytest.raises(InvalidParameterError, match="changed_items"):
        m.multiple_choice_guarantee(0)


def test_models_are_frozen_hashable_and_compare_by_value() -> None:
    a = KRandomizedResponse(epsilon=1.0, categories=["a", "b"])
    b = KRandomizedResponse(epsilon=1.0, categories=("a", "b"))
    a.randomize(["a"], rng=secure_rng(0))  # fills the caches; equality must not depend on them
    assert a == b and hash(a) == hash(b)
    assert isinstance(a.categories, tuple)
    with pytest.raises(Exception):  # noqa: B017  (pydantic's frozen-instance error)
        a.epsilon = 2.0  # type: ignore[misc]
    assert KRandomizedResponse(epsilon=1.0, categories=np.array([3, 1, 2])).categories == (3, 1, 2)
    assert type(KRandomizedResponse(epsilon=1.0, categories=np.array([3, 1])).categories[0]) is int


# ---------------------------------------------------------------------------------------------------------
# randomize: shapes, dtypes, types of categories
# ---------------------------------------------------------------------------------------------------------


def test_binary_randomize_keeps_shape_and_dtype() -> None:
    m = BinaryRandomizedResponse(epsilon=1.0)
    for values in (np.array([[True, False], [False, True]]), np.array([0, 1, 1], dtype=np.int8),
                   np.array([0.0, 1.0]), np.zeros((2, 3, 4), dtype=np.uint16)):
        out = m.randomize(values, rng=secure_rng(5))
        assert out.shape == values.shape and out.dtype == values.dtype
        assert set(np.unique(out).tolist()) <= {0, 1}
    assert isinstance(m.randomize(True, rng=secure_rng(1)), bool)
    assert isinstance(m.randomize(1, rng=secure_rng(1)), int)
    out = m.randomize(pd.Series([True, False, True]), rng=secure_rng(2))
    assert isinstance(out, np.ndarray) and out.dtype == bool
    again = m.randomize([0, 1] * 50, rng=secure_rng(9))
    np.testing.assert_array_equal(m.randomize([0, 1] * 50, rng=secure_rng(9)), again)


def test_krr_randomize_handles_any_hashable_categories() -> None:
    strings = KRandomizedResponse(epsilon=1.0, categories=["a", "b", "c"])
    out = strings.randomize(np.array([["a", "b"], ["c", "a"]]), rng=secure_rng(1))
    assert out.shape == (2, 2) and set(out.ravel().tolist()) <= {"a", "b", "c"}
    assert out.dtype.kind == "U"
    assert strings.randomize("a", rng=secure_rng(1)) in {"a", "b", "c"}
    series = strings.randomize(pd.Series(["a", "b", "c", "a"]), rng=secure_rng(2))
    assert series.shape == (4,)

    ints = KRandomizedResponse(epsilon=1.0, categories=[10, 20, 30])
    assert ints.randomize([[10, 20, 30]], rng=secure_rng(3)).dtype == np.int64
    assert ints.randomize(np.int64(20), rng=secure_rng(3)) in {10, 20, 30}

    mixed = KRandomizedResponse(epsilon=1.0, categories=["a", 1, (2, 3), None, 2.5])
    values = ["a", 1, (2, 3), None, 2.5, (2, 3)]
    out = mixed.randomize(values, rng=secure_rng(4))
    assert out.shape == (6,) and out.dtype == object
    assert all(v in mixed.categories for v in out)
    assert mixed.randomize((2, 3), rng=secure_rng(4)) in mixed.categories
    # huge ε: the report is the truth, whatever its type
    exact = KRandomizedResponse(epsilon=800.0, categories=["a", 1, (2, 3), None, 2.5])
    assert exact.randomize(values, rng=secure_rng(0)).tolist() == values


# ---------------------------------------------------------------------------------------------------------
# Empirical privacy and goodness of fit (≥ 10⁶ reports per input)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["spinner", "spinner_coin"])
def test_binary_empirical_ratio_within_exp_epsilon(variant: str) -> None:
    epsilon = 1.0
    m = BinaryRandomizedResponse(epsilon=epsilon, variant=variant)
    ratio = assert_empirically_dp(seeded(m), 0.0, 1.0, epsilon, bins=None)
    assert ratio > 0.97 * math.exp(epsilon)  # the check has power: it certifies close to e^ε
    leaky = BinaryRandomizedResponse(epsilon=1.12, variant=variant)  # a larger p than ε = 1 allows
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(seeded(leaky), 0.0, 1.0, epsilon, bins=None)


@pytest.mark.slow
def test_krr_empirical_ratio_within_exp_epsilon() -> None:
    epsilon, k = 1.0, 4
    categories = np.array(["w", "x", "y", "z"])
    m = KRandomizedResponse(epsilon=epsilon, categories=categories)
    leaky = KRandomizedResponse(epsilon=1.12, categories=categories)

    def release(mech: KRandomizedResponse) -> Any:
        def run(v: np.ndarray, seed: int) -> np.ndarray:
            codes = mech.randomize(categories[v.astype(int)], rng=secure_rng(seed))
            return np.searchsorted(categories, codes)
        return run

    n = 1_000_000
    out_a, out_b = release(m)(np.zeros(n), 11), release(m)(np.ones(n), 12)
    assert set(np.unique(out_a).tolist()) == set(range(k))
    ratio = max_certified_ratio(out_a, out_b)
    assert ratio <= math.exp(epsilon)
    assert ratio > 0.97 * math.exp(epsilon)
    with pytest.raises(AssertionError, match="exceeds"):
        assert_empirically_dp(release(leaky), 0.0, 1.0, epsilon, bins=None)


@pytest.mark.slow
def test_randomize_frequencies_fit_the_pmf() -> None:
    n = 1_000_000
    rng = np.random.default_rng(2024)
    # k-RR with 5 categories and a skewed mixture of true values
    categories = ["a", "b", "c", "d", "e"]
    m = KRandomizedResponse(epsilon=0.8, categories=categories)
    truth = rng.choice(5, size=n, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    reports = m.randomize(np.array(categories, dtype=object)[truth], rng=secure_rng(7))
    observed = np.array([np.count_nonzero(reports == c) for c in categories])
    true_counts = np.bincount(truth, minlength=5)
    column = np.array(categories, dtype=object)[:, None]
    pmf = m.pmf(column, column.T)  # [y, t]
    assert stats.chisquare(observed, pmf @ true_counts).pvalue > 1e-3
    # power: the same counts reject a pmf with slightly larger ε
    other_pmf = KRandomizedResponse(epsilon=0.84, categories=categories).pmf(column, column.T)
    assert stats.chisquare(observed, other_pmf @ true_counts).pvalue < 1e-6

    # binary RR, both variants, per truth value
    for variant in ("spinner", "spinner_coin"):
        b = BinaryRandomizedResponse(epsilon=0.5, variant=variant)
        for t in (0, 1):
            out = b.randomize(np.full(n, t, dtype=np.int8), rng=secure_rng(10 + t))
            counts = np.array([np.count_nonzero(out == 0), np.count_nonzero(out == 1)])
            expected = n * np.array([b.pmf(0, t), b.pmf(1, t)])
            assert stats.chisquare(counts, expected).pvalue > 1e-3
            wrong = n * np.array([BinaryRandomizedResponse(epsilon=0.53).pmf(y, t) for y in (0, 1)])
            assert stats.chisquare(counts, wrong).pvalue < 1e-6


class _GridDraws:
    """A unit stand-in for the fast path's generator: every uniform draw is the grid point i·2⁻⁵³ and every
    bounded integer is 1, so the threshold the sampler compares with can be read off exactly."""

    def __init__(self, index: int) -> None:
        self.index = index

    def random(self, size: Any) -> np.ndarray:
        return np.full(size, self.index / 2.0**53)

    def integers(self, low: int, high: int, size: Any, dtype: Any) -> np.ndarray:
        return np.full(size, 1, dtype=dtype)


def _replaced_mass(epsilon: float, k: int) -> Fraction:
    """P(the truth is replaced) on the fast path: the number of 2⁻⁵³ grid draws that replace it (they are
    the draws below a threshold: found by bisection), times 2⁻⁵³."""
    lo, hi = 0, 2**53  # draw lo replaces the truth, draw hi does not
    assert sampling.randomized_response_offsets(_GridDraws(lo), epsilon, k, (1,))[0] != 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if sampling.randomized_response_offsets(_GridDraws(mid), epsilon, k, (1,))[0] != 0:
            lo = mid
        else:
            hi = mid
    return Fraction(hi, 2**53)


@pytest.mark.parametrize("k", [2, 3, 10, 1000])
@pytest.mark.parametrize("epsilon", [1e-9, 0.01, 0.5, 3.0, 30.0, 36.0, 37.0, 100.0, 800.0])
def test_fast_path_ratios_are_at_most_exp_epsilon_for_every_epsilon(epsilon: float, k: int) -> None:
    """The fast path's exact output probabilities, read off its threshold on the 2⁻⁵³ grid, against mpmath:
    each other report is at least q and the truth at most p, so p_eff/q_eff ≤ e^ε (a threshold on p
    rounded p to 1 from ε ≈ 36.7 on: the truth was always reported, an infinite loss), and no other
    report is likelier than the truth."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    replaced = _replaced_mass(epsilon, k)
    q_eff = mpmath.mpf(replaced.numerator) / replaced.denominator / (k - 1)
    p_eff = 1 - q_eff * (k - 1)
    q_true = 1 / (mpmath.exp(mpmath.mpf(epsilon)) + k - 1)
    assert q_eff >= q_true
    assert p_eff / q_eff <= mpmath.exp(mpmath.mpf(epsilon))
    assert q_eff <= p_eff
    # and tight: at most one grid step and the 1e-12 margin above the exact mass
    assert q_eff * (k - 1) <= q_true * (k - 1) * (1 + mpmath.mpf("1e-11")) + mpmath.mpf(2) ** -53


def test_fast_path_frequencies_fit_the_pmf() -> None:
    n, epsilon = 200_000, 0.7
    m = KRandomizedResponse(epsilon=epsilon, categories=["a", "b", "c", "d"])
    reports = m.randomize(np.array(["b"] * n, dtype=object), rng=fast_rng(5))
    observed = np.array([np.count_nonzero(reports == c) for c in ["a", "b", "c", "d"]])
    assert stats.chisquare(observed, n * np.array([m.q, m.p, m.q, m.q])).pvalue > 1e-4
    b = BinaryRandomizedResponse(epsilon=epsilon)
    flips = int(np.count_nonzero(b.randomize(np.zeros(n, dtype=np.int8), rng=fast_rng(6))))
    assert stats.binomtest(flips, n, b.p_other).pvalue > 1e-4
    assert stats.binomtest(flips, n, BinaryRandomizedResponse(epsilon=0.75).p_other).pvalue < 1e-6


# ---------------------------------------------------------------------------------------------------------
# Bad input: InvalidParameterError naming the parameter, never a numpy traceback or a silent NaN
# ---------------------------------------------------------------------------------------------------------

bad_epsilon = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, "1.0", None, True, [1.0], 1 + 1j]),
    st.floats(max_value=0.0, allow_nan=False),
)


def _raises_naming(name: str, call: Any, *args: Any, **kwargs: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call(*args, **kwargs)
    assert info.value.parameter == name
    assert name in str(info.value)


@given(epsilon=bad_epsilon)
def test_constructors_reject_bad_epsilon(epsilon: Any) -> None:
    _raises_naming("epsilon", BinaryRandomizedResponse, epsilon=epsilon)
    _raises_naming("epsilon", KRandomizedResponse, epsilon=epsilon, categories=["a", "b"])


@given(variant=st.one_of(st.text().filter(lambda s: s not in ("spinner", "spinner_coin")), st.integers(),
                         st.none()))
def test_binary_rejects_unknown_variant(variant: Any) -> None:
    _raises_naming("variant", BinaryRandomizedResponse, epsilon=1.0, variant=variant)


hashables = st.one_of(
    st.integers(-5, 5), st.text(max_size=3), st.tuples(st.integers(0, 2), st.integers(0, 2))
)
bad_categories = st.one_of(
    st.lists(hashables, max_size=1),  # fewer than 2
    st.lists(hashables, min_size=1, max_size=5).map(lambda xs: [*xs, xs[0]]),  # a duplicate
    st.lists(hashables, min_size=2, max_size=4, unique=True).map(lambda xs: [*xs, [1, 2]]),  # unhashable
    st.lists(hashables, min_size=2, max_size=4, unique=True).map(lambda xs: [*xs, {"a": 1}]),
    st.lists(hashables, min_size=2, max_size=4, unique=True).map(lambda xs: [*xs, math.nan]),  # NaN
    st.sampled_from(["abc", b"ab", 3, 2.5, None, {1, 2}, {"a": 1, "b": 2}, np.array([[1, 2], [3, 4]])]),
)


@given(categories=bad_categories)
def test_krr_rejects_bad_categories(categories: Any) -> None:
    _raises_naming("categories", KRandomizedResponse, epsilon=1.0, categories=categories)


def test_krr_accepts_equal_looking_but_distinct_categories() -> None:
    assert KRandomizedResponse(epsilon=1.0, categories=["1", 1, (1,)]).k == 3
    _raises_naming("categories", KRandomizedResponse, epsilon=1.0, categories=[1, 1.0])
    _raises_naming("categories", KRandomizedResponse, epsilon=1.0, categories=[True, 1])


bad_binary_values = st.one_of(
    st.lists(st.floats().filter(lambda x: x not in (0.0, 1.0)), min_size=1, max_size=5).map(
        lambda xs: [0, *xs]
    ),
    st.lists(st.integers().filter(lambda x: x not in (0, 1)), min_size=1, max_size=5),
    st.lists(st.text(max_size=2), min_size=1, max_size=3),
    st.sampled_from([[], np.array([]), "1", b"0", None, [None], [[0, 1], [1]], [1 + 0j], {0: 1},
                     pd.Series([True, None], dtype="boolean"), np.array([0, 1], dtype=object)]),
)


@given(values=bad_binary_values)
def test_binary_randomize_and_pmf_reject_non_binary_input(values: Any) -> None:
    m = BinaryRandomizedResponse(epsilon=1.0)
    _raises_naming("values", m.randomize, values)
    _raises_naming("y", m.pmf, values, 0)
    _raises_naming("t", m.pmf, 1, values)


@given(values=st.lists(st.one_of(st.text(max_size=3).filter(lambda s: s not in ("a", "b")), st.floats(),
                                 st.integers(), st.none(), st.lists(st.integers(), max_size=2)),
                       min_size=1, max_size=5))
def test_krr_rejects_unknown_categories(values: Any) -> None:
    m = KRandomizedResponse(epsilon=1.0, categories=["a", "b"])
    _raises_naming("values", m.randomize, ["a", *values])
    _raises_naming("reports", m.estimate_counts, [*values, "b"])
    _raises_naming("t", m.pmf, "a", ["b", *values])


def test_krr_rejects_empty_and_counts_unknowns() -> None:
    m = KRandomizedResponse(epsilon=1.0, categories=["a", "b"])
    for empty in ([], np.array([]), pd.Series([], dtype=object)):
        _raises_naming("values", m.randomize, empty)
        _raises_naming("reports", m.estimate_counts, empty)
    with pytest.raises(InvalidParameterError, match=r"2 values are not among") as info:
        m.randomize(["a", "x", "y", "b"])
    assert "'x'" not in str(info.value)
    _raises_naming("values", m.randomize, ["a", ["b"], ["a", "b", "c"]])  # ragged
    _raises_naming("rng", m.randomize, ["a"], rng="seed")
    _raises_naming("rng", BinaryRandomizedResponse(epsilon=1.0).randomize, [1], rng=-1)


@given(values=st.lists(st.booleans(), min_size=1, max_size=50), epsilon=st.floats(1e-6, 50.0))
def test_binary_randomize_output_is_always_binary(values: list[bool], epsilon: float) -> None:
    m = BinaryRandomizedResponse(epsilon=epsilon, variant="spinner_coin")
    out = m.randomize(np.array(values, dtype=float), rng=secure_rng(0))
    assert out.shape == (len(values),)
    assert np.all((out == 0) | (out == 1))  # no NaN can pass this
