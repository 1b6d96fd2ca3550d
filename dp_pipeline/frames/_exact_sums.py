"""Bounded sums that are exact, and noise added to the exact sum: the sensitivity holds for the sum released.

A float sum is not the real sum: each addition rounds, and the error depends on all the other rows and on
their order, so one person can move a float sum of values in [l, u] by more than the sensitivity the noise
is calibrated to (Casacuberta, Shoemate, Vadhan & Wagaman, CCS 2022: the excess grows about as n²·2⁻⁵³).
The frame functions therefore never release a float sum:

1. **Quantise.** Each row's value v (a clipped value, a centred value or its square, or 1 for a count),
   which lies in the part's declared range [l, u], becomes the integer q = trunc(v / 2^j) on the grid 2^j
   (rounding toward zero). Then q·2^j lies between 0 and v, so in [min(l, 0), max(u, 0)]; the sensitivity
   of :func:`~dp_pipeline.frames._core.sensitivity` depends on l and u only through M = max(|l|, |u|) and
   W = max(u, 0) − min(l, 0), which are the same for [min(l, 0), max(u, 0)]: **the calibrated sensitivity
   holds for the quantised values, with no inflation and no bound on the number of rows.**
2. **Sum exactly.** |q| < 2⁵³ (see :func:`grid_exponent`), so each q is an exact int64; the engines add
   the q of each key exactly (pandas: high and low 26-bit halves in int64, then Python integers; Spark:
   DecimalType(38, 0)). The sum S = T·2^j, T a Python integer, is exact whatever the number of rows.
3. **Noise on the exact sum, rounded once.** The secure samplers release the centre of the cell of the
   lattice λℤ (λ = 2^k, set by the noise scale) that holds S + X, X the ideal noise. With S = o·λ + r,
   o = ⌊S/λ⌋ and 0 ≤ r < λ, the cell of S + X is o plus the cell of r + X; r is a float exactly because
   the grid is never finer than λ·2⁻⁵³ (j ≥ k − 53), and o is any integer. The released value is the
   centre (o + z + ½)·λ rounded once to a float: a deterministic function of the cell of S + X, i.e. a
   post-processing of the ideal mechanism applied to the exact sum S, whose sensitivity is the calibrated
   one. So the rounding of the sum to a float adds no sensitivity.

The grid is as fine as a float of the range allows (2^j = ulp-scale of M, j = e − 53 for M < 2^e), and
never finer than λ·2⁻⁵³: each value moves by less than 2^j toward zero, which is at most 2⁻⁵² of M (or
2⁻⁶⁵ of the noise scale), far below the noise.

With a :class:`~dp_pipeline.mechanisms.sampling.FastGenerator` (simulations only) the noise is added to
the exact sum rounded to the nearest float, as textbook float noise is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms import ContinuousMechanism, Gaussian, Laplace, sampling

__all__ = [
    "HALF",
    "SPLIT_ROWS",
    "ExactSums",
    "exact_total",
    "grid_exponent",
    "grid_integers",
    "join_sum",
    "noisy_sums",
    "one_on_grid",
    "split_sum",
]

_FINEST = -1074  # 2^-1074, the smallest subnormal: every float is a multiple of it
_BLOCK = 512  # 512 values below 2^53 sum below 2^62 in int64
HALF = 26  # q = hi·2^26 + lo, |hi| ≤ 2^27, 0 ≤ lo < 2^26: int64 sums of either are exact below 2^36 rows
SPLIT_ROWS = 1 << 35
"""Rows summed at once in int64 halves; longer frames are summed in slices of this many rows."""


@dataclass(frozen=True)
class ExactSums:
    """Exact sums: ``totals[p][key]``·2^``exponents[p]`` for each part p and key (Python integers)."""

    totals: list[list[int]]
    exponents: list[int]

    def value(self, part: int) -> NDArray[np.float64]:
        """The exact sums of a part, each rounded once to the nearest float (for display and tests)."""
        scale = Fraction(2) ** self.exponents[part]
        return np.array([float(t * scale) for t in self.totals[part]], dtype=np.float64)


def grid_exponent(low: float, high: float, noise: ContinuousMechanism) -> int:
    """j of the grid 2^j of values in [low, high] released with the mechanism ``noise``.

    j = max(e − 53, k − 53, −1074), with M = max(|low|, |high|) < 2^e (frexp) and λ = 2^k the noise's
    lattice: |v|/2^j < 2^e/2^(e−53) = 2⁵³, so q fits an int64 and a float exactly; the residual r < λ of
    the sum is a multiple of 2^j below 2^(j+53), hence a float; and 2^j is at least the smallest subnormal.
    """
    magnitude = max(abs(low), abs(high))
    e = math.frexp(magnitude)[1] if magnitude > 0 else _FINEST
    k = math.frexp(_lattice(noise))[1] - 1
    return max(e - 53, k - 53, _FINEST)


def _lattice(noise: ContinuousMechanism) -> float:
    if not isinstance(noise, Laplace | Gaussian):
        raise TypeError(f"no lattice for {type(noise).__name__}")
    return noise.lattice


def grid_integers(values: NDArray[np.float64], exponent: int) -> NDArray[np.int64]:
    """q = trunc(v / 2^j) of each value, exactly: scaling by a power of two is exact above the subnormals
    (a value that falls among them is below 1 and truncates to 0 either way), and the cast to int64
    truncates toward zero (|v / 2^j| < 2⁵³)."""
    power = math.ldexp(1.0, -exponent) if -1022 <= exponent <= 1023 else None
    scaled = np.ldexp(values, -exponent) if power is None else values * power
    return scaled.astype(np.int64)


def exact_total(q: NDArray[np.int64]) -> int:
    """Σq exactly: int64 sums of blocks of 512 (each below 2⁶²), then Python integers."""
    whole = q.size - q.size % _BLOCK
    blocks = q[:whole].reshape(-1, _BLOCK).sum(axis=1)
    return sum(blocks.tolist(), int(q[whole:].sum()))


def one_on_grid(exponent: int) -> int:
    """q of the value 1 (each row of a count): trunc(2^−j)."""
    return 1 << -exponent if exponent <= 0 else 0


def split_sum(q: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(hi, lo) with q = hi·2^26 + lo: int64 sums of each are exact for at most :data:`SPLIT_ROWS` rows."""
    return q >> HALF, q & ((1 << HALF) - 1)


def join_sum(hi: int, lo: int) -> int:
    """Σq from Σhi and Σlo (Python integers)."""
    return (int(hi) << HALF) + int(lo)


def noisy_sums(
    noise: ContinuousMechanism, totals: Sequence[int], exponent: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """The noisy release of each exact sum T·2^j (see the module notes, step 3)."""
    if sampling.is_fast(rng):
        exact = ExactSums([list(totals)], [exponent]).value(0)
        return np.asarray(noise.randomize(exact, rng), dtype=np.float64)
    lattice = _lattice(noise)
    k = math.frexp(lattice)[1] - 1
    shift = k - exponent  # ≤ 53 by grid_exponent
    if shift >= 0:
        whole = [t >> shift for t in totals]  # ⌊S/λ⌋
        residual = np.array(
            [math.ldexp(t - (w << shift), exponent) for t, w in zip(totals, whole, strict=True)]
        )
    else:
        whole = [t << -shift for t in totals]
        residual = np.zeros(len(totals))
    if isinstance(noise, Laplace):
        return sampling.laplace_cells(rng, residual, noise.scale, k, offsets=whole)
    assert isinstance(noise, Gaussian)
    return sampling.gaussian_cells(rng, residual, noise.sigma, k, offsets=whole)
