"""Lattice cells of continuous noise: inputs in lattice units, the released cell centres, and the
rounds of rejection samplers that decide each cell exactly."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms.sampling import _exact
from dp_pipeline.mechanisms.sampling._bounds import word_lo
from dp_pipeline.mechanisms.sampling._exact import P53, TWO64, LazyUniform, compare_exact, floor_exact
from dp_pipeline.mechanisms.sampling._exponential import ExpDraw, ExpParams, exact_exponential

__all__ = [
    "CHUNK",
    "Cells",
    "Round",
    "carry_z",
    "e_bounds",
    "exact_cell",
    "exact_e",
    "in_chunks",
    "integers_in_chunks",
    "lattice_exponent",
    "outside_exact",
    "range_check",
]


def lattice_exponent(scale: float, resolution: int = 12) -> int:
    """k with λ = 2^k and 2^{k + resolution} ≤ scale < 2^{k + resolution + 1} (clipped to [−1000, 1000])."""
    _, exponent = math.frexp(scale)
    return int(min(max(exponent - 1 - resolution, -1000), 1000))


@dataclass
class Cells:
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


def _to_cells(values: NDArray[np.float64], k: int) -> Cells:
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    u = np.abs(flat)
    with np.errstate(over="ignore"):
        u *= 2.0**-k  # exact scaling (a subnormal result only moves f below 2⁻¹⁰²²)
    big = ~(u < 2.0**52)
    if big.any():
        u[big] = 0.0
    n = np.floor(u)
    u -= n
    return Cells(n, u, big, np.signbit(flat), k, flat, np.arange(flat.size))


def _integer_cells(n: int) -> Cells:
    """Integer inputs: λ = 1 and f = ½, so that x + ⌊½ + X⌋ is x + X rounded to the nearest integer."""
    zeros = np.zeros(n)
    false = np.zeros(n, dtype=bool)
    return Cells(zeros, np.full(n, 0.5), false, false, 0, zeros, np.arange(n))


def _exact_centre(x: float, z: int, k: int) -> float:
    scale = Fraction(2) ** k
    centre = (math.floor(abs(Fraction(x)) / scale) + z + Fraction(1, 2)) * scale
    try:
        value = float(centre)
    except OverflowError:
        value = math.inf
    return -value if math.copysign(1.0, x) < 0 else value


def _release_cells(
    cells: Cells, z: NDArray[np.int64], shape: tuple[int, ...], offsets: Sequence[int] | None = None
) -> NDArray[np.float64]:
    """The centre ±(n + z + ½)·λ of each released cell: exact in floats below 2⁵¹ cells, else one rounding
    of the exact value (either way a deterministic function of the exact cell). With ``offsets`` (whole
    cells oᵢ added to non-negative inputs), the centre (oᵢ + n + z + ½)·λ, rounded once."""
    if offsets is not None:
        cell = zip(cells.values, z, offsets, strict=True)
        return np.array([_exact_centre(float(x), int(zi) + o, cells.k) for x, zi, o in cell]).reshape(shape)
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


def carry_z(
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
    no_carry = ~carry & (total <= np.uint64(TWO64 - 1) - step)
    borrow = vp >= f_int + np.uint64(1)
    no_borrow = (f_int >= step) & (vp <= f_int - step)
    z = np.where(negative, -whole - borrow.astype(np.int64), whole + carry.astype(np.int64))
    decided = np.where(negative, borrow | no_borrow, carry | no_carry)
    return z, decided


def exact_cell(rng: np.random.Generator, f: Fraction, negative: bool, th: int, t: int, u: LazyUniform) -> int:
    """⌊f + s·(T·h + T·U)⌋ exactly."""
    scale = 1 << t
    sign = -1 if negative else 1

    def bounds() -> tuple[Fraction, Fraction]:
        a = f + sign * (th + scale * u.lo())
        b = f + sign * (th + scale * u.hi())
        return min(a, b), max(a, b)

    return floor_exact(rng, bounds, (u,))


def e_bounds(draw: ExpDraw, p: ExpParams) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Float bounds of E = ⌊E⌋ + frac(E) from the draw (absolute error ≤ 2⁻⁵⁰(⌊E⌋ + 2))."""
    whole = draw.whole(p).astype(np.float64)
    vp = draw.frac_prefix(p)
    width = P53 * max(1.0, 2.0 ** (p.t - 11))
    lo = whole + word_lo(vp)
    hi = whole + (word_lo(vp) + width)
    err = 2.0**-50 * (whole + 2.0)
    return lo - err, hi + err


def exact_e(rng: np.random.Generator, p: ExpParams, draw: ExpDraw, i: int) -> tuple[int, LazyUniform]:
    """(T·H, U) of element ``i``: exactly continued when its draw was undecided, else read from the draw."""
    if draw.exact[i]:
        return exact_exponential(rng, p, (draw.w_h[i], draw.w_u[i], draw.w_a[i]))
    return int(draw.h[i]) << p.t, LazyUniform(int(draw.w_u[i]))


Round = Callable[
    [np.random.Generator, NDArray[np.intp]],
    tuple[NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_], Callable[[int], "int | None"]],
]


CHUNK = 1 << 16  # elements per pass: the working arrays stay in the processor's cache


def in_chunks(
    rng: np.random.Generator,
    values: NDArray[np.float64],
    k: int,
    make_round: Callable[[Cells], Round],
    chunk: int = CHUNK,
    offsets: Sequence[int] | None = None,
) -> NDArray[np.float64]:
    """Release the lattice cells of ``values`` chunk by chunk (same law; faster than whole arrays).

    ``offsets``: integers oᵢ (any size) for non-negative ``values`` xᵢ: the input is then the exact real
    oᵢ·λ + xᵢ, which a float need not hold. The cell of oᵢ·λ + xᵢ + X is oᵢ plus the cell of xᵢ + X
    (λ-periodic lattice), so the release is the ideal mechanism's on that exact input."""
    flat = np.ascontiguousarray(values, dtype=np.float64).ravel()
    if offsets is not None and (len(offsets) != flat.size or bool(np.signbit(flat).any())):
        raise ValueError("offsets need one integer per value and non-negative values")
    out = np.empty(flat.size, dtype=np.float64)
    for start in range(0, flat.size, chunk):
        cells = _to_cells(flat[start : start + chunk], k)
        z = _run_rounds(rng, cells.f.size, make_round(cells), cells.index)
        part = None if offsets is None else offsets[start : start + chunk]
        out[start : start + chunk] = _release_cells(cells, z, (cells.f.size,), part)
    return out.reshape(values.shape)


def integers_in_chunks(
    rng: np.random.Generator, n: int, make_round: Callable[[Cells], Round], chunk: int = CHUNK
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
    if _exact.FORCE_EXACT:
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
        if _exact.FORCE_EXACT:
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


def range_check(
    rho_lo: NDArray[np.float64],
    rho_hi: NDArray[np.float64],
    cells: Cells,
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


def outside_exact(
    rng: np.random.Generator,
    rho: Callable[[], tuple[Fraction, Fraction]],
    cells: Cells,
    i: int,
    bounds: tuple[float, float],
    lazies: tuple[LazyUniform, ...],
) -> bool:
    """Exactly decide whether n + ρ of element ``i``, with ρ in ``rho()``, lies outside the range in lattice
    units (below l or at or above u; mirrored to [−u, −l] for x < 0), refining ``lazies``."""
    n_i = Fraction(float(cells.n[i]))
    low, high = (-bounds[1], -bounds[0]) if cells.negative[i] else bounds
    below = not compare_exact(rng, rho, Fraction(low) - n_i, lazies)
    return below or compare_exact(rng, rho, Fraction(high) - n_i, lazies)
