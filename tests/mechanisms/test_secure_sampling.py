"""The secure sampling path: randomness sources, the floating-point attack, exactness of every sampler."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dp_pipeline import InvalidParameterError, PrivacyLeakWarning
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    BoundedStaircase,
    FastGenerator,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
    fast_rng,
    sampling,
    secure_rng,
    staircase_cdf,
)
from dp_pipeline.mechanisms.sampling import _exact, _exponential, _gaussian, _laplace, _lattice, _staircase
from tests.mechanisms import samplers

# ----------------------------------------------------------------------------------------------------
# randomness sources


def test_default_and_seeded_generators_are_aes_counter() -> None:
    from randomgen import AESCounter

    assert isinstance(sampling.make_rng(None).bit_generator, AESCounter)
    assert isinstance(secure_rng(3).bit_generator, AESCounter)
    with pytest.warns(PrivacyLeakWarning, match=r"seeded noise: randomize\(rng=3\)"):
        assert isinstance(sampling.make_rng(3).bit_generator, AESCounter)
    own = np.random.default_rng(1)
    with pytest.warns(PrivacyLeakWarning, match="unlabelled randomness"):
        view = sampling.make_rng(own)
    assert view.bit_generator is own.bit_generator  # a view: drawing from it advances the caller's generator
    assert sampling.is_fast(fast_rng(1)) and not sampling.is_fast(own) and not sampling.is_fast(view)
    assert isinstance(fast_rng(1).bit_generator, np.random.PCG64)
    with pytest.raises(InvalidParameterError, match="seed"):
        fast_rng(-1)
    with pytest.raises(InvalidParameterError, match="seed"):
        secure_rng(True)


MECHANISMS = [
    Laplace(epsilon=1.0, sensitivity=1.0),
    Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0),
    Staircase(epsilon=1.0, sensitivity=1.0),
    BoundedLaplace(epsilon=1.0, lower=0.0, upper=1.0),
    BoundedStaircase(epsilon=1.0, lower=0.0, upper=1.0, gamma=0.3),
    BinaryRandomizedResponse(epsilon=1.0),
    KRandomizedResponse(epsilon=1.0, categories=[0, 1, 2]),
]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: type(m).__name__)
def test_a_bare_seed_or_generator_warns_on_every_mechanism_and_the_wrappers_do_not(mechanism: Any) -> None:
    values = np.array([0, 1, 1, 0] * 50)
    with pytest.warns(PrivacyLeakWarning, match=r"seeded noise: randomize\(rng=7\)") as caught:
        seeded = mechanism.randomize(values, rng=7)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    # the same noise as the labelled opt-in, which does not warn (warnings are errors in this suite)
    np.testing.assert_array_equal(seeded, mechanism.randomize(values, rng=secure_rng(7)))
    mechanism.randomize(values, rng=fast_rng(7))
    mechanism.randomize(values)
    with pytest.warns(PrivacyLeakWarning, match=r"randomize\(rng=<a numpy Generator>\)"):
        mechanism.randomize(values, rng=np.random.default_rng(7))


@pytest.mark.parametrize("copy_of", [copy.deepcopy, lambda g: pickle.loads(pickle.dumps(g))])
@pytest.mark.parametrize("make", [fast_rng, secure_rng])
def test_copies_of_a_labelled_generator_keep_their_label_and_state(make: Any, copy_of: Any) -> None:
    original = make(4)
    duplicate = copy_of(original)
    assert type(duplicate) is type(original)  # numpy's own pickling would drop the fast path's class
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    np.testing.assert_array_equal(m.randomize(np.zeros(50), duplicate), m.randomize(np.zeros(50), original))


def test_unseeded_noise_differs_and_seeded_noise_repeats() -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    x = np.zeros(1000)
    assert not np.array_equal(m.randomize(x), m.randomize(x))
    np.testing.assert_array_equal(m.randomize(x, rng=secure_rng(5)), m.randomize(x, rng=secure_rng(5)))
    np.testing.assert_array_equal(m.randomize(x, rng=fast_rng(5)), m.randomize(x, rng=fast_rng(5)))


def test_fast_path_is_numpy_textbook_noise() -> None:
    m = Laplace(epsilon=0.5, sensitivity=2.0)
    x = np.linspace(0.0, 1.0, 7)
    expected = x + np.random.Generator(np.random.PCG64(9)).laplace(0.0, m.scale, size=7)
    np.testing.assert_array_equal(m.randomize(x, rng=fast_rng(9)), expected)
    assert isinstance(fast_rng(9), FastGenerator)


# ----------------------------------------------------------------------------------------------------
# Mironov's attack: which floats can a sampler reach from a given input?


def _naive_noise(k: NDArray[np.int64], scale: float) -> NDArray[np.float64]:
    """Textbook inverse-CDF Laplace in float64 from U = k·2⁻⁵³: η = −b·sgn(U − ½)·ln(1 − 2|U − ½|)."""
    u = k.astype(np.float64) * 2.0**-53
    return np.where(u < 0.5, scale * np.log(2.0 * u), -scale * np.log(2.0 - 2.0 * u))


def _naive_release(t: float, scale: float, n: int, seed: int) -> NDArray[np.float64]:
    k = np.random.default_rng(seed).integers(1, 2**53, size=n)
    return t + _naive_noise(k, scale)


def _reachable_naive(y: NDArray[np.float64], t: float, scale: float) -> NDArray[np.bool_]:
    """Whether each y equals fl(t + η(k)) for some k: fl(t + η(k)) is non-decreasing in k, so a binary
    search for the least k with fl(t + η(k)) ≥ y decides it exactly."""
    lo = np.ones(y.size, dtype=np.int64)
    hi = np.full(y.size, 2**53 - 1, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        below = t + _naive_noise(mid, scale) < y
        lo = np.where(below, mid + 1, lo)
        hi = np.where(below, hi, mid)
    return t + _naive_noise(lo, scale) == y


def _distinguish(
    outputs: NDArray[np.float64], reachable_from_other: Callable[..., NDArray[np.bool_]]
) -> float:
    """The attack's advantage: the share of outputs that the neighbouring input cannot produce."""
    return float(np.mean(~reachable_from_other(outputs)))


def test_mironov_attack_breaks_textbook_laplace() -> None:
    scale, t, t_prime = 1.0, 0.0, 1.0
    outputs = _naive_release(t, scale, 4000, seed=1)
    # sanity: the check is exact, every output is reachable from its own input
    assert _reachable_naive(outputs[:500], t, scale).all()
    advantage = _distinguish(outputs, lambda y: _reachable_naive(y, t_prime, scale))
    # a sizeable share of outputs can only have come from t: for those the privacy loss is infinite
    assert advantage > 0.05


def _on_lattice(y: NDArray[np.float64], step: float) -> NDArray[np.bool_]:
    cells = y / step - 0.5
    return cells == np.round(cells)


@pytest.mark.parametrize("t", [0.0, 0.1, 1e-300, 123456.789])
def test_mironov_attack_fails_against_the_default_path(t: float) -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    step = m.lattice
    out_t = m.randomize(np.full(4000, t), rng=secure_rng(2))
    out_neighbour = m.randomize(np.full(4000, t + 1.0), rng=secure_rng(3))
    # every output of either input lies on the same fixed lattice λ(ℤ + ½), whose every point both inputs
    # reach with positive probability (the noise has full support): nothing is unreachable
    assert _on_lattice(out_t, step).all() and _on_lattice(out_neighbour, step).all()
    assert _distinguish(out_t, lambda y: _on_lattice(y, step)) == 0.0
    # and the textbook sampler fails the same lattice test: its floats depend on the input
    assert not _on_lattice(_naive_release(t, 1.0, 200, seed=4), step).all()


@pytest.mark.parametrize(
    "mechanism",
    [Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0), Staircase(epsilon=1.0, sensitivity=1.0)],
    ids=["gaussian", "staircase"],
)
def test_other_additive_mechanisms_release_on_a_fixed_lattice(mechanism: Gaussian | Staircase) -> None:
    step = 2.0 ** sampling.lattice_exponent(
        mechanism.sigma if isinstance(mechanism, Gaussian) else mechanism.sensitivity
    )
    for t in (0.0, 0.3, -7.25):
        assert _on_lattice(mechanism.randomize(np.full(2000, t), rng=secure_rng(5)), step).all()


def test_integer_queries_get_integer_noise() -> None:
    for m in (
        Laplace(epsilon=1.0, sensitivity=1.0),
        Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0),
        Staircase(epsilon=1.0, sensitivity=1.0),
    ):
        counts = np.array([3, 10, 0, 7], dtype=np.int32)
        out = m.randomize(counts, rng=secure_rng(1))
        assert out.dtype == np.int64 and out.shape == (4,)
        fast = m.randomize(counts, rng=fast_rng(1))
        assert fast.dtype == np.int64
        assert isinstance(m.randomize(4, rng=secure_rng(1)), int)
    with pytest.raises(InvalidParameterError, match="values"):
        Laplace(epsilon=1.0, sensitivity=1.0).randomize(np.array([2**63 - 1]))


def test_negative_inputs_mirror_positive_ones() -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    negative, positive = (
        m.randomize(np.full(50, -2.5), rng=secure_rng(8)),
        m.randomize(np.full(50, 2.5), rng=secure_rng(8)),
    )
    np.testing.assert_array_equal(negative, -positive)


def test_huge_inputs_are_released_exactly() -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    x = np.array([1e300, -3e20, 2.0**60])
    out = m.randomize(x, rng=secure_rng(1))
    assert np.all(np.abs(out - x) <= 1e-3 * np.abs(x))
    assert np.isfinite(m.randomize(np.array([1.7e308]), rng=secure_rng(1))).all()


# ----------------------------------------------------------------------------------------------------
# the certified exponential


def test_exp_neg_bounds_contain_the_exact_value() -> None:
    mpmath.mp.prec = 200
    rng = np.random.default_rng(0)
    a = np.concatenate(
        [
            rng.uniform(0, 1, 300),
            rng.uniform(0, 50, 300),
            rng.uniform(650, 750, 50),
            [0.0, 2.0**-40, 1 / 1024, 1.0, 699.999, 700.0, 5e-324],
        ]
    )
    lo, hi = sampling.exp_neg_bounds(a, a)
    for value, low, high in zip(a, lo, hi, strict=True):
        exact = mpmath.exp(-mpmath.mpf(float(value)))
        assert mpmath.mpf(float(low)) <= exact <= mpmath.mpf(float(high))
        if value < 690:
            assert (high - low) <= 2.0**-44 * float(exact)


def test_lazy_comparison_refines_a_straddling_prefix_with_the_right_probability() -> None:
    # a 64-bit prefix whose interval contains e^{-a}: the answer must come from further bits, and
    # P(W < e^{-a} | prefix) = frac(e^{-a}·2⁶⁴)
    a = Fraction(1, 3)
    mpmath.mp.prec = 200
    scaled = mpmath.exp(-mpmath.mpf(1) / 3) * 2**64
    prefix = int(mpmath.floor(scaled))
    expected = float(scaled - prefix)
    rng = secure_rng(11)
    hits = sum(_exact.below_exp(rng, _exact.LazyUniform(prefix), lambda: (a, a)) for _ in range(3000))
    assert stats.binomtest(hits, 3000, expected).pvalue > 1e-4


# ----------------------------------------------------------------------------------------------------
# exact samplers against their exact laws


def _chi_square(observed: NDArray[np.int64], probabilities: NDArray[np.float64]) -> float:
    """p-value of a chi-square test after pooling cells with expected count below 5."""
    n = observed.sum()
    expected = probabilities / probabilities.sum() * n
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] < 5:
        obs, exp = obs[:-1], exp[:-1]
        exp = exp / exp.sum() * obs.sum()
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("rate", [Fraction(1, 3), Fraction(3, 2), Fraction(1, 700)])
def test_geometric_matches_its_pmf(rate: Fraction) -> None:
    g = samplers.geometric_exact(secure_rng(1), rate, 100_000)
    q = math.exp(-float(rate))
    top = int(np.max(g)) + 1
    k = np.arange(top)
    pmf = (1 - q) * q**k
    pmf[-1] = q ** (top - 1)  # the last cell collects the tail
    assert _chi_square(np.bincount(np.minimum(g, top - 1), minlength=top), pmf) > 1e-4


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(5)])
def test_discrete_laplace_matches_its_pmf(scale: Fraction) -> None:
    z = samplers.discrete_laplace(secure_rng(2), scale, 100_000)
    q = math.exp(-1 / float(scale))
    k = np.arange(z.min(), z.max() + 1)
    pmf = (1 - q) / (1 + q) * q ** np.abs(k)
    assert _chi_square(np.bincount(z - z.min()), pmf) > 1e-4


@pytest.mark.parametrize("gamma", [0.0, 0.01, 0.7, 3.5, 40.0])
def test_bernoulli_exp_matches_its_probability(gamma: float) -> None:
    draws = samplers.bernoulli_exp(secure_rng(3), np.full(50_000, gamma))
    p = math.exp(-gamma)
    assert stats.binomtest(int(draws.sum()), draws.size, p).pvalue > 1e-4


@pytest.mark.parametrize(("epsilon", "k"), [(0.5, 2), (2.0, 2), (1.0, 5)])
def test_randomized_response_bernoulli_is_exact(epsilon: float, k: int) -> None:
    truth = sampling.truthful(secure_rng(4), epsilon, k, 100_000)
    p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    assert stats.binomtest(int(truth.sum()), truth.size, p).pvalue > 1e-4


def _check_cells(out: NDArray[np.float64], step: float, cdf: Callable[..., NDArray[np.float64]]) -> None:
    cells = np.round(out / step - 0.5).astype(np.int64)
    lo, hi = cells.min(), cells.max()
    edges = np.arange(lo, hi + 2) * step
    probs = np.diff(cdf(edges))
    probs[0] += cdf(edges[:1])[0]
    probs[-1] += 1 - cdf(edges[-1:])[0]
    assert _chi_square(np.bincount(cells - lo), probs) > 1e-4


def test_laplace_cells_match_the_laplace_law() -> None:
    t, scale, k = 0.3, 1.0, -2  # λ = 1/4
    out = sampling.laplace_cells(secure_rng(5), np.full(100_000, t), scale, k)
    _check_cells(out, 0.25, stats.laplace(loc=t, scale=scale).cdf)


def test_gaussian_cells_match_the_normal_law() -> None:
    t, sigma, k = -1.1, 2.0, -1
    out = sampling.gaussian_cells(secure_rng(6), np.full(100_000, t), sigma, k)
    _check_cells(out, 0.5, stats.norm(loc=t, scale=sigma).cdf)


@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0])
def test_staircase_cells_match_the_staircase_law(gamma: float) -> None:
    t, eps, width, k = 0.2, 0.8, 1.0, -3
    out = sampling.staircase_cells(secure_rng(7), np.full(100_000, t), eps, width, gamma, k)
    _check_cells(out, 0.125, lambda y: staircase_cdf(y - t, eps, width, gamma))


def _block_gaussian(
    rng: np.random.Generator, values: NDArray[np.float64], sigma: float, k: int, log2_entries: int
) -> NDArray[np.float64]:
    """The block Gaussian sampler with an alias table of 2^log2_entries entries (small: frequent tails)."""
    table = _gaussian._gauss_table(*Fraction(sigma * 2.0**-k).as_integer_ratio(), log2_entries)
    return _lattice.in_chunks(rng, values, k, lambda cells: _gaussian._gauss_block_round(table, cells))


def _check_binned(
    out: NDArray[np.float64], step: float, cdf: Callable[..., NDArray[np.float64]], group: int
) -> None:
    """Chi-square of the released cells grouped by ``group`` consecutive cells (more power in the tails)."""
    bins = np.floor_divide(np.round(out / step - 0.5).astype(np.int64), group)
    lo, hi = bins.min(), bins.max()
    edges = np.arange(lo, hi + 2) * group * step
    probs = np.diff(cdf(edges))
    probs[0] += cdf(edges[:1])[0]
    probs[-1] += 1 - cdf(edges[-1:])[0]
    assert _chi_square(np.bincount(bins - lo), probs) > 1e-4


@pytest.mark.parametrize("sigma_lattice", [1024.0, 5000.3, 8191.75, 3.1e9])
def test_gaussian_block_table_is_a_valid_rejection_sampler(sigma_lattice: float) -> None:
    mpmath.mp.prec = 120
    g = _gaussian._gauss_table(*Fraction(sigma_lattice).as_integer_ratio())
    width, s2 = mpmath.mpf(1 << g.b), mpmath.mpf(sigma_lattice) ** 2
    blocks = (1 << g.log2_entries) - 1
    assert g.r == blocks * (1 << g.b) and float(g.s) / 128 < (1 << g.b) <= float(g.s) / 64

    def phi(x: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(-x * x / (2 * s2))

    for i in range(blocks):
        rho = mpmath.mpf(g.rho[i].numerator) / g.rho[i].denominator
        assert rho * phi(i * width) <= 1 - mpmath.mpf(2) ** -41  # acceptance probability ≤ 1
        assert mpmath.mpf(int(g.acc[i])) <= 2**64 * rho * phi((i + 1) * width)  # certain acceptance
        assert mpmath.mpf(int(g.acc[i]) + int(g.width[i])) >= 2**64 * rho * phi(
            i * width
        )  # certain rejection
    rho_t = mpmath.mpf(g.rho[-1].numerator) / g.rho[-1].denominator
    assert rho_t * phi(mpmath.mpf(g.r)) * 2**64 <= g.tail_reject <= 2**64 * (1 - mpmath.mpf(2) ** -41)
    # the alias table gives entry i the probability W_i/2⁶³ used in ρ_i = S/W_i: W_i·ρ_i is the same S
    column = 1 << (63 - g.log2_entries)
    mass = np.zeros(blocks + 1, dtype=object)
    for j, (keep2, other) in enumerate(zip(g.keep2, g.alias, strict=True)):
        mass[j] += int(keep2) // 2
        mass[int(other)] += column - int(keep2) // 2
    assert sum(mass) == 1 << 63
    assert len({mass[i] * g.rho[i] for i in range(1, blocks)}) == 1


def test_gaussian_block_sampler_matches_the_normal_law() -> None:
    t, sigma, k = 0.37, 5.0, -8  # σ' = 1280: the block sampler with its full table
    out = sampling.gaussian_cells(secure_rng(14), np.full(100_000, t), sigma, k)
    law = stats.norm(loc=t, scale=sigma).cdf
    _check_cells(out, 2.0**k, law)
    _check_binned(out, 2.0**k, law, 64)
    counts = sampling.gaussian_integers(secure_rng(15), 1500.0, 100_000)
    _check_binned(counts + 0.5, 1.0, lambda y: stats.norm(scale=1500.0).cdf(y - 0.5), 50)


@pytest.mark.parametrize(("log2_entries", "n"), [(5, 4000), (7, 20_000)])
def test_gaussian_block_sampler_tail_matches_the_normal_law(log2_entries: int, n: int) -> None:
    # a small table puts R at 0.4σ (resp. 1.7σ), so most (resp. 1 in 10) proposals take the exact tail path
    t, sigma, k = -2.3, 150.3, 0
    out = _block_gaussian(secure_rng(16), np.full(n, t), sigma, k, log2_entries)
    law = stats.norm(loc=t, scale=sigma).cdf
    _check_cells(out, 1.0, law)
    _check_binned(out, 1.0, law, 16)


def test_integer_noise_matches_the_rounded_laws() -> None:
    lap = sampling.laplace_integers(secure_rng(8), 1.5, 100_000)
    _check_cells(lap + 0.5, 1.0, lambda y: stats.laplace(scale=1.5).cdf(y - 0.5))
    gau = sampling.gaussian_integers(secure_rng(9), 1.3, 100_000)
    _check_cells(gau + 0.5, 1.0, lambda y: stats.norm(scale=1.3).cdf(y - 0.5))


def test_bounded_cells_match_the_truncated_laws() -> None:
    bl = BoundedLaplace(epsilon=1.0, lower=0.0, upper=2.0)
    out = sampling.laplace_cells(secure_rng(10), np.full(100_000, 0.5), bl.scale, -3, (0.0, 2.0))
    _check_cells(out, 0.125, lambda y: bl.cdf(np.clip(y, 0.0, 2.0), 0.5))
    bs = BoundedStaircase(epsilon=1.0, lower=0.0, upper=2.0, gamma=0.3)
    out = sampling.staircase_cells(
        secure_rng(11), np.full(100_000, 1.5), bs.epsilon_hat, 2.0, 0.3, -3, (0.0, 2.0)
    )
    _check_cells(out, 0.125, lambda y: bs.cdf(np.clip(y, 0.0, 2.0), 1.5))


# ----------------------------------------------------------------------------------------------------
# the float fast decisions agree with exact arithmetic


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: sampling.laplace_cells(rng, np.linspace(-3, 3, 300), 1.0, -12),
        lambda rng: sampling.laplace_integers(rng, 2.0, 300),
        lambda rng: sampling.gaussian_cells(rng, np.linspace(-3, 3, 200), 1.0, -12),
        lambda rng: sampling.staircase_cells(rng, np.linspace(-3, 3, 300), 1.0, 1.0, 0.3, -12),
        lambda rng: sampling.laplace_cells(rng, np.linspace(0, 1, 200), 1.0, -12, (0.0, 1.0)),
        lambda rng: sampling.staircase_cells(rng, np.linspace(0, 1, 200), 0.7, 1.0, 0.3, -12, (0.0, 1.0)),
        lambda rng: samplers.geometric_exact(rng, Fraction(1, 40), 300),
        lambda rng: sampling.gaussian_cells(rng, np.linspace(-3, 3, 200), 4.0, -2),
        lambda rng: sampling.gaussian_integers(rng, 1500.0, 300),
        lambda rng: _block_gaussian(rng, np.linspace(-3, 3, 100), 150.3, 0, 5),
    ],
    ids=[
        "laplace",
        "laplace-int",
        "gaussian",
        "staircase",
        "bounded-laplace",
        "bounded-staircase",
        "geom",
        "gaussian-exponential-proposal",
        "gaussian-int",
        "gaussian-tail",
    ],
)
def test_exact_continuation_reproduces_the_vectorised_decisions(
    draw: Callable[[np.random.Generator], NDArray[np.float64]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = draw(secure_rng(12))
    monkeypatch.setattr(_exact, "FORCE_EXACT", True)
    exact = draw(secure_rng(12))
    np.testing.assert_array_equal(fast, exact)


@pytest.mark.parametrize(
    "make_round",
    [
        lambda cells: _laplace._laplace_round(_exponential.params_for(Fraction(1, 8)), cells, (0.0, 8.0)),
        lambda cells: _staircase._staircase_round(
            _exponential.params_for(Fraction(1)), cells, 1.0, 0.3, 8.0, None
        ),
        lambda cells: _gaussian._gaussian_round(_exponential.params_for(Fraction(1, 8)), cells, 8.0),
        lambda cells: _gaussian._gauss_block_round(_gaussian._gauss_table(1500, 1), cells),
    ],
    ids=["bounded-laplace", "staircase", "gaussian-exponential-proposal", "gaussian-block"],
)
def test_later_rounds_use_the_inputs_of_their_own_elements(make_round: Callable[..., Any]) -> None:
    # a later round proposes for idx = repeat(pending, 4), which can have the size of the chunk: each
    # proposal must still see the input of its own element
    x = np.array([0.05, 0.95, 0.15, 0.85, 0.25, 0.02, 0.35, 0.65])  # λ = 1: f = x
    idx = np.repeat([1, 5], 4)
    whole = make_round(_lattice._to_cells(x, 0))(secure_rng(3), idx)
    gathered = _lattice._to_cells(x[idx], 0)
    alone = make_round(gathered)(secure_rng(3), gathered.index)
    for a, b in zip(whole[:3], alone[:3], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_forced_exact_path_has_the_right_law(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_exact, "FORCE_EXACT", True)
    out = sampling.laplace_cells(secure_rng(13), np.full(3000, 0.3), 1.0, -1)
    _check_cells(out, 0.5, stats.laplace(loc=0.3, scale=1.0).cdf)


def test_mechanisms_default_to_the_secure_path() -> None:
    rr = BinaryRandomizedResponse(epsilon=1.0).randomize(np.zeros(100_000, dtype=int), rng=secure_rng(1))
    assert stats.binomtest(int(rr.sum()), rr.size, 1 / (1 + math.e)).pvalue > 1e-4
    krr = KRandomizedResponse(epsilon=1.0, categories=("a", "b", "c"))
    out = krr.randomize(np.array(["a"] * 60_000), rng=secure_rng(2))
    counts = [np.count_nonzero(out == c) for c in "abc"]
    assert stats.chisquare(counts, np.array([krr.p, krr.q, krr.q]) * 60_000).pvalue > 1e-4
    b = BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3).randomize(
        np.full(1000, 18.0), rng=secure_rng(3)
    )
    assert b.min() >= 10.0 and b.max() <= 20.0
