"""Secure Laplace noise (and bounded Laplace: the Laplace law conditioned on a range) on the lattice."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms.sampling._exponential import ExpParams, draw_exponential, params_for
from dp_pipeline.mechanisms.sampling._lattice import (
    Cells,
    Round,
    carry_z,
    e_bounds,
    exact_cell,
    exact_e,
    in_chunks,
    integers_in_chunks,
    outside_exact,
    range_check,
)

__all__ = [
    "laplace_cells",
    "laplace_integers",
]


def _laplace_round(p: ExpParams, cells: Cells, bounds: tuple[float, float] | None = None) -> Round:
    """One round of Laplace cells; with ``bounds`` = (lower, upper) in lattice units, outputs outside the
    range are rejected (bounded Laplace: the Laplace law conditioned on the range)."""

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        f = cells.f if idx is cells.index else cells.f[idx]
        draw = draw_exponential(rng, p, idx.size)
        negative = (draw.w_h & np.uint64(1)).astype(bool)
        z, decided = carry_z(draw.whole(p), draw.frac_prefix(p), p.t, negative, f)
        accepted = np.ones(idx.size, dtype=bool)
        if bounds is not None:
            e_lo, e_hi = e_bounds(draw, p)
            rho_lo = np.where(negative, f - e_hi, f + e_lo)
            rho_hi = np.where(negative, f - e_lo, f + e_hi)
            inside, known = range_check(rho_lo, rho_hi, cells, idx, bounds)
            accepted, decided = inside, decided & known
        exact = draw.exact | ~decided

        def finish(j: int) -> int | None:
            i = int(idx[j])
            th, u = exact_e(rng, p, draw, j)
            fx = cells.exact_f(i)
            sign = -1 if negative[j] else 1
            if bounds is not None:
                scale = 1 << p.t

                def rho() -> tuple[Fraction, Fraction]:
                    a = fx + sign * (th + scale * u.lo())
                    b = fx + sign * (th + scale * u.hi())
                    return min(a, b), max(a, b)

                if outside_exact(rng, rho, cells, i, bounds, (u,)):
                    return None
            return exact_cell(rng, fx, bool(negative[j]), th, p.t, u)

        return z, accepted, exact, finish

    return one_round


def laplace_cells(
    rng: np.random.Generator,
    values: NDArray[np.float64],
    scale: float,
    k: int,
    bounds: tuple[float, float] | None = None,
    offsets: Sequence[int] | None = None,
) -> NDArray[np.float64]:
    """Secure Laplace release: the centre of the cell of the lattice 2^k·ℤ that holds x + L, L ~ Lap(scale).

    ``offsets`` (one integer oᵢ per non-negative xᵢ, without ``bounds``): the input is the exact
    oᵢ·2^k + xᵢ (see :func:`~dp_pipeline.mechanisms.sampling._lattice.in_chunks`).

    m = ⌊(x + L)/λ⌋ is drawn from its exact law, a post-processing of the ideal Laplace mechanism; the
    centre (m + ½)λ is returned. In lattice units |L|/λ ~ Exp(c) with c = λ/scale exactly (the rational
    ``2**k / scale``), drawn by :class:`ExpParams`, with a fair sign.

    With ``bounds`` = (l, u) the draw is repeated until l ≤ x + L ≤ u (exactly decided), which samples
    the Laplace law conditioned on [l, u] (the bounded Laplace mechanism) before the cell is taken.
    """
    p = params_for(Fraction(2) ** k / Fraction(scale))
    lattice_bounds = None if bounds is None else (bounds[0] * 2.0**-k, bounds[1] * 2.0**-k)
    make_round = functools.partial(_laplace_round, p, bounds=lattice_bounds)
    return in_chunks(rng, values, k, make_round, offsets=offsets)


def laplace_integers(rng: np.random.Generator, scale: float, n: int) -> NDArray[np.int64]:
    """Secure noise for integer inputs: ⌊L + ½⌋ with L ~ Lap(scale) (Laplace rounded to the nearest
    integer, a post-processing of the ideal Laplace mechanism), sampled exactly."""
    p = params_for(1 / Fraction(scale))
    return integers_in_chunks(rng, n, lambda cells: _laplace_round(p, cells, None))
