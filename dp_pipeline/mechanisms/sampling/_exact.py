"""Random words, lazy uniforms and exact comparisons (scalar, exact rational arithmetic).

The continuation of every secure sampler: what the vectorised float decisions leave undecided is decided
here, drawing further random bits until the comparison is certain."""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "P53",
    "TWO64",
    "U11",
    "LazyUniform",
    "below_exp",
    "below_fraction",
    "compare_exact",
    "exp_neg_exact",
    "floor_exact",
    "lazy_uniform",
    "point_interval",
    "random_words",
]

TWO64 = 1 << 64
FORCE_EXACT = False  # tests only: send every element through the exact continuation (same law, slower)
U11 = np.uint64(11)
P53 = 2.0**-53


def random_words(rng: np.random.Generator, n: int) -> NDArray[np.uint64]:
    """``n`` independent uniform 64-bit words."""
    return rng.integers(0, TWO64, size=n, dtype=np.uint64)


class LazyUniform:
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
        self.num = (self.num << 64) | int(random_words(rng, 1)[0])
        self.bits += 64


def lazy_uniform(rng: np.random.Generator, word: Any = None) -> LazyUniform:
    return LazyUniform(int(random_words(rng, 1)[0]) if word is None else int(word))


def exp_neg_exact(a_lo: Fraction, a_hi: Fraction, digits: int) -> tuple[Fraction, Fraction]:
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


def point_interval(value: Fraction) -> tuple[Fraction, Fraction]:
    return value, value


def below_exp(
    rng: np.random.Generator,
    w: LazyUniform,
    argument: Callable[[], tuple[Fraction, Fraction]],
    also: tuple[LazyUniform, ...] = (),
    factor: Fraction = Fraction(1),
) -> bool:
    """Exactly decide W < ρ·e^{−a} (ρ = ``factor`` ≥ 0): ``argument()`` bounds a (it may depend on the
    lazies in ``also``).

    While the bounds do not decide, W and every lazy in ``also`` get 64 more bits and the precision grows.
    """
    digits = 40
    while True:
        a_lo, a_hi = argument()
        low, high = exp_neg_exact(max(a_lo, Fraction(0)), max(a_hi, Fraction(0)), digits)
        low, high = low * factor, high * factor
        if w.hi() <= low:
            return True
        if w.lo() >= high:
            return False
        w.refine(rng)
        for other in also:
            other.refine(rng)
        digits += 25


def below_fraction(
    rng: np.random.Generator, w: LazyUniform, p: Callable[[int], tuple[Fraction, Fraction]]
) -> bool:
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


def floor_exact(
    rng: np.random.Generator, bounds: Callable[[], tuple[Fraction, Fraction]], lazies: tuple[LazyUniform, ...]
) -> int:
    """⌊y⌋ of a real y known to lie in ``bounds()``, refining ``lazies`` until both ends share the floor."""
    while True:
        low, high = bounds()
        if math.floor(low) == math.floor(high):
            return math.floor(low)
        for lazy in lazies:
            lazy.refine(rng)


def compare_exact(
    rng: np.random.Generator,
    bounds: Callable[[], tuple[Fraction, Fraction]],
    threshold: Fraction,
    lazies: tuple[LazyUniform, ...],
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
