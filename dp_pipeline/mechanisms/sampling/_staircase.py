"""Secure staircase noise (and bounded staircase) on the lattice (Geng & Viswanath's construction)."""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms.sampling._bounds import word_lo, word_thresholds
from dp_pipeline.mechanisms.sampling._exact import (
    P53,
    LazyUniform,
    below_fraction,
    exp_neg_exact,
    floor_exact,
    random_words,
)
from dp_pipeline.mechanisms.sampling._exponential import ExpParams, draw_exponential, params_for
from dp_pipeline.mechanisms.sampling._lattice import (
    Cells,
    Round,
    exact_e,
    in_chunks,
    integers_in_chunks,
    outside_exact,
    range_check,
)

__all__ = [
    "staircase_cells",
    "staircase_integers",
]


@functools.lru_cache(maxsize=256)
def _staircase_upper(epsilon: float, gamma: float, digits: int) -> tuple[Fraction, Fraction]:
    """Bounds of p₁ = (1 − γ)e^{−ε}/(γ + (1 − γ)e^{−ε}), the probability of the lower part of a step."""
    th_lo, th_hi = exp_neg_exact(Fraction(epsilon), Fraction(epsilon), digits)
    g = Fraction(gamma)

    def p1(theta: Fraction) -> Fraction:
        den = g + (1 - g) * theta
        return (1 - g) * theta / den if den else Fraction(0)

    return p1(th_lo), p1(th_hi)  # p₁ increases with e^{−ε}


def _staircase_round(
    p: ExpParams,
    cells: Cells,
    epsilon: float,
    gamma: float,
    width: float,
    bounds: tuple[float, float] | None,
) -> Round:
    """One round of staircase cells: X/λ = s·D'(G + V), D' = Δ/λ, G = ⌊E⌋ with E ~ Exp(ε), V = γU or
    γ + (1 − γ)U after a Bernoulli(p₁), U uniform (Geng & Viswanath's construction)."""
    p1_lo, p1_hi = _staircase_upper(epsilon, gamma, 40)
    b_sure, b_none = word_thresholds(p1_lo, p1_hi)
    g_exact, d_exact = Fraction(gamma), Fraction(width)
    one_minus_g = 1.0 - gamma

    def one_round(rng: np.random.Generator, idx: NDArray[np.intp]) -> Any:
        f = cells.f if idx is cells.index else cells.f[idx]
        draw = draw_exponential(rng, p, idx.size)
        w_b, w_v = random_words(rng, idx.size), random_words(rng, idx.size)
        negative = (draw.w_h & np.uint64(1)).astype(bool)
        upper = w_b < b_sure
        b_known = upper | (w_b >= b_none) if b_none is not None else upper
        steps = draw.whole(p).astype(np.float64)
        u_lo = word_lo(w_v)
        u_hi = u_lo + P53
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
            inside, known = range_check(rho_lo, rho_hi, cells, idx, bounds)
            accepted, decided = inside, decided & known
        exact = draw.exact | ~decided

        def finish(j: int) -> int | None:
            i = int(idx[j])
            th, u = exact_e(rng, p, draw, j)
            g_steps = th + math.floor((1 << p.t) * u.lo())  # the top t bits of U: ⌊T·U⌋ exactly
            is_upper = below_fraction(
                rng, LazyUniform(int(w_b[j])), lambda digits: _staircase_upper(epsilon, gamma, digits)
            )
            v = LazyUniform(int(w_v[j]))
            fx, sign = cells.exact_f(i), (-1 if negative[j] else 1)

            def rho() -> tuple[Fraction, Fraction]:
                ends = []
                for uu in (v.lo(), v.hi()):
                    part = g_exact + (1 - g_exact) * uu if is_upper else g_exact * uu
                    ends.append(fx + sign * d_exact * (g_steps + part))
                return min(ends), max(ends)

            if bounds is not None and outside_exact(rng, rho, cells, i, bounds, (v,)):
                return None
            return floor_exact(rng, rho, (v,))

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
    p = params_for(Fraction(epsilon))
    lattice_bounds = None if bounds is None else (bounds[0] * 2.0**-k, bounds[1] * 2.0**-k)
    return in_chunks(
        rng, values, k, lambda cells: _staircase_round(p, cells, epsilon, gamma, width, lattice_bounds)
    )


def staircase_integers(
    rng: np.random.Generator, epsilon: float, sensitivity: float, gamma: float, n: int
) -> NDArray[np.int64]:
    """Secure noise for integer inputs: staircase noise rounded to the nearest integer, sampled exactly."""
    p = params_for(Fraction(epsilon))
    return integers_in_chunks(
        rng, n, lambda cells: _staircase_round(p, cells, epsilon, gamma, sensitivity, None)
    )
