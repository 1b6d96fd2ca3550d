"""Secure Gaussian noise on the lattice: a block sampler with an exponential tail, or an exponential
proposal outside its range."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.mechanisms.sampling._bounds import decide_below, exp_neg_bounds, squeeze_below, word_lo
from dp_pipeline.mechanisms.sampling._exact import P53, TWO64, LazyUniform, below_exp, random_words
from dp_pipeline.mechanisms.sampling._exponential import ExpParams, draw_exponential, params_for
from dp_pipeline.mechanisms.sampling._lattice import (
    CHUNK,
    Cells,
    Round,
    carry_z,
    e_bounds,
    exact_cell,
    exact_e,
    in_chunks,
    integers_in_chunks,
)

__all__ = [
    "gaussian_cells",
    "gaussian_integers",
]


def _gaussian_round(p: ExpParams, cells: Cells, sigma: float) -> Round:
    """One round of Gaussian cells. |N|/λ is drawn by rejection from E ~ Exp(1/σ') (σ' = σ/λ): accept E
    with probability exp(−(E/σ' − 1)²/2), since e^{−e²/(2σ'²)} = e^{−1/2}·e^{−e/σ'}·e^{−(e/σ' − 1)²/2}."""
    s_exact = Fraction(sigma)

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        f = cells.f if idx is cells.index else cells.f[idx]
        draw = draw_exponential(rng, p, idx.size)
        w_g = random_words(rng, idx.size)
        negative = (draw.w_h & np.uint64(1)).astype(bool)
        e_lo, e_hi = e_bounds(draw, p)
        q_lo, q_hi = e_lo / sigma, e_hi / sigma
        err = 2.0**-50 * (q_hi + 1.0)
        z_lo, z_hi = q_lo - 1.0 - err, q_hi - 1.0 + err
        sq_lo, sq_hi = z_lo * z_lo, z_hi * z_hi
        a_lo = np.where((z_lo <= 0.0) & (z_hi >= 0.0), 0.0, np.minimum(sq_lo, sq_hi)) * 0.5 * (1 - 2.0**-50)
        a_hi = np.maximum(sq_lo, sq_hi) * 0.5 * (1 + 2.0**-50)
        accepted, known = squeeze_below(w_g, a_lo, a_hi)
        z, decided = carry_z(draw.whole(p), draw.frac_prefix(p), p.t, negative, f)
        exact = draw.exact | ~known | (accepted & ~decided)

        def finish(j: int) -> int | None:
            th, u = exact_e(rng, p, draw, j)
            scale = 1 << p.t

            def argument() -> tuple[Fraction, Fraction]:
                lo = (th + scale * u.lo()) / s_exact - 1
                hi = (th + scale * u.hi()) / s_exact - 1
                low = Fraction(0) if lo <= 0 <= hi else min(lo * lo, hi * hi) / 2
                return low, max(lo * lo, hi * hi) / 2

            if not below_exp(rng, LazyUniform(int(w_g[j])), argument, (u,)):
                return None
            return exact_cell(rng, cells.exact_f(int(idx[j])), bool(negative[j]), th, p.t, u)

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
    tail: ExpParams

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
            low = min((rn * m << 64) // (rd * d), TWO64 - 1)  # ⌊2⁶⁴·ρ_i·φ_lo((i + 1)B)⌋
        if not 0 <= low <= top < TWO64:  # pragma: no cover - guaranteed by the construction
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
        tail=params_for(Fraction(r) / (s * s)),
    )


def _gauss_tail(
    rng: np.random.Generator, g: _GaussTable, w: LazyUniform, f: Fraction, negative: bool
) -> int | None:
    """A tail proposal X = R + E, E ~ Exp(R/σ'²), accepted when W < ρ_t·e^{−(R² + E²)/(2σ'²)}, exactly;
    returns ⌊f ± X⌋ or None (rejected)."""
    if w.num >= g.tail_reject:  # W ≥ ρ_t·φ(R), an upper bound of the acceptance probability
        return None
    th, u = exact_e(rng, g.tail, draw_exponential(rng, g.tail, 1), 0)  # E = th + T·U, exact
    scale, r2, half_inv = 1 << g.tail.t, Fraction(g.r * g.r), 1 / (2 * g.s * g.s)

    def argument() -> tuple[Fraction, Fraction]:
        lo, hi = th + scale * u.lo(), th + scale * u.hi()
        return (r2 + lo * lo) * half_inv, (r2 + hi * hi) * half_inv

    if not below_exp(rng, w, argument, (u,), g.rho[-1]):
        return None
    return exact_cell(rng, f, negative, g.r + th, g.tail.t, u)


def _gauss_block_round(g: _GaussTable, cells: Cells) -> Round:
    """One round of Gaussian cells by the block sampler (:class:`_GaussTable`): z = ⌊f + s·X⌋ with a fair
    sign s, and X = iB + B·U decided from integer comparisons of 64-bit words (as in :func:`carry_z`)."""
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
        w_h, w_u, w_a = random_words(rng, size), random_words(rng, size), random_words(rng, size)
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
        # the carry (borrow) is certain when vp > G and impossible when G − vp ≥ 2^b (see carry_z)
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
            u_lo = word_lo(w_u[band])
            base = (at << b).astype(np.float64)
            y_lo = base + width_b * u_lo
            y_hi = base + width_b * (u_lo + P53)
            # a = y²/(2σ'²) to within 5·2⁻⁵³ relative, covered by the 2⁻⁵⁰ margin
            th_lo, th_hi = exp_neg_bounds(
                y_lo * y_lo * g.inv2s2 * (1 - 2.0**-50), y_hi * y_hi * g.inv2s2 * (1 + 2.0**-50)
            )
            yes, decided = decide_below(
                w_a[band], g.rho_lo[at] * th_lo * (1 - 2.0**-52), g.rho_hi[at] * th_hi * (1 + 2.0**-52)
            )
            accepted[band] = yes & ~tail
            exact[band] |= ~decided | tail

        def finish(j: int) -> int | None:
            i, w = int(entry[j]), LazyUniform(int(w_a[j]))
            f, negative = cells.exact_f(int(idx[j])), bool(sign[j])
            if i == tail_entry:
                return _gauss_tail(rng, g, w, f, negative)
            th, u, scale = i << b, LazyUniform(int(w_u[j])), 1 << b

            def argument() -> tuple[Fraction, Fraction]:
                lo, hi = th + scale * u.lo(), th + scale * u.hi()
                return lo * lo * half_inv, hi * hi * half_inv

            if not below_exp(rng, w, argument, (u,), g.rho[i]):
                return None
            return exact_cell(rng, f, negative, th, b, u)

        return whole, accepted, exact, finish

    return one_round


def _gaussian_sampler(sigma: float) -> tuple[Callable[[Cells], Round], int]:
    """(round maker, chunk size): the block sampler when σ' = ``sigma`` (lattice units) is in its range,
    else the exponential proposal (:func:`_gaussian_round`)."""
    if _GAUSS_SIGMA_RANGE[0] <= sigma < _GAUSS_SIGMA_RANGE[1]:
        table = _gauss_table(*Fraction(sigma).as_integer_ratio())
        return functools.partial(_gauss_block_round, table), _GAUSS_CHUNK
    p = params_for(1 / Fraction(sigma))
    return (lambda cells: _gaussian_round(p, cells, sigma)), CHUNK


def gaussian_cells(
    rng: np.random.Generator,
    values: NDArray[np.float64],
    sigma: float,
    k: int,
    offsets: Sequence[int] | None = None,
) -> NDArray[np.float64]:
    """Secure Gaussian release: the centre of the cell of 2^k·ℤ that holds x + N, N ~ N(0, σ²), exactly.

    In lattice units σ' = σ/λ (exact); |N|/λ has density ∝ e^{−e²/(2σ'²)} on [0, ∞) and is drawn exactly by
    rejection, with a fair sign: for 2¹⁰ ≤ σ' < 2⁴⁸ (always the case for the mechanism's lattice, where
    2¹² ≤ σ' < 2¹³) from a piecewise-uniform proposal on blocks of width about σ'/100 with an exponential
    tail (:class:`_GaussTable`, acceptance above 0.99), otherwise from Exp(1/σ') (acceptance about 0.76).
    ``offsets`` (one integer oᵢ per non-negative xᵢ): the input is the exact oᵢ·2^k + xᵢ (see
    :func:`~dp_pipeline.mechanisms.sampling._lattice.in_chunks`).
    """
    make_round, chunk = _gaussian_sampler(sigma * 2.0**-k)
    return in_chunks(rng, values, k, make_round, chunk, offsets)


def gaussian_integers(rng: np.random.Generator, sigma: float, n: int) -> NDArray[np.int64]:
    """Secure noise for integer inputs: N(0, σ²) rounded to the nearest integer, sampled exactly."""
    make_round, chunk = _gaussian_sampler(sigma)
    return integers_in_chunks(rng, n, make_round, chunk)
