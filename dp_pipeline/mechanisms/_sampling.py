"""The only code in dp-pipeline that draws randomness: a secure path (the default) and a fast path.

Randomness sources (``rng`` everywhere)
---------------------------------------
``None``
    A fresh :func:`secure_rng`: numpy's ``Generator`` over randomgen's ``AESCounter`` (AES-128 in counter
    mode, a cryptographically secure generator) keyed with 128 bits from the operating system
    (:mod:`secrets`), drawn anew for every call. Nobody can predict or reproduce the noise, and no copy of
    any object holds it.
``secure_rng(seed)`` / ``fast_rng(seed)`` (a :class:`LabelledGenerator`)
    The explicit, labelled choices: used as given, without a warning. ``secure_rng(seed)`` keys the same
    AES-128 counter generator from the seed through numpy's ``SeedSequence``: reproducible, and exactly as
    secret as the seed. :class:`FastGenerator` (from :func:`fast_rng`) selects the fast path: textbook
    floating-point samplers (numpy's ``laplace``, ``normal``, inversion with ``log``) driven by PCG64.
    **Not floating-point safe**: the set of floats such a sampler can reach depends on the input, which can
    reveal it (Mironov 2012), and PCG64 is predictable from its output. For simulations and benchmarks only.
``int``
    The same generator as ``secure_rng(seed)``, with a :class:`~dp_pipeline.exceptions.PrivacyLeakWarning`:
    a bare seed is reproducible noise that anyone who knows it can subtract, chosen without saying so.
``numpy.random.Generator`` (any other)
    Used as given, with the exact samplers of the secure path, and a PrivacyLeakWarning: its randomness is
    only as unpredictable as its bit generator (numpy's default PCG64 is not cryptographic), and every copy
    of it (pickling, ``deepcopy``, a worker process) repeats its noise.

The secure samplers
-------------------
The secure path never turns a floating-point approximation of a noise distribution into a release. Each
continuous mechanism releases a *post-processing of its ideal real-valued output*: the real number
Y = t + X (t the input as the real number its float denotes, X the noise with its exact distribution) is
located in a cell [mλ, (m + 1)λ) of a lattice of step λ = 2^k, and the centre (m + ½)λ of that cell is
released (for integer inputs: the nearest integer, λ = 1). Because m is a deterministic function of the
ideal output Y, the release has every privacy guarantee of the ideal mechanism (post-processing), for
every input and every shape of input, and the set of floats that can come out is the lattice, whatever
the input: the floating-point attack has nothing to read.

m is computed exactly. The noise is written through exact discrete quantities (a sign, a geometric
integer, Bernoulli variables) and *lazy uniforms*: a uniform real number of which only as many random bits
are drawn as are needed to decide a comparison. Every comparison ("is the uniform W below e^{−a}?", "is
the real Y above a lattice boundary?") is decided first in vectorised float arithmetic with a *certified*
error bound: the answer is taken only when the interval that provably contains the exact quantity lies
wholly on one side. The rare elements whose interval straddles the boundary (probability about 2⁻⁴⁰ per
comparison) continue in exact rational arithmetic (:class:`fractions.Fraction`, :mod:`decimal`, which
rounds ``exp`` correctly), drawing further random bits until the comparison is decided. So the output
distribution is exactly the ideal one; floating point only decides how fast.

The certified exponential (:func:`exp_neg_bounds`) uses no library ``exp``: e^{−a} = e^{−i}·e^{−j/1024}·
e^{−r} with tables correctly rounded from :mod:`decimal` and a degree-5 Taylor polynomial on
r ∈ [0, 2⁻¹⁰), whose truncation error is below 2⁻⁶⁹; with IEEE-754 arithmetic (each operation rounded to
nearest) the relative error is below 2⁻⁵⁰, and the bounds are widened by 2⁻⁴⁶.

References
----------
Mironov, "On significance of the least significant bits for differential privacy", CCS 2012.
Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020 (exact
Bernoulli(e^{−γ}) and discrete samplers, which this module's exact arithmetic follows in spirit).
Karney, "Sampling exactly from the normal distribution", ACM TOMS 42(1), 2016 (lazy uniforms).
"""

from __future__ import annotations

import decimal
import functools
import math
import numbers
import secrets
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray
from randomgen import AESCounter

from dp_pipeline.exceptions import InvalidParameterError, PrivacyLeakWarning

__all__ = [
    "FastGenerator",
    "LabelledGenerator",
    "RNGLike",
    "bernoulli",
    "bernoulli_exp",
    "choice_index",
    "discrete_laplace",
    "exp_neg_bounds",
    "fast_rng",
    "gaussian",
    "geometric",
    "geometric_exact",
    "is_fast",
    "label_rng",
    "laplace",
    "make_rng",
    "secure_rng",
    "uniform",
]


class LabelledGenerator(np.random.Generator):
    """A numpy ``Generator`` whose choice is explicit: made by :func:`secure_rng` or :func:`fast_rng`.

    Passing one as ``rng`` (or ``random_state`` of a pandas function) is the labelled way to choose, or seed,
    the randomness of a release: it is used as given, without a PrivacyLeakWarning. Copies of it (pickling,
    ``deepcopy``, a worker process) keep the class and repeat its noise.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # numpy's own __reduce__ rebuilds a plain Generator, which would drop the label (and the fast path)
        return (type(self), (self.bit_generator,))


class FastGenerator(LabelledGenerator):
    """A numpy ``Generator`` over PCG64 that selects the fast, textbook floating-point samplers.

    Build it with :func:`fast_rng`. Mechanisms given one use numpy's float samplers, which are **not
    floating-point safe** (Mironov 2012) and whose PCG64 stream is predictable from its output.
    """


RNGLike = None | int | np.random.Generator


def _check_seed(seed: Any) -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise InvalidParameterError(f"'seed' must be None or a non-negative int, got {seed!r}", "seed")


def fast_rng(seed: int | None = None) -> FastGenerator:
    """A :class:`FastGenerator` (PCG64) for the fast path: textbook float noise, **not floating-point safe**.

    Parameters
    ----------
    seed : int or None
        Seed of PCG64; ``None`` seeds it from the operating system. The call is the label: a seeded
        ``fast_rng`` does not warn.
    """
    _check_seed(seed)
    return FastGenerator(np.random.PCG64(None if seed is None else int(seed)))


def secure_rng(seed: int | None = None) -> LabelledGenerator:
    """numpy's Generator over AES-128 in counter mode (randomgen ``AESCounter``), a CSPRNG.

    Parameters
    ----------
    seed : int or None
        ``None`` (default): the key is 128 bits from :func:`secrets.randbits` (operating-system entropy).
        An int: the key is derived from it through ``SeedSequence``, for reproducible noise; the noise is
        then exactly as secret as the seed. The call is the label: a seeded ``secure_rng`` does not warn,
        where a bare int seed does.
    """
    _check_seed(seed)
    key = AESCounter(key=secrets.randbits(128)) if seed is None else AESCounter(int(seed))
    return LabelledGenerator(key)


def label_rng(
    rng: Any, call: str, name: str = "rng", *, kept: bool = False, stacklevel: int = 2
) -> LabelledGenerator:
    """The generator of a release for ``rng``; a PrivacyLeakWarning when the choice is not labelled.

    ``None`` gives a fresh :func:`secure_rng` (operating-system entropy, new for every call) and a
    :class:`LabelledGenerator` is returned as it is, both silently. An int seed gives ``secure_rng(seed)`` and
    another numpy Generator a labelled view of it (drawing from it advances it), both with a
    PrivacyLeakWarning naming ``call`` (see the module notes). With ``kept`` the generator is kept by an
    object that may be copied (a fitted transformer), so any ``rng`` but None warns: every copy repeats
    its noise. ``stacklevel`` counts from the caller, as for :func:`warnings.warn`.

    Raises
    ------
    InvalidParameterError
        Naming ``name``, for anything else (a negative int, a bool, a string).
    """
    if rng is None:
        return secure_rng()
    if isinstance(rng, LabelledGenerator):
        generator, problem = rng, ""
    elif isinstance(rng, np.random.Generator):
        generator = LabelledGenerator(rng.bit_generator)
        problem = (
            f"unlabelled randomness: {call}({name}=<a numpy Generator>) draws noise that is as predictable "
            "as its bit generator and that every copy of the generator repeats. Pass secure_rng(seed) (or "
            f"fast_rng(seed) for simulations) to choose it on purpose, or leave {name}=None for releases"
        )
    elif isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and int(rng) >= 0:
        generator = secure_rng(int(rng))
        problem = (
            f"seeded noise: {call}({name}={int(rng)}) draws reproducible noise, which anyone who knows the "
            f"seed can subtract. Pass {name}=secure_rng(seed) to seed on purpose (tests, examples), or "
            f"leave {name}=None for releases"
        )
    else:
        raise InvalidParameterError(
            f"{name!r} must be None, a non-negative int seed or a numpy.random.Generator, got {rng!r}", name
        )
    if kept:
        problem = (
            f"seeded noise: {call}({name}=...) keeps its generator in the fitted object, so every copy of it "
            "(pickling, deepcopy, clone, GridSearchCV, joblib workers, n_jobs > 1) adds the same noise and "
            f"their releases share it; a seed also lets anyone who knows it subtract the noise. Use {name} "
            f"in tests only; with {name}=None every release draws fresh OS entropy"
        )
    if problem:
        warnings.warn(problem, PrivacyLeakWarning, stacklevel=stacklevel + 1)
    return generator


def make_rng(rng: Any = None) -> np.random.Generator:
    """The generator of ``randomize(values, rng)``: :func:`label_rng`, warning at its caller."""
    return label_rng(rng, "randomize", stacklevel=3)


def is_fast(rng: np.random.Generator) -> bool:
    """True when ``rng`` selects the fast path (a :class:`FastGenerator`)."""
    return isinstance(rng, FastGenerator)


# --------------------------------------------------------------------------------------------------------
# Fast path: textbook floating-point samplers (not floating-point safe)
# --------------------------------------------------------------------------------------------------------


def laplace(rng: np.random.Generator, scale: float, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Fast path: Laplace(0, scale) noise by numpy's float sampler (not floating-point safe)."""
    return rng.laplace(0.0, scale, size=shape)


def gaussian(rng: np.random.Generator, sigma: float, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Fast path: N(0, sigma²) noise by numpy's float sampler (not floating-point safe)."""
    return rng.normal(0.0, sigma, size=shape)


def uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Uniform [0, 1) draws of the given shape (53-bit floats)."""
    return rng.random(size=shape)


def bernoulli(rng: np.random.Generator, p: float, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """Bernoulli(p) draws (True with probability ``p`` rounded to a multiple of 2⁻⁵³)."""
    return rng.random(size=shape) < p


def geometric(rng: np.random.Generator, log_q: float, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Fast path: failures before the first success, P(G ≥ k) = q^k with q = exp(``log_q``) < 1, as floats.

    Drawn by inversion, G = ⌊ln U / ln q⌋ with U uniform on (0, 1] (not exact; see :func:`geometric_exact`).
    """
    u = 1.0 - rng.random(size=shape)
    return np.floor(np.log(u) / log_q)


def choice_index(
    rng: np.random.Generator, cumulative: NDArray[np.float64], shape: tuple[int, ...]
) -> NDArray[np.intp]:
    """Indices drawn from a discrete distribution given by its cumulative probabilities (last entry 1)."""
    u = rng.random(size=shape)
    return np.minimum(np.searchsorted(cumulative, u, side="right"), len(cumulative) - 1)


# --------------------------------------------------------------------------------------------------------
# Secure path, part 1: random words, lazy uniforms and exact comparisons (scalar, exact arithmetic)
# --------------------------------------------------------------------------------------------------------

_TWO64 = 1 << 64
_FORCE_EXACT = False  # tests only: send every element through the exact continuation (same law, slower)
_U11 = np.uint64(11)
_P53 = 2.0**-53


def _words(rng: np.random.Generator, n: int) -> NDArray[np.uint64]:
    """``n`` independent uniform 64-bit words."""
    return rng.integers(0, _TWO64, size=n, dtype=np.uint64)


class _Lazy:
    """A uniform real number in [0, 1) of which ``bits`` bits are known: it lies in [num, num + 1)/2^bits."""

    __slots__ = ("bits", "num")

    def __init__(self, num: int, bits: int = 64) -> None:
        self.num = int(num)
        self.bits = bits

    def lo(self) -> Fraction:
        return Fraction(self.num, 1 << self.bits)

    def hi(self) -> Fraction:
        return Fraction(self.num + 1, 1 << self.bits)

    def refine(self, rng: np.random.Generator) -> None:
        """Draw 64 more bits."""
        self.num = (self.num << 64) | int(_words(rng, 1)[0])
        self.bits += 64


def _lazy(rng: np.random.Generator, word: Any = None) -> _Lazy:
    return _Lazy(int(_words(rng, 1)[0]) if word is None else int(word))


def _exp_neg_exact(a_lo: Fraction, a_hi: Fraction, digits: int) -> tuple[Fraction, Fraction]:
    """Rational bounds lo ≤ e^{−a} ≤ hi for every a in [a_lo, a_hi] (a_lo ≥ 0), from :mod:`decimal`.

    The arguments are rounded outward to ``digits`` significant digits; ``Decimal.exp`` is correctly
    rounded (error ≤ ½ unit in the last place), so widening by 10^{2 − digits} relative is safe.
    """
    with decimal.localcontext() as ctx:
        ctx.prec = digits
        ctx.Emin, ctx.Emax = decimal.MIN_EMIN, decimal.MAX_EMAX
        ctx.rounding = decimal.ROUND_CEILING
        upper_arg = decimal.Decimal(a_hi.numerator) / decimal.Decimal(a_hi.denominator)
        ctx.rounding = decimal.ROUND_FLOOR
        lower_arg = decimal.Decimal(a_lo.numerator) / decimal.Decimal(a_lo.denominator)
        ctx.rounding = decimal.ROUND_HALF_EVEN
        low = (-upper_arg).exp()
        high = (-lower_arg).exp()
    slack = Fraction(1, 10 ** (digits - 2))
    return Fraction(low) * (1 - slack), Fraction(high) * (1 + slack)


def _point(value: Fraction) -> tuple[Fraction, Fraction]:
    return value, value


def _lt_exp(
    rng: np.random.Generator,
    w: _Lazy,
    argument: Callable[[], tuple[Fraction, Fraction]],
    also: tuple[_Lazy, ...] = (),
    factor: Fraction = Fraction(1),
) -> bool:
    """Exactly decide W < ρ·e^{−a} (ρ = ``factor`` ≥ 0): ``argument()`` bounds a (it may depend on the
    lazies in ``also``).

    While the bounds do not decide, W and every lazy in ``also`` get 64 more bits and the precision grows.
    """
    digits = 40
    while True:
        a_lo, a_hi = argument()
        low, high = _exp_neg_exact(max(a_lo, Fraction(0)), max(a_hi, Fraction(0)), digits)
        low, high = low * factor, high * factor
        if w.hi() <= low:
            return True
        if w.lo() >= high:
            return False
        w.refine(rng)
        for other in also:
            other.refine(rng)
        digits += 25


def _lt_fraction(rng: np.random.Generator, w: _Lazy, p: Callable[[int], tuple[Fraction, Fraction]]) -> bool:
    """Exactly decide W < p, with ``p(digits)`` giving rational bounds on p that tighten with ``digits``."""
    digits = 40
    while True:
        low, high = p(digits)
        if w.hi() <= low:
            return True
        if w.lo() >= high:
            return False
        w.refine(rng)
        digits += 25


def _floor_exact(
    rng: np.random.Generator, bounds: Callable[[], tuple[Fraction, Fraction]], lazies: tuple[_Lazy, ...]
) -> int:
    """⌊y⌋ of a real y known to lie in ``bounds()``, refining ``lazies`` until both ends share the floor."""
    while True:
        low, high = bounds()
        if math.floor(low) == math.floor(high):
            return math.floor(low)
        for lazy in lazies:
            lazy.refine(rng)


def _compare_exact(
    rng: np.random.Generator,
    bounds: Callable[[], tuple[Fraction, Fraction]],
    threshold: Fraction,
    lazies: tuple[_Lazy, ...],
) -> bool:
    """Exactly decide y ≥ ``threshold`` for y in ``bounds()`` (refining ``lazies``)."""
    while True:
        low, high = bounds()
        if low >= threshold:
            return True
        if high < threshold:
            return False
        for lazy in lazies:
            lazy.refine(rng)


# --------------------------------------------------------------------------------------------------------
# Secure path, part 2: certified float bounds (vectorised)
# --------------------------------------------------------------------------------------------------------

_EXP_CAP = 700  # e^{−700} ≈ 1e-304 is a normal double, so no bound below ever loses relative precision
_EXP_MARGIN = 2.0**-46  # the evaluation below is accurate to 2⁻⁵⁰ relative; bounds are widened by this


@functools.cache
def _exp_tables() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """e^{−i} (i = 0..700) and e^{−j/1024} (j = 0..1023), each correctly rounded via 40-digit decimal."""
    with decimal.localcontext() as ctx:
        ctx.prec = 40
        coarse = np.array([float((-decimal.Decimal(i)).exp()) for i in range(_EXP_CAP + 1)])
        fine = np.array([float((-decimal.Decimal(j) / 1024).exp()) for j in range(1024)])
    return coarse, fine


def _exp_neg_approx(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """e^{−min(a, 700)} for a ≥ 0 with relative error below 2⁻⁵⁰ (IEEE-754 arithmetic only).

    a·1024 = m + r·1024 exactly (power-of-two scaling, floor and fractional part are exact), so
    e^{−a} = e^{−⌊m/1024⌋}·e^{−(m mod 1024)/1024}·e^{−r} with r in [0, 2⁻¹⁰). The tables are correctly
    rounded (≤ 2⁻⁵³ each), the Taylor polynomial of degree 5 has truncation error ≤ r⁶/720 < 2⁻⁶⁹ and its
    Horner evaluation near 1 adds at most a few 2⁻⁵³, the two products one 2⁻⁵³ each: below 2⁻⁵⁰ in all.
    """
    coarse, fine = _exp_tables()
    s = np.minimum(a, float(_EXP_CAP)) * 1024.0
    m = np.floor(s)
    r = (s - m) * (1.0 / 1024.0)
    index = m.astype(np.int64)
    poly = 1.0 + r * (-1.0 + r * (0.5 + r * (-1.0 / 6.0 + r * (1.0 / 24.0 - r * (1.0 / 120.0)))))
    return coarse[index >> 10] * fine[index & 1023] * poly


def exp_neg_bounds(
    a_lo: NDArray[np.float64], a_hi: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Certified bounds lo ≤ e^{−a} ≤ hi for every real a in [a_lo, a_hi], a ≥ 0 (vectorised).

    See :func:`_exp_neg_approx` for the error analysis; the bounds are widened by 2⁻⁴⁶ relative, and
    e^{−a} for a ≥ 700 is bounded by [0, e^{−700}].

    Parameters
    ----------
    a_lo, a_hi : ndarray
        Float bounds of the argument (a_lo may be below 0 by rounding; it is clipped at 0).
    """
    a_lo = np.maximum(np.asarray(a_lo, dtype=np.float64), 0.0)
    a_hi = np.maximum(np.asarray(a_hi, dtype=np.float64), a_lo)
    low = np.where(a_hi >= _EXP_CAP, 0.0, _exp_neg_approx(a_hi) * (1.0 - _EXP_MARGIN))
    high = _exp_neg_approx(a_lo) * (1.0 + _EXP_MARGIN)
    return low, high


def _squeeze_below(
    w: NDArray[np.uint64], a_lo: NDArray[np.float64], a_hi: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Decide W < e^{−a} for a in [a_lo, a_hi] (a ≥ 0): (W < e^{−a} certainly, decided).

    Polynomial bounds first, valid for every a ≥ 0: e^{−a} ≥ 1 − a + a²/2 − a³/6 and
    e^{−a} ≤ min(1 − a + a²/2, 1/(1 + a + a²/2)); float rounding is covered by a 2⁻⁴⁸ margin. Only the
    elements they leave undecided get :func:`exp_neg_bounds`.
    """
    lo = _word_lo(w)
    x = a_hi
    lower = 1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0))) - 2.0**-48 * (1.0 + x * x * x)
    yes = lo + _P53 <= lower
    y = np.maximum(a_lo, 0.0)
    upper = np.minimum(1.0 - y * (1.0 - 0.5 * y), 1.0 / (1.0 + y * (1.0 + 0.5 * y))) * (1.0 + 2.0**-48)
    decided = yes | (lo >= upper)
    rest = np.flatnonzero(~decided)
    if rest.size:
        th_lo, th_hi = exp_neg_bounds(a_lo[rest], a_hi[rest])
        yes_rest, decided_rest = _decide_below(w[rest], th_lo, th_hi)
        yes[rest] = yes_rest
        decided[rest] = decided_rest
    return yes, decided


def _word_lo(w: NDArray[np.uint64]) -> NDArray[np.float64]:
    """A float lower bound of W = w/2⁶⁴ that is within 2⁻⁵³ of it: W lies in [lo, lo + 2⁻⁵³)."""
    return (w >> _U11).astype(np.float64) * _P53


def _decide_below(
    w: NDArray[np.uint64], p_lo: NDArray[np.float64], p_hi: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """For a lazy uniform with 64-bit prefix ``w`` and p in [p_lo, p_hi]: (W < p certainly, decided)."""
    lo = _word_lo(w)
    yes = lo + _P53 <= p_lo
    no = lo >= p_hi
    return yes, yes | no


def _threshold_word(p: float, upward: bool) -> int:
    """⌊p·2⁶⁴⌋ (or ⌈p·2⁶⁴⌉ with ``upward``) of a float p, clipped to [0, 2⁶⁴ − 1]."""
    value = Fraction(p) * _TWO64
    whole = math.ceil(value) if upward else math.floor(value)
    return min(max(whole, 0), _TWO64 - 1)


def _word_thresholds(p_lo: Fraction, p_hi: Fraction) -> tuple[np.uint64, np.uint64 | None]:
    """For p in [p_lo, p_hi] and a lazy uniform with 64-bit prefix w: W < p is certain when w < sure, and
    W ≥ p is certain when w ≥ none (None: never certain from 64 bits)."""
    sure = np.uint64(min(max(math.floor(p_lo * _TWO64), 0), _TWO64 - 1))
    top = math.ceil(p_hi * _TWO64)
    return sure, (np.uint64(max(top, 0)) if top < _TWO64 else None)


def _float_bounds(value: Fraction) -> tuple[float, float]:
    """Adjacent floats lo ≤ value ≤ hi."""
    nearest = float(value)
    lo = nearest if Fraction(nearest) <= value else math.nextafter(nearest, -math.inf)
    hi = nearest if Fraction(nearest) >= value else math.nextafter(nearest, math.inf)
    return lo, hi


# --------------------------------------------------------------------------------------------------------
# Secure path, part 3: the exponential magnitude E ~ Exp(rate c), exactly, with E = T·H + T·U
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ExpParams:
    """Constants of the exact sampler of E with density c·e^{−c e} on [0, ∞) (c a rational).

    E = T·H + Y' with T = 2^t, H ~ geometric with P(H ≥ h) = e^{−hTc}, and Y' on [0, T) with density
    ∝ e^{−c y}, independent (memorylessness). Y' = T·U with U a lazy uniform accepted with probability
    e^{−cTU} (rejection from the uniform). Then ⌊E⌋ = T·H + ⌊T·U⌋ and frac(E) = frac(T·U).
    """

    rate: Fraction
    t: int
    tc: Fraction
    tc_lo: float
    tc_hi: float
    h_max: int
    sure_h: NDArray[np.uint64]  # H ≥ h certainly when w ≫ 1 < sure_h[h]  (⌊θ_lo(h)·2⁶³⌋)
    none_h: NDArray[np.uint64]  # H < h certainly when w ≫ 1 ≥ none_h[h]  (⌈θ_hi(h)·2⁶³⌉)
    band: np.uint64  # acceptance of U is certain when the acceptance word is below this


@functools.lru_cache(maxsize=256)
def _exp_params(numerator: int, denominator: int) -> _ExpParams:
    rate = Fraction(numerator, denominator)
    c_lo, c_hi = _float_bounds(rate)
    t = 0
    while c_hi * 2.0 ** (t + 1) <= 1.0 / 32.0 and t < 56:
        t += 1
    tc = rate * (1 << t)
    tc_lo, tc_hi = c_lo * 2.0**t, c_hi * 2.0**t
    h_max = math.ceil(45.0 / tc_lo) + 2
    h = np.arange(h_max + 2, dtype=np.float64)
    lo, hi = exp_neg_bounds(h * tc_lo * (1 - 2.0**-51), h * tc_hi * (1 + 2.0**-51))
    sure = np.array([_threshold_word(float(v), False) >> 1 for v in lo], dtype=np.uint64)
    sure[0] = np.uint64(1 << 63)  # e^{−0} = 1: H ≥ 0 always
    none = np.array([-(-_threshold_word(float(v), True) // 2) for v in hi], dtype=np.uint64)
    band_lo, _ = exp_neg_bounds(np.array([tc_hi * (1 + 2.0**-51)]), np.array([tc_hi * (1 + 2.0**-51)]))
    band = np.uint64(_threshold_word(float(band_lo[0]), False))
    return _ExpParams(rate, t, tc, tc_lo, tc_hi, h_max, sure, none, band)


def _params_for(rate: Fraction) -> _ExpParams:
    if rate <= 0:
        raise InvalidParameterError(f"the rate of an exponential must be > 0, got {rate}", "rate")
    if rate < Fraction(1, 1 << 60):
        raise InvalidParameterError(f"the rate {float(rate)} is below 2⁻⁶⁰; the noise is too large", "rate")
    return _exp_params(rate.numerator, rate.denominator)


def _exact_h(rng: np.random.Generator, p: _ExpParams, w: _Lazy) -> int:
    """H = max{h : W < e^{−hTc}}, exactly."""
    h = 0
    while True:
        nxt = (h + 1) * p.tc
        if not _lt_exp(rng, w, functools.partial(_point, nxt)):
            return h
        h += 1


def _exact_u(rng: np.random.Generator, p: _ExpParams, u: _Lazy, w: _Lazy) -> bool:
    """Accept the proposal U (W < e^{−cTU}), exactly."""
    return _lt_exp(rng, w, lambda: (p.tc * u.lo(), p.tc * u.hi()), (u,))


def _exact_exponential(
    rng: np.random.Generator, p: _ExpParams, words: tuple[Any, Any, Any] | None = None
) -> tuple[int, _Lazy]:
    """(T·H, U) with E = T·H + T·U exactly distributed; ``words`` = (w_H, w_U, w_A) prefixes to continue.

    H's uniform is the top 63 bits of w_H (its lowest bit is left for a sign).
    """
    w_h, w_u, w_a = words if words is not None else (None, None, None)
    h = _exact_h(rng, p, _Lazy((int(_words(rng, 1)[0]) if w_h is None else int(w_h)) >> 1, 63))
    while True:
        u, w = _lazy(rng, w_u), _lazy(rng, w_a)
        w_u = w_a = None
        if _exact_u(rng, p, u, w):
            return (1 << p.t) * h, u


@dataclass
class _ExpDraw:
    """Vectorised draws of E for n elements: E = T·h + T·U with U's 64-bit prefix ``w_u``."""

    w_h: NDArray[np.uint64]  # top 63 bits: H's uniform; bit 0: a free fair bit (the sign)
    w_u: NDArray[np.uint64]
    w_a: NDArray[np.uint64]
    h: NDArray[np.int64]
    exact: NDArray[np.bool_]  # not decided in floats: continue with _exact_exponential(words)

    def whole(self, p: _ExpParams) -> NDArray[np.int64]:
        """⌊E⌋ = T·h + ⌊T·U⌋."""
        top = (self.w_u >> np.uint64(64 - p.t)).astype(np.int64) if p.t else np.zeros_like(self.h)
        return (self.h << p.t) + top

    def frac_prefix(self, p: _ExpParams) -> NDArray[np.uint64]:
        """vp with frac(E) in [vp, vp + 2^t)/2⁶⁴."""
        return self.w_u << np.uint64(p.t)


def _draw_exponential(rng: np.random.Generator, p: _ExpParams, n: int) -> _ExpDraw:
    """Draw E for n elements (vectorised); elements not decided in floats are flagged ``exact``."""
    w_h = _words(rng, n)
    # H: candidate by inversion in floats, then certified against the threshold tables
    # −ln W ≤ 54 ln 2 < 45/(Tc)·Tc, so the candidate lies in [0, h_max]; truncation is ⌊·⌋ here
    log_mid = np.log((w_h >> _U11).astype(np.float64) + 0.5)
    h = ((53.0 * math.log(2.0) - log_mid) * (2.0 / (p.tc_lo + p.tc_hi))).astype(np.int64)
    top = w_h >> np.uint64(1)
    exact = (top >= p.sure_h[h]) | (top < p.none_h[h + 1]) | _FORCE_EXACT
    # U: rejection sampling, rounds over the pending elements
    w_u = np.zeros(n, dtype=np.uint64)
    w_a = np.zeros(n, dtype=np.uint64)
    pending = np.arange(n)
    while pending.size:
        u = _words(rng, pending.size)
        a = _words(rng, pending.size)
        if pending.size == n:
            w_u, w_a = u, a
        else:
            w_u[pending], w_a[pending] = u, a
        accept = a < p.band
        band = np.flatnonzero(~accept)
        if band.size:
            u_lo = _word_lo(u[band])
            arg_lo = p.tc_lo * u_lo * (1 - 2.0**-51)
            arg_hi = p.tc_hi * (u_lo + _P53) * (1 + 2.0**-51)
            th_lo, th_hi = exp_neg_bounds(arg_lo, arg_hi)
            yes, decided = _decide_below(a[band], th_lo, th_hi)
            accept[band] = yes
            undecided = band[~decided]
            exact[pending[undecided]] = True
            accept[undecided] = True  # leaves the loop; finished exactly
        pending = pending[~accept]
    return _ExpDraw(w_h, w_u, w_a, h, exact)


def geometric_exact(rng: np.random.Generator, rate: Fraction, n: int) -> NDArray[np.int64]:
    """Exact geometric integers G ≥ 0 with P(G ≥ k) = e^{−k·rate} (``rate`` a positive rational).

    G = ⌊E⌋ with E ~ Exp(rate) (see :class:`_ExpParams`): P(⌊E⌋ ≥ k) = P(E ≥ k) = e^{−k·rate}.
    """
    p = _params_for(Fraction(rate))
    draw = _draw_exponential(rng, p, n)
    out = draw.whole(p)
    for i in np.flatnonzero(draw.exact):
        th, u = _exact_exponential(rng, p, (draw.w_h[i], draw.w_u[i], draw.w_a[i]))
        out[i] = th + math.floor((1 << p.t) * u.lo())
    return out


def discrete_laplace(rng: np.random.Generator, scale: Fraction, n: int) -> NDArray[np.int64]:
    """Exact discrete Laplace integers: P(Z = z) ∝ e^{−|z|/scale} (Canonne, Kamath & Steinke 2020).

    Z = G₁ − G₂ with G₁, G₂ independent exact geometrics with P(G ≥ k) = e^{−k/scale}
    (:func:`geometric_exact`).
    """
    rate = 1 / Fraction(scale)
    return geometric_exact(rng, rate, n) - geometric_exact(rng, rate, n)


def bernoulli_exp(rng: np.random.Generator, gamma: Any) -> NDArray[np.bool_]:
    """Exact Bernoulli(e^{−γ}) for each γ ≥ 0 in ``gamma`` (floats, taken as the rationals they denote).

    The lazy uniform W is compared with certified bounds of e^{−γ} (:func:`exp_neg_bounds`); undecided
    elements are decided in exact arithmetic.
    """
    g = np.asarray(gamma, dtype=np.float64)
    if np.any(~np.isfinite(g)) or np.any(g < 0):
        raise InvalidParameterError("'gamma' must be finite and ≥ 0", "gamma")
    flat = g.ravel()
    w = _words(rng, flat.size)
    low, high = exp_neg_bounds(flat, flat)
    out, decided = _decide_below(w, low, high)
    for i in np.flatnonzero(~decided):
        exact = Fraction(float(flat[i]))
        out[i] = _lt_exp(rng, _Lazy(int(w[i])), functools.partial(_point, exact))
    return out.reshape(g.shape)


# --------------------------------------------------------------------------------------------------------
# Secure path, part 4: lattice cells of continuous noise
# --------------------------------------------------------------------------------------------------------


def lattice_exponent(scale: float, resolution: int = 12) -> int:
    """k with λ = 2^k and 2^{k + resolution} ≤ scale < 2^{k + resolution + 1} (clipped to [−1000, 1000])."""
    _, exponent = math.frexp(scale)
    return int(min(max(exponent - 1 - resolution, -1000), 1000))


@dataclass
class _Cells:
    """Inputs in lattice units: |x|/λ = n + f with n an integer and f in [0, 1), both exact floats.

    The noise laws are symmetric, so x < 0 is handled as −(|x| + X): the cell of |x| + X is drawn and the
    released centre negated, which has exactly the law of the centre of the cell of x + X (up to the
    boundaries of cells, a null set). Working with |x| keeps f exact (for u ≥ 0, u − ⌊u⌋ is exact in
    floats). Inputs with |x|/λ ≥ 2⁵² (``big``) have f = 0 (a float that large is an integer); their n is
    recomputed with Python integers when the output is formed.
    """

    n: NDArray[np.float64]
    f: NDArray[np.float64]
    big: NDArray[np.bool_]
    negative: NDArray[np.bool_]
    k: int
    values: NDArray[np.float64]
    index: NDArray[np.intp]  # np.arange(size): the first round of :func:`_run_rounds` passes this very array

    def exact_f(self, i: int) -> Fraction:
        return Fraction(float(self.f[i]))


def _to_cells(values: NDArray[np.float64], k: int) -> _Cells:
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    u = np.abs(flat)
    with np.errstate(over="ignore"):
        u *= 2.0**-k  # exact scaling (a subnormal result only moves f below 2⁻¹⁰²²)
    big = ~(u < 2.0**52)
    if big.any():
        u[big] = 0.0
    n = np.floor(u)
    u -= n
    return _Cells(n, u, big, np.signbit(flat), k, flat, np.arange(flat.size))


def _integer_cells(n: int) -> _Cells:
    """Integer inputs: λ = 1 and f = ½, so that x + ⌊½ + X⌋ is x + X rounded to the nearest integer."""
    zeros = np.zeros(n)
    false = np.zeros(n, dtype=bool)
    return _Cells(zeros, np.full(n, 0.5), false, false, 0, zeros, np.arange(n))


def _exact_centre(x: float, z: int, k: int) -> float:
    scale = Fraction(2) ** k
    centre = (math.floor(abs(Fraction(x)) / scale) + z + Fraction(1, 2)) * scale
    try:
        value = float(centre)
    except OverflowError:
        value = math.inf
    return -value if math.copysign(1.0, x) < 0 else value


def _release_cells(cells: _Cells, z: NDArray[np.int64], shape: tuple[int, ...]) -> NDArray[np.float64]:
    """The centre ±(n + z + ½)·λ of each released cell: exact in floats below 2⁵¹ cells, else one rounding
    of the exact value (either way a deterministic function of the exact cell)."""
    m = z.astype(np.float64)
    m += cells.n
    if z.size and (z.min() > -(2**50) and z.max() < 2**50 and m.min() > -(2.0**51) and m.max() < 2.0**51):
        redo = cells.big  # the common case, checked by reductions instead of elementwise masks
    else:
        redo = cells.big | ~(np.abs(z) < 2**50) | ~(np.abs(m) < 2.0**51)
    out = m
    out += 0.5
    with np.errstate(over="ignore"):
        out *= 2.0**cells.k
    np.negative(out, out=out, where=cells.negative)
    for i in np.flatnonzero(redo):
        out[i] = _exact_centre(float(cells.values[i]), int(z[i]), cells.k)
    return out.reshape(shape)


def _carry_z(
    whole: NDArray[np.int64],
    vp: NDArray[np.uint64],
    t: int,
    negative: NDArray[np.bool_],
    f: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """z = ⌊f + s·E⌋ from ⌊E⌋, frac(E) in [vp, vp + 2^t)/2⁶⁴ and f, by exact integer comparisons.

    s = +1: z = ⌊E⌋ + [frac(E) + f ≥ 1]; s = −1: z = −⌊E⌋ − [frac(E) > f]. With F = f·2⁶⁴ (exact) and
    F_i = ⌊F⌋: a carry is certain when vp + F_i ≥ 2⁶⁴ and impossible when vp + F_i ≤ 2⁶⁴ − 1 − 2^t; a borrow
    is certain when vp ≥ F_i + 1 and impossible when vp + 2^t ≤ F_i. Returns (z, decided).
    """
    f_int = np.floor(f * 2.0**64).astype(np.uint64)
    step = np.uint64(1 << t)
    total = vp + f_int  # modulo 2⁶⁴: it wrapped exactly when the sum reached 2⁶⁴
    carry = total < vp
    no_carry = ~carry & (total <= np.uint64(_TWO64 - 1) - step)
    borrow = vp >= f_int + np.uint64(1)
    no_borrow = (f_int >= step) & (vp <= f_int - step)
    z = np.where(negative, -whole - borrow.astype(np.int64), whole + carry.astype(np.int64))
    decided = np.where(negative, borrow | no_borrow, carry | no_carry)
    return z, decided


def _exact_cell(rng: np.random.Generator, f: Fraction, negative: bool, th: int, t: int, u: _Lazy) -> int:
    """⌊f + s·(T·h + T·U)⌋ exactly."""
    scale = 1 << t
    sign = -1 if negative else 1

    def bounds() -> tuple[Fraction, Fraction]:
        a = f + sign * (th + scale * u.lo())
        b = f + sign * (th + scale * u.hi())
        return min(a, b), max(a, b)

    return _floor_exact(rng, bounds, (u,))


def _e_bounds(draw: _ExpDraw, p: _ExpParams) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Float bounds of E = ⌊E⌋ + frac(E) from the draw (absolute error ≤ 2⁻⁵⁰(⌊E⌋ + 2))."""
    whole = draw.whole(p).astype(np.float64)
    vp = draw.frac_prefix(p)
    width = _P53 * max(1.0, 2.0 ** (p.t - 11))
    lo = whole + _word_lo(vp)
    hi = whole + (_word_lo(vp) + width)
    err = 2.0**-50 * (whole + 2.0)
    return lo - err, hi + err


def _exact_e(rng: np.random.Generator, p: _ExpParams, draw: _ExpDraw, i: int) -> tuple[int, _Lazy]:
    """(T·H, U) of element ``i``: exactly continued when its draw was undecided, else read from the draw."""
    if draw.exact[i]:
        return _exact_exponential(rng, p, (draw.w_h[i], draw.w_u[i], draw.w_a[i]))
    return int(draw.h[i]) << p.t, _Lazy(int(draw.w_u[i]))


Round = Callable[
    [np.random.Generator, NDArray[np.intp]],
    tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], Callable[[int], "int | None"]],
]


_CHUNK = 1 << 16  # elements per pass: the working arrays stay in the processor's cache


def _in_chunks(
    rng: np.random.Generator,
    values: NDArray[np.float64],
    k: int,
    make_round: Callable[[_Cells], Round],
    chunk: int = _CHUNK,
) -> NDArray[np.float64]:
    """Release the lattice cells of ``values`` chunk by chunk (same law; faster than whole arrays)."""
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    out = np.empty(flat.size, dtype=np.float64)
    for start in range(0, flat.size, chunk):
        cells = _to_cells(flat[start : start + chunk], k)
        z = _run_rounds(rng, cells.f.size, make_round(cells), cells.index)
        out[start : start + chunk] = _release_cells(cells, z, (cells.f.size,))
    return out.reshape(values.shape)


def _integers_in_chunks(
    rng: np.random.Generator, n: int, make_round: Callable[[_Cells], Round], chunk: int = _CHUNK
) -> NDArray[np.int64]:
    """Noise for integer inputs (λ = 1, f = ½), chunk by chunk."""
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        cells = _integer_cells(size)
        out[start : start + size] = _run_rounds(rng, size, make_round(cells), cells.index)
    return out


def _run_rounds(
    rng: np.random.Generator, n: int, one_round: Round, everything: NDArray[np.intp] | None = None
) -> NDArray[np.int64]:
    """Drive a rejection sampler: ``one_round(rng, idx)`` returns (z, accepted, exact, finish) for one
    proposal per entry of ``idx``; ``finish(j)`` completes the j-th proposal exactly (None: rejected).

    The first round proposes once per element, with ``idx`` the array ``everything`` itself (np.arange(n);
    a round may test ``idx is cells.index`` to skip gathering). After it every pending element gets four
    independent proposals at once and keeps the first one that is accepted (in order, deciding undecided
    ones exactly): the same law as proposing one at a time, in fewer passes.
    """
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    pending = np.arange(n) if everything is None else everything
    values, accepted, exact, finish = one_round(rng, pending)
    if _FORCE_EXACT:
        exact = np.ones_like(exact)
    found = accepted | exact
    for j in np.flatnonzero(exact):
        result = finish(int(j))
        if result is None:
            found[j] = False
        else:
            values[j] = result
    z = values  # a fresh array of the round; the elements not found are filled below
    pending = pending[~found]
    reps = 4
    while pending.size:
        idx = np.repeat(pending, reps)
        values, accepted, exact, finish = one_round(rng, idx)
        if _FORCE_EXACT:
            exact = np.ones_like(exact)
        candidate = (accepted | exact).reshape(-1, reps)
        first = np.argmax(candidate, axis=1)
        found = candidate[np.arange(pending.size), first]
        chosen = np.arange(pending.size) * reps + first
        for row in np.flatnonzero(found & exact[chosen]):
            j = int(chosen[row])
            while True:
                result = finish(j) if exact[j] else (int(values[j]) if accepted[j] else None)
                if result is not None:
                    values[j] = result
                    break
                later = np.flatnonzero(candidate[row, j - row * reps + 1 :])
                if later.size == 0:
                    found[row] = False
                    break
                j += int(later[0]) + 1
            chosen[row] = j
        z[pending[found]] = values[chosen[found]]
        pending = pending[~found]
    return z


# ---- Laplace -------------------------------------------------------------------------------------------


def _laplace_round(p: _ExpParams, cells: _Cells, bounds: tuple[float, float] | None) -> Round:
    """One round of Laplace cells; with ``bounds`` = (lower, upper) in lattice units, outputs outside the
    range are rejected (bounded Laplace: the Laplace law conditioned on the range)."""

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        f = cells.f if idx is cells.index else cells.f[idx]
        draw = _draw_exponential(rng, p, idx.size)
        negative = (draw.w_h & np.uint64(1)).astype(bool)
        z, decided = _carry_z(draw.whole(p), draw.frac_prefix(p), p.t, negative, f)
        accepted = np.ones(idx.size, dtype=bool)
        if bounds is not None:
            e_lo, e_hi = _e_bounds(draw, p)
            rho_lo = np.where(negative, f - e_hi, f + e_lo)
            rho_hi = np.where(negative, f - e_lo, f + e_hi)
            inside, known = _range_check(rho_lo, rho_hi, cells, idx, bounds)
            accepted, decided = inside, decided & known
        exact = draw.exact | ~decided

        def finish(j: int) -> int | None:
            i = int(idx[j])
            th, u = _exact_e(rng, p, draw, j)
            fx = cells.exact_f(i)
            sign = -1 if negative[j] else 1
            if bounds is not None:
                low, high = _exact_bounds(cells, i, bounds)
                scale = 1 << p.t

                def rho() -> tuple[Fraction, Fraction]:
                    a = fx + sign * (th + scale * u.lo())
                    b = fx + sign * (th + scale * u.hi())
                    return min(a, b), max(a, b)

                if not _compare_exact(rng, rho, low, (u,)) or _compare_exact(rng, rho, high, (u,)):
                    return None
            return _exact_cell(rng, fx, bool(negative[j]), th, p.t, u)

        return z, accepted, exact, finish

    return one_round


def _range_check(
    rho_lo: NDArray[np.float64],
    rho_hi: NDArray[np.float64],
    cells: _Cells,
    idx: NDArray[np.intp],
    bounds: tuple[float, float],
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Is |x|/λ + X/λ = n + ρ inside the range, in lattice units ([l, u], mirrored to [−u, −l] for x < 0)?

    Returns (inside, decided). The thresholds (bound − n) are rounded once (error ≤ 2⁻⁵³ of their size),
    covered by a 2⁻⁵⁰ margin.
    """
    negative, n = cells.negative[idx], cells.n[idx]
    low = np.where(negative, -bounds[1], bounds[0]) - n
    high = np.where(negative, -bounds[0], bounds[1]) - n
    low_err = 2.0**-50 * (np.abs(low) + 1.0)
    high_err = 2.0**-50 * (np.abs(high) + 1.0)
    inside = (rho_lo >= low + low_err) & (rho_hi < high - high_err)
    outside = (rho_hi < low - low_err) | (rho_lo >= high + high_err)
    return inside, inside | outside


def _exact_bounds(cells: _Cells, i: int, bounds: tuple[float, float]) -> tuple[Fraction, Fraction]:
    """The range relative to n, exactly (mirrored for x < 0)."""
    n_i = Fraction(float(cells.n[i]))
    low, high = (-bounds[1], -bounds[0]) if cells.negative[i] else bounds
    return Fraction(low) - n_i, Fraction(high) - n_i


def laplace_cells(
    rng: np.random.Generator,
    values: NDArray[np.float64],
    scale: float,
    k: int,
    bounds: tuple[float, float] | None = None,
) -> NDArray[np.float64]:
    """Secure Laplace release: the centre of the cell of the lattice 2^k·ℤ that holds x + L, L ~ Lap(scale).

    m = ⌊(x + L)/λ⌋ is drawn from its exact law, a post-processing of the ideal Laplace mechanism; the
    centre (m + ½)λ is returned. In lattice units |L|/λ ~ Exp(c) with c = λ/scale exactly (the rational
    ``2**k / scale``), drawn by :class:`_ExpParams`, with a fair sign.

    With ``bounds`` = (l, u) the draw is repeated until l ≤ x + L ≤ u (exactly decided), which samples
    the Laplace law conditioned on [l, u] (the bounded Laplace mechanism) before the cell is taken.
    """
    p = _params_for(Fraction(2) ** k / Fraction(scale))
    lattice_bounds = None if bounds is None else (bounds[0] * 2.0**-k, bounds[1] * 2.0**-k)
    return _in_chunks(rng, values, k, lambda cells: _laplace_round(p, cells, lattice_bounds))


def laplace_integers(rng: np.random.Generator, scale: float, n: int) -> NDArray[np.int64]:
    """Secure noise for integer inputs: ⌊L + ½⌋ with L ~ Lap(scale) (Laplace rounded to the nearest
    integer, a post-processing of the ideal Laplace mechanism), sampled exactly."""
    p = _params_for(1 / Fraction(scale))
    return _integers_in_chunks(rng, n, lambda cells: _laplace_round(p, cells, None))


# ---- Gaussian ------------------------------------------------------------------------------------------


def _gaussian_round(p: _ExpParams, cells: _Cells, sigma: float) -> Round:
    """One round of Gaussian cells. |N|/λ is drawn by rejection from E ~ Exp(1/σ') (σ' = σ/λ): accept E
    with probability exp(−(E/σ' − 1)²/2), since e^{−e²/(2σ'²)} = e^{−1/2}·e^{−e/σ'}·e^{−(e/σ' − 1)²/2}."""
    s_exact = Fraction(sigma)

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        f = cells.f if idx is cells.index else cells.f[idx]
        draw = _draw_exponential(rng, p, idx.size)
        w_g = _words(rng, idx.size)
        negative = (draw.w_h & np.uint64(1)).astype(bool)
        e_lo, e_hi = _e_bounds(draw, p)
        q_lo, q_hi = e_lo / sigma, e_hi / sigma
        err = 2.0**-50 * (q_hi + 1.0)
        z_lo, z_hi = q_lo - 1.0 - err, q_hi - 1.0 + err
        sq_lo, sq_hi = z_lo * z_lo, z_hi * z_hi
        a_lo = np.where((z_lo <= 0.0) & (z_hi >= 0.0), 0.0, np.minimum(sq_lo, sq_hi)) * 0.5 * (1 - 2.0**-50)
        a_hi = np.maximum(sq_lo, sq_hi) * 0.5 * (1 + 2.0**-50)
        accepted, known = _squeeze_below(w_g, a_lo, a_hi)
        z, decided = _carry_z(draw.whole(p), draw.frac_prefix(p), p.t, negative, f)
        exact = draw.exact | ~known | (accepted & ~decided)

        def finish(j: int) -> int | None:
            th, u = _exact_e(rng, p, draw, j)
            scale = 1 << p.t

            def argument() -> tuple[Fraction, Fraction]:
                lo = (th + scale * u.lo()) / s_exact - 1
                hi = (th + scale * u.hi()) / s_exact - 1
                low = Fraction(0) if lo <= 0 <= hi else min(lo * lo, hi * hi) / 2
                return low, max(lo * lo, hi * hi) / 2

            if not _lt_exp(rng, _Lazy(int(w_g[j])), argument, (u,)):
                return None
            return _exact_cell(rng, cells.exact_f(int(idx[j])), bool(negative[j]), th, p.t, u)

        return z, accepted, exact, finish

    return one_round


_GAUSS_LOG2_ENTRIES = 11  # the block sampler's alias table: 2¹¹ − 1 blocks and the tail
_GAUSS_SIGMA_RANGE = (2.0**10, 2.0**48)  # σ' (lattice units) handled by the block sampler
_GAUSS_CHUNK = 1 << 17  # elements per pass of the block sampler (fewer passes per round than the others)


@dataclass(frozen=True)
class _GaussTable:
    """Constants of the exact block sampler of X with density ∝ φ(x) = e^{−x²/(2σ'²)} on [0, ∞).

    [0, R) is cut into K − 1 blocks [iB, (i + 1)B) of width B = 2^b, b = ⌊log₂ σ'⌋ − 6 (so σ'/128 < B ≤
    σ'/64), with R = (K − 1)B; entry K − 1 is the tail [R, ∞). Proposal: entry i with the dyadic
    probability q_i = W_i/2⁶³ (an alias table read from one 64-bit word: exact integer comparisons), then
    X = iB + B·U with U a lazy uniform (a block), or X = R + E with E ~ Exp(R/σ'²) exact (the tail).
    Acceptance, with W a lazy uniform:

    - block i: W < ρ_i·φ(X), ρ_i = S/W_i;
    - tail: W < ρ_t·e^{−(R² + E²)/(2σ'²)}, ρ_t = S·σ'²/(B·R·W_t).

    Both are φ(X)/(M·p(X)) for the proposal density p (q_i/B on block i, q_t·(R/σ'²)·e^{−R(X−R)/σ'²} on
    the tail) and the constant M = 2⁶³·B/S, so the accepted X has density ∝ φ exactly (rejection
    sampling). The integers W_i = ⌊S·ū_i·(1 + 2⁻⁴⁰)⌋ + 1, with ū_i a certified upper bound of φ(iB)
    (of φ(R)·σ'²/(R·B) for the tail) and S the largest integer that keeps ΣW_i ≤ 2⁶³ (the rest goes to
    W_0), make every acceptance probability at most 1 − 2⁻⁴¹. The overall acceptance is about
    1 − B/(2.5σ') ≥ 0.99.

    Vectorised decisions: the acceptance of block i is certain when the acceptance word is below
    ``acc[i]`` = ⌊2⁶⁴·ρ_i·φ_lo((i + 1)B)⌋ and its rejection when it is at least ``acc[i] + width[i]`` =
    ⌈2⁶⁴·ρ_i·φ_hi(iB)⌉ (φ is decreasing); in between (about B/σ' of the proposals) certified bounds of
    φ(X) from U's 64-bit prefix decide, and exact arithmetic continues the rest. Tail proposals always go
    to the exact path (their probability is about 2⁻⁶³).
    """

    s: Fraction  # σ'
    b: int
    log2_entries: int
    r: int  # R = (K − 1)·2^b
    inv2s2: float  # 1/(2σ'²) correctly rounded
    rho: tuple[Fraction, ...]
    rho_lo: NDArray[np.float64]
    rho_hi: NDArray[np.float64]
    keep2: NDArray[np.uint64]  # keep column j when the word's low 64 − κ bits are below keep2[j]
    alias: NDArray[np.int64]
    acc: NDArray[np.uint64]
    width: NDArray[np.uint64]
    tail: _ExpParams

    @property
    def tail_reject(self) -> int:
        """Tail proposals are rejected certainly when the acceptance word is at least this."""
        return int(self.width[-1])


def _alias_table(weights: list[int], column: int) -> tuple[list[int], list[int]]:
    """Vose's alias table for integer weights summing to len(weights)·``column``: column j keeps j with
    probability keep[j]/column, else gives alias[j]; entry i then has probability exactly weights[i]/Σ."""
    rest = list(weights)
    keep, alias = [column] * len(rest), list(range(len(rest)))
    small = [i for i, w in enumerate(rest) if w < column]
    large = [i for i, w in enumerate(rest) if w >= column]
    while small and large:
        lo, hi = small.pop(), large.pop()
        keep[lo], alias[lo] = rest[lo], hi
        rest[hi] -= column - rest[lo]
        (small if rest[hi] < column else large).append(hi)
    mass = [0] * len(rest)
    for j, (kept, other) in enumerate(zip(keep, alias, strict=True)):
        mass[j] += kept
        mass[other] += column - kept
    if mass != list(weights):  # pragma: no cover - integer arithmetic makes this exact
        raise AssertionError("alias table does not reproduce its weights")
    return keep, alias


@functools.lru_cache(maxsize=64)
def _gauss_table(numerator: int, denominator: int, log2_entries: int = _GAUSS_LOG2_ENTRIES) -> _GaussTable:
    s = Fraction(numerator, denominator)
    entries = 1 << log2_entries
    b = math.frexp(float(s))[1] - 1 - 6
    if b < 1 or entries < 4:
        raise InvalidParameterError(f"σ' = {float(s)} is too small for the block sampler", "sigma")
    width_b, blocks = 1 << b, entries - 1
    r = blocks * width_b
    inv2s2 = float(1 / (2 * s * s))  # correctly rounded, a normal float
    # a_i = (iB)²/(2σ'²): (iB)² = i²·2^{2b} is exact in floats, the product one rounding (≤ 2⁻⁵² relative
    # with that of 1/(2σ'²)), covered by the 2⁻⁵⁰ margin; φ(iB) ∈ [phi_lo[i], phi_hi[i]] certified
    points = np.arange(entries, dtype=np.float64) * float(width_b)
    a = points * points * inv2s2
    phi_lo, phi_hi = exp_neg_bounds(a * (1 - 2.0**-50), a * (1 + 2.0**-50))
    highs = [float(v).as_integer_ratio() for v in phi_hi]
    lows = [float(v).as_integer_ratio() for v in phi_lo]
    # ū_i as exact fractions m/d: φ_hi(iB) for the blocks, φ_hi(R)·σ'²/(R·B) for the tail
    tail_bound = (highs[blocks][0] * numerator**2, highs[blocks][1] * denominator**2 * r * width_b)
    upper = [*highs[:blocks], tail_bound]
    total = math.fsum(m / d for m, d in upper)  # int / int is correctly rounded
    scale = math.floor(((1 << 63) - entries) / (total * (1 + 2.0**-30) * (1 + 2.0**-40)))
    weights = [scale * m * ((1 << 40) + 1) // (d << 40) + 1 for m, d in upper]  # ⌊S·ū_i·(1 + 2⁻⁴⁰)⌋ + 1
    if sum(weights) > 1 << 63:  # pragma: no cover - excluded by the margins above
        raise AssertionError("block weights exceed 2⁶³")
    weights[0] += (1 << 63) - sum(weights)
    # ρ_i = S/W_i (blocks), ρ_t = S·σ'²/(B·R·W_t) (tail), as exact fractions rn/rd
    rho_nd = [(scale, w) for w in weights[:blocks]]
    rho_nd.append((scale * numerator**2, denominator**2 * width_b * r * weights[blocks]))
    acc, width = [], []
    for i, (rn, rd) in enumerate(rho_nd):
        m, d = highs[i]
        top = -(-(rn * m << 64) // (rd * d))  # ⌈2⁶⁴·ρ_i·φ_hi(iB)⌉ ≤ 2⁶⁴(1 − 2⁻⁴¹)
        low = 0
        if i < blocks:
            m, d = lows[i + 1]
            low = min((rn * m << 64) // (rd * d), _TWO64 - 1)  # ⌊2⁶⁴·ρ_i·φ_lo((i + 1)B)⌋
        if not 0 <= low <= top < _TWO64:  # pragma: no cover - guaranteed by the construction
            raise AssertionError("acceptance thresholds out of range")
        acc.append(low)
        width.append(top - low)
    keep, alias = _alias_table(weights, 1 << (63 - log2_entries))
    rho = [Fraction(rn, rd) for rn, rd in rho_nd]
    nearest = np.array([rn / rd for rn, rd in rho_nd[:blocks]] + [0.0])  # correctly rounded
    rho_lo = np.where(nearest > 0, np.nextafter(nearest, -np.inf), 0.0)  # the tail is decided exactly
    rho_hi = np.where(nearest > 0, np.nextafter(nearest, np.inf), 0.0)
    return _GaussTable(
        s=s,
        b=b,
        log2_entries=log2_entries,
        r=r,
        inv2s2=inv2s2,
        rho=tuple(rho),
        rho_lo=rho_lo,
        rho_hi=rho_hi,
        keep2=np.array([2 * v for v in keep], dtype=np.uint64),
        alias=np.array(alias, dtype=np.int64),
        acc=np.array(acc, dtype=np.uint64),
        width=np.array(width, dtype=np.uint64),
        tail=_params_for(Fraction(r) / (s * s)),
    )


def _gauss_tail(
    rng: np.random.Generator, g: _GaussTable, w: _Lazy, f: Fraction, negative: bool
) -> int | None:
    """A tail proposal X = R + E, E ~ Exp(R/σ'²), accepted when W < ρ_t·e^{−(R² + E²)/(2σ'²)}, exactly;
    returns ⌊f ± X⌋ or None (rejected)."""
    if w.num >= g.tail_reject:  # W ≥ ρ_t·φ(R), an upper bound of the acceptance probability
        return None
    th, u = _exact_e(rng, g.tail, _draw_exponential(rng, g.tail, 1), 0)  # E = th + T·U, exact
    scale, r2, half_inv = 1 << g.tail.t, Fraction(g.r * g.r), 1 / (2 * g.s * g.s)

    def argument() -> tuple[Fraction, Fraction]:
        lo, hi = th + scale * u.lo(), th + scale * u.hi()
        return (r2 + lo * lo) * half_inv, (r2 + hi * hi) * half_inv

    if not _lt_exp(rng, w, argument, (u,), g.rho[-1]):
        return None
    return _exact_cell(rng, f, negative, g.r + th, g.tail.t, u)


def _gauss_block_round(g: _GaussTable, cells: _Cells) -> Round:
    """One round of Gaussian cells by the block sampler (:class:`_GaussTable`): z = ⌊f + s·X⌋ with a fair
    sign s, and X = iB + B·U decided from integer comparisons of 64-bit words (as in :func:`_carry_z`)."""
    one = np.uint64(1)
    b = g.b
    shift_entry, low_mask = np.uint64(64 - g.log2_entries), np.uint64((1 << (64 - g.log2_entries)) - 1)
    shift_top, shift_b, step = np.uint64(64 - b), np.uint64(b), np.uint64(1 << b)
    tail_entry, width_b = (1 << g.log2_entries) - 1, float(1 << b)
    f_word = np.floor(cells.f * 2.0**64).astype(np.uint64)  # F = ⌊f·2⁶⁴⌋
    half_inv = 1 / (2 * g.s * g.s)

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        size = idx.size
        f_int = f_word if idx is cells.index else f_word[idx]
        w_h, w_u, w_a = _words(rng, size), _words(rng, size), _words(rng, size)
        # the entry i (alias method): column from the top κ bits, keep-or-alias from the bits below; bit 0
        # of w_h is the sign s (1: negative)
        column = (w_h >> shift_entry).view(np.int64)
        entry = np.where((w_h & low_mask) < g.keep2[column], column, g.alias[column])
        sign = w_h & one
        # acceptance: certain below acc, rejection certain from acc + width, the band in between
        acc = g.acc[entry]
        accepted = w_a < acc
        acc -= w_a
        np.negative(acc, out=acc)  # w_a − acc (mod 2⁶⁴): below width exactly in the band
        band = np.flatnonzero(acc < g.width[entry])
        # the cell: with vp = frac(B·U)·2⁶⁴ (up to 2^b) and G = F (s negative) or 2⁶⁴ − 1 − F (positive),
        # the carry (borrow) is certain when vp > G and impossible when G − vp ≥ 2^b (see _carry_z)
        vp = w_u << shift_b
        threshold = f_int ^ (sign - one)
        bump = vp > threshold
        threshold -= vp
        exact = threshold < step
        whole = entry << b
        whole += (w_u >> shift_top).view(np.int64)
        whole += bump
        minus = -sign.view(np.int64)
        whole ^= minus
        whole -= minus  # z = ±(⌊X⌋ + bump)
        if band.size:
            at = entry[band]
            tail = at == tail_entry
            u_lo = _word_lo(w_u[band])
            base = (at << b).astype(np.float64)
            y_lo = base + width_b * u_lo
            y_hi = base + width_b * (u_lo + _P53)
            # a = y²/(2σ'²) to within 5·2⁻⁵³ relative, covered by the 2⁻⁵⁰ margin
            th_lo, th_hi = exp_neg_bounds(
                y_lo * y_lo * g.inv2s2 * (1 - 2.0**-50), y_hi * y_hi * g.inv2s2 * (1 + 2.0**-50)
            )
            yes, decided = _decide_below(
                w_a[band], g.rho_lo[at] * th_lo * (1 - 2.0**-52), g.rho_hi[at] * th_hi * (1 + 2.0**-52)
            )
            accepted[band] = yes & ~tail
            exact[band] |= ~decided | tail

        def finish(j: int) -> int | None:
            i, w = int(entry[j]), _Lazy(int(w_a[j]))
            f, negative = cells.exact_f(int(idx[j])), bool(sign[j])
            if i == tail_entry:
                return _gauss_tail(rng, g, w, f, negative)
            th, u, scale = i << b, _Lazy(int(w_u[j])), 1 << b

            def argument() -> tuple[Fraction, Fraction]:
                lo, hi = th + scale * u.lo(), th + scale * u.hi()
                return lo * lo * half_inv, hi * hi * half_inv

            if not _lt_exp(rng, w, argument, (u,), g.rho[i]):
                return None
            return _exact_cell(rng, f, negative, th, b, u)

        return whole, accepted, exact, finish

    return one_round


def _gaussian_sampler(sigma: float) -> tuple[Callable[[_Cells], Round], int]:
    """(round maker, chunk size): the block sampler when σ' = ``sigma`` (lattice units) is in its range,
    else the exponential proposal (:func:`_gaussian_round`)."""
    if _GAUSS_SIGMA_RANGE[0] <= sigma < _GAUSS_SIGMA_RANGE[1]:
        table = _gauss_table(*Fraction(sigma).as_integer_ratio())
        return functools.partial(_gauss_block_round, table), _GAUSS_CHUNK
    p = _params_for(1 / Fraction(sigma))
    return (lambda cells: _gaussian_round(p, cells, sigma)), _CHUNK


def gaussian_cells(
    rng: np.random.Generator, values: NDArray[np.float64], sigma: float, k: int
) -> NDArray[np.float64]:
    """Secure Gaussian release: the centre of the cell of 2^k·ℤ that holds x + N, N ~ N(0, σ²), exactly.

    In lattice units σ' = σ/λ (exact); |N|/λ has density ∝ e^{−e²/(2σ'²)} on [0, ∞) and is drawn exactly by
    rejection, with a fair sign: for 2¹⁰ ≤ σ' < 2⁴⁸ (always the case for the mechanism's lattice, where
    2¹² ≤ σ' < 2¹³) from a piecewise-uniform proposal on blocks of width about σ'/100 with an exponential
    tail (:class:`_GaussTable`, acceptance above 0.99), otherwise from Exp(1/σ') (acceptance about 0.76).
    """
    make_round, chunk = _gaussian_sampler(sigma * 2.0**-k)
    return _in_chunks(rng, values, k, make_round, chunk)


def gaussian_integers(rng: np.random.Generator, sigma: float, n: int) -> NDArray[np.int64]:
    """Secure noise for integer inputs: N(0, σ²) rounded to the nearest integer, sampled exactly."""
    make_round, chunk = _gaussian_sampler(sigma)
    return _integers_in_chunks(rng, n, make_round, chunk)


# ---- Staircase -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _staircase_upper(epsilon: float, gamma: float, digits: int) -> tuple[Fraction, Fraction]:
    """Bounds of p₁ = (1 − γ)e^{−ε}/(γ + (1 − γ)e^{−ε}), the probability of the lower part of a step."""
    th_lo, th_hi = _exp_neg_exact(Fraction(epsilon), Fraction(epsilon), digits)
    g = Fraction(gamma)

    def p1(theta: Fraction) -> Fraction:
        den = g + (1 - g) * theta
        return (1 - g) * theta / den if den else Fraction(0)

    return p1(th_lo), p1(th_hi)  # p₁ increases with e^{−ε}


def _staircase_round(
    p: _ExpParams,
    cells: _Cells,
    epsilon: float,
    gamma: float,
    width: float,
    bounds: tuple[float, float] | None,
) -> Round:
    """One round of staircase cells: X/λ = s·D'(G + V), D' = Δ/λ, G = ⌊E⌋ with E ~ Exp(ε), V = γU or
    γ + (1 − γ)U after a Bernoulli(p₁), U uniform (Geng & Viswanath's construction)."""
    p1_lo, p1_hi = _staircase_upper(epsilon, gamma, 40)
    b_sure, b_none = _word_thresholds(p1_lo, p1_hi)
    g_exact, d_exact = Fraction(gamma), Fraction(width)
    one_minus_g = 1.0 - gamma

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        f = cells.f if idx is cells.index else cells.f[idx]
        draw = _draw_exponential(rng, p, idx.size)
        w_b, w_v = _words(rng, idx.size), _words(rng, idx.size)
        negative = (draw.w_h & np.uint64(1)).astype(bool)
        upper = w_b < b_sure
        b_known = upper | (w_b >= b_none) if b_none is not None else upper
        steps = draw.whole(p).astype(np.float64)
        u_lo = _word_lo(w_v)
        u_hi = u_lo + _P53
        v_lo = np.where(upper, gamma + one_minus_g * u_lo, gamma * u_lo)
        v_hi = np.where(upper, gamma + one_minus_g * u_hi, gamma * u_hi)
        q_lo, q_hi = width * (steps + v_lo), width * (steps + v_hi)
        err = 2.0**-49 * (width * (steps + 2.0) + 2.0)
        rho_lo = np.where(negative, f - q_hi, f + q_lo) - err
        rho_hi = np.where(negative, f - q_lo, f + q_hi) + err
        z = np.floor(rho_lo)
        decided = b_known & (z == np.floor(rho_hi))
        accepted = np.ones(idx.size, dtype=bool)
        if bounds is not None:
            inside, known = _range_check(rho_lo, rho_hi, cells, idx, bounds)
            accepted, decided = inside, decided & known
        exact = draw.exact | ~decided

        def finish(j: int) -> int | None:
            i = int(idx[j])
            th, u = _exact_e(rng, p, draw, j)
            g_steps = th + math.floor((1 << p.t) * u.lo())  # the top t bits of U: ⌊T·U⌋ exactly
            is_upper = _lt_fraction(
                rng, _Lazy(int(w_b[j])), lambda digits: _staircase_upper(epsilon, gamma, digits)
            )
            v = _Lazy(int(w_v[j]))
            fx, sign = cells.exact_f(i), (-1 if negative[j] else 1)

            def rho() -> tuple[Fraction, Fraction]:
                ends = []
                for uu in (v.lo(), v.hi()):
                    part = g_exact + (1 - g_exact) * uu if is_upper else g_exact * uu
                    ends.append(fx + sign * d_exact * (g_steps + part))
                return min(ends), max(ends)

            if bounds is not None:
                low, high = _exact_bounds(cells, i, bounds)
                if not _compare_exact(rng, rho, low, (v,)) or _compare_exact(rng, rho, high, (v,)):
                    return None
            return _floor_exact(rng, rho, (v,))

        return z.astype(np.int64), accepted, exact, finish

    return one_round


def staircase_cells(
    rng: np.random.Generator,
    values: NDArray[np.float64],
    epsilon: float,
    sensitivity: float,
    gamma: float,
    k: int,
    bounds: tuple[float, float] | None = None,
) -> NDArray[np.float64]:
    """Secure staircase release: the centre of the cell of 2^k·ℤ that holds x + X, X staircase noise.

    X = s·Δ·(G + V) (:class:`~dp_pipeline.mechanisms.Staircase`) with G an exact geometric
    (P(G ≥ g) = e^{−gε}), the Bernoulli(p₁) decided exactly and U a lazy uniform. With ``bounds`` the draw
    is repeated until l ≤ x + X ≤ u (the bounded staircase: the law conditioned on the range).
    """
    width = sensitivity * 2.0**-k
    p = _params_for(Fraction(epsilon))
    lattice_bounds = None if bounds is None else (bounds[0] * 2.0**-k, bounds[1] * 2.0**-k)
    return _in_chunks(
        rng, values, k, lambda cells: _staircase_round(p, cells, epsilon, gamma, width, lattice_bounds)
    )


def staircase_integers(
    rng: np.random.Generator, epsilon: float, sensitivity: float, gamma: float, n: int
) -> NDArray[np.int64]:
    """Secure noise for integer inputs: staircase noise rounded to the nearest integer, sampled exactly."""
    p = _params_for(Fraction(epsilon))
    return _integers_in_chunks(
        rng, n, lambda cells: _staircase_round(p, cells, epsilon, gamma, sensitivity, None)
    )


# ---- Randomized response -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _truth_probability(epsilon: float, others: int, digits: int) -> tuple[Fraction, Fraction]:
    """Bounds of p = 1/(1 + (k − 1)e^{−ε}) = e^ε/(e^ε + k − 1), k − 1 = ``others``."""
    th_lo, th_hi = _exp_neg_exact(Fraction(epsilon), Fraction(epsilon), digits)
    return 1 / (1 + others * th_hi), 1 / (1 + others * th_lo)


def truthful(rng: np.random.Generator, epsilon: float, categories: int, n: int) -> NDArray[np.bool_]:
    """Exact Bernoulli(p) with p = e^ε/(e^ε + k − 1): whether each randomized-response report is the truth.

    A lazy uniform W is compared with rational bounds of p; a 64-bit word decides all but about 2⁻⁴⁵ of the
    draws, the rest get more bits until decided.
    """
    p_lo, p_hi = _truth_probability(epsilon, categories - 1, 40)
    sure, none = _word_thresholds(p_lo, p_hi)
    w = _words(rng, n)
    out = w < sure
    undecided = ~out if none is None else ~out & (w < none)
    for i in np.flatnonzero(undecided):
        out[i] = _lt_fraction(
            rng, _Lazy(int(w[i])), lambda digits: _truth_probability(epsilon, categories - 1, digits)
        )
    return out


def other_offset(rng: np.random.Generator, categories: int, n: int) -> NDArray[np.int64]:
    """Uniform integers in {1, …, k − 1} (exact: numpy's bounded integers use rejection)."""
    return rng.integers(1, categories, size=n, dtype=np.int64)


# --------------------------------------------------------------------------------------------------------
# Secure path, part 6: the exponential mechanism by exact rejection sampling
# --------------------------------------------------------------------------------------------------------

_PROPOSALS = (16, 4096)  # proposals drawn (and decided) in the first vectorised round, and at most


def exponential_choice(rng: np.random.Generator, gammas: Sequence[Fraction], weights: Sequence[int]) -> int:
    """An index i drawn exactly with P(i) ∝ wᵢ·e^{−γᵢ} (rationals γᵢ ≥ 0, integers wᵢ ≥ 0, not all 0).

    Rejection sampling: propose i with probability wᵢ/Σw (an exact uniform integer below Σw located in the
    cumulative weights) and accept it with an exact Bernoulli(e^{−γᵢ}) (:func:`bernoulli_exp`'s certified
    bounds, exact arithmetic when they do not decide); the first accepted proposal is the draw. Proposals
    are drawn and decided in rounds (16 first, doubling up to 4096) and taken in order, so the draw is the
    first success of independent trials: its law is exactly the target. With min γ = 0 a trial succeeds
    with probability at least (the weight of the candidates with γ = 0)/Σw.
    """
    cumulative = np.cumsum(np.asarray(weights, dtype=np.int64))
    total = int(cumulative[-1])
    bounds = np.array([_float_bounds(g) for g in gammas], dtype=np.float64).reshape(-1, 2)
    size = _PROPOSALS[0]
    while True:
        idx = np.searchsorted(cumulative, rng.integers(0, total, size=size), side="right")
        w = _words(rng, size)
        low, high = exp_neg_bounds(bounds[idx, 0], bounds[idx, 1])
        accept, decided = _decide_below(w, low, high)
        for j in range(size):
            if not decided[j] or _FORCE_EXACT:
                exact = gammas[int(idx[j])]
                accept[j] = _lt_exp(rng, _Lazy(int(w[j])), functools.partial(_point, exact))
            if accept[j]:
                return int(idx[j])
        size = min(2 * size, _PROPOSALS[1])


def uniform_index(rng: np.random.Generator, n: int) -> int:
    """A uniform integer in {0, …, n − 1} (numpy's exact bounded-integer rejection sampler)."""
    return int(rng.integers(0, n))
