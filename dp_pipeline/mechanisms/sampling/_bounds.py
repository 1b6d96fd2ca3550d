"""Certified float bounds (vectorised): e^{−a} without a library ``exp``, and the decisions
W < p that 64 random bits settle."""

from __future__ import annotations

import decimal
import functools
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms.sampling._exact import P53, TWO64, U11

__all__ = [
    "decide_below",
    "exp_neg_bounds",
    "float_bounds",
    "squeeze_below",
    "threshold_word",
    "word_lo",
    "word_thresholds",
]

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


def squeeze_below(
    w: NDArray[np.uint64], a_lo: NDArray[np.float64], a_hi: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Decide W < e^{−a} for a in [a_lo, a_hi] (a ≥ 0): (W < e^{−a} certainly, decided).

    Polynomial bounds first, valid for every a ≥ 0: e^{−a} ≥ 1 − a + a²/2 − a³/6 and
    e^{−a} ≤ min(1 − a + a²/2, 1/(1 + a + a²/2)); float rounding is covered by a 2⁻⁴⁸ margin. Only the
    elements they leave undecided get :func:`exp_neg_bounds`.
    """
    lo = word_lo(w)
    x = a_hi
    lower = 1.0 - x * (1.0 - x * (0.5 - x * (1.0 / 6.0))) - 2.0**-48 * (1.0 + x * x * x)
    yes = lo + P53 <= lower
    y = np.maximum(a_lo, 0.0)
    upper = np.minimum(1.0 - y * (1.0 - 0.5 * y), 1.0 / (1.0 + y * (1.0 + 0.5 * y))) * (1.0 + 2.0**-48)
    decided = yes | (lo >= upper)
    rest = np.flatnonzero(~decided)
    if rest.size:
        th_lo, th_hi = exp_neg_bounds(a_lo[rest], a_hi[rest])
        yes_rest, decided_rest = decide_below(w[rest], th_lo, th_hi)
        yes[rest] = yes_rest
        decided[rest] = decided_rest
    return yes, decided


def word_lo(w: NDArray[np.uint64]) -> NDArray[np.float64]:
    """A float lower bound of W = w/2⁶⁴ that is within 2⁻⁵³ of it: W lies in [lo, lo + 2⁻⁵³)."""
    return (w >> U11).astype(np.float64) * P53


def decide_below(
    w: NDArray[np.uint64], p_lo: NDArray[np.float64], p_hi: NDArray[np.float64]
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """For a lazy uniform with 64-bit prefix ``w`` and p in [p_lo, p_hi]: (W < p certainly, decided)."""
    lo = word_lo(w)
    yes = lo + P53 <= p_lo
    no = lo >= p_hi
    return yes, yes | no


def threshold_word(p: float, upward: bool) -> int:
    """⌊p·2⁶⁴⌋ (or ⌈p·2⁶⁴⌉ with ``upward``) of a float p, clipped to [0, 2⁶⁴ − 1]."""
    value = Fraction(p) * TWO64
    whole = math.ceil(value) if upward else math.floor(value)
    return min(max(whole, 0), TWO64 - 1)


def word_thresholds(p_lo: Fraction, p_hi: Fraction) -> tuple[np.uint64, np.uint64 | None]:
    """For p in [p_lo, p_hi] and a lazy uniform with 64-bit prefix w: W < p is certain when w < sure, and
    W ≥ p is certain when w ≥ none (None: never certain from 64 bits)."""
    sure = np.uint64(min(max(math.floor(p_lo * TWO64), 0), TWO64 - 1))
    top = math.ceil(p_hi * TWO64)
    return sure, (np.uint64(max(top, 0)) if top < TWO64 else None)


def float_bounds(value: Fraction) -> tuple[float, float]:
    """Adjacent floats lo ≤ value ≤ hi."""
    nearest = float(value)
    lo = nearest if Fraction(nearest) <= value else math.nextafter(nearest, -math.inf)
    hi = nearest if Fraction(nearest) >= value else math.nextafter(nearest, math.inf)
    return lo, hi
