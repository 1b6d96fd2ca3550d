"""The exponential magnitude E ~ Exp(rate c), exactly, with E = T·H + T·U (vectorised, exact
continuation)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.mechanisms.sampling import _exact
from dp_pipeline.mechanisms.sampling._bounds import (
    decide_below,
    exp_neg_bounds,
    float_bounds,
    threshold_word,
    word_lo,
)
from dp_pipeline.mechanisms.sampling._exact import (
    P53,
    U11,
    LazyUniform,
    below_exp,
    lazy_uniform,
    point_interval,
    random_words,
)

__all__ = [
    "ExpDraw",
    "ExpParams",
    "draw_exponential",
    "exact_exponential",
    "params_for",
]


@dataclass(frozen=True)
class ExpParams:
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
def _exp_params(numerator: int, denominator: int) -> ExpParams:
    rate = Fraction(numerator, denominator)
    c_lo, c_hi = float_bounds(rate)
    t = 0
    while c_hi * 2.0 ** (t + 1) <= 1.0 / 32.0 and t < 56:
        t += 1
    tc = rate * (1 << t)
    tc_lo, tc_hi = c_lo * 2.0**t, c_hi * 2.0**t
    h_max = math.ceil(45.0 / tc_lo) + 2
    h = np.arange(h_max + 2, dtype=np.float64)
    lo, hi = exp_neg_bounds(h * tc_lo * (1 - 2.0**-51), h * tc_hi * (1 + 2.0**-51))
    sure = np.array([threshold_word(float(v), False) >> 1 for v in lo], dtype=np.uint64)
    sure[0] = np.uint64(1 << 63)  # e^{−0} = 1: H ≥ 0 always
    none = np.array([-(-threshold_word(float(v), True) // 2) for v in hi], dtype=np.uint64)
    band_lo, _ = exp_neg_bounds(np.array([tc_hi * (1 + 2.0**-51)]), np.array([tc_hi * (1 + 2.0**-51)]))
    band = np.uint64(threshold_word(float(band_lo[0]), False))
    return ExpParams(rate, t, tc, tc_lo, tc_hi, h_max, sure, none, band)


def params_for(rate: Fraction) -> ExpParams:
    if rate <= 0:
        raise InvalidParameterError(f"the rate of an exponential must be > 0, got {rate}", "rate")
    if rate < Fraction(1, 1 << 60):
        raise InvalidParameterError(f"the rate {float(rate)} is below 2⁻⁶⁰; the noise is too large", "rate")
    return _exp_params(rate.numerator, rate.denominator)


def _exact_h(rng: np.random.Generator, p: ExpParams, w: LazyUniform) -> int:
    """H = max{h : W < e^{−hTc}}, exactly."""
    h = 0
    while True:
        nxt = (h + 1) * p.tc
        if not below_exp(rng, w, functools.partial(point_interval, nxt)):
            return h
        h += 1


def _exact_u(rng: np.random.Generator, p: ExpParams, u: LazyUniform, w: LazyUniform) -> bool:
    """Accept the proposal U (W < e^{−cTU}), exactly."""
    return below_exp(rng, w, lambda: (p.tc * u.lo(), p.tc * u.hi()), (u,))


def exact_exponential(
    rng: np.random.Generator, p: ExpParams, words: tuple[Any, Any, Any] | None = None
) -> tuple[int, LazyUniform]:
    """(T·H, U) with E = T·H + T·U exactly distributed; ``words`` = (w_H, w_U, w_A) prefixes to continue.

    H's uniform is the top 63 bits of w_H (its lowest bit is left for a sign).
    """
    w_h, w_u, w_a = words if words is not None else (None, None, None)
    h = _exact_h(rng, p, LazyUniform((int(random_words(rng, 1)[0]) if w_h is None else int(w_h)) >> 1, 63))
    while True:
        u, w = lazy_uniform(rng, w_u), lazy_uniform(rng, w_a)
        w_u = w_a = None
        if _exact_u(rng, p, u, w):
            return (1 << p.t) * h, u


@dataclass
class ExpDraw:
    """Vectorised draws of E for n elements: E = T·h + T·U with U's 64-bit prefix ``w_u``."""

    w_h: NDArray[np.uint64]  # top 63 bits: H's uniform; bit 0: a free fair bit (the sign)
    w_u: NDArray[np.uint64]
    w_a: NDArray[np.uint64]
    h: NDArray[np.int64]
    exact: NDArray[np.bool_]  # not decided in floats: continue with exact_exponential(words)

    def whole(self, p: ExpParams) -> NDArray[np.int64]:
        """⌊E⌋ = T·h + ⌊T·U⌋."""
        top = (self.w_u >> np.uint64(64 - p.t)).astype(np.int64) if p.t else np.zeros_like(self.h)
        return (self.h << p.t) + top

    def frac_prefix(self, p: ExpParams) -> NDArray[np.uint64]:
        """vp with frac(E) in [vp, vp + 2^t)/2⁶⁴."""
        return self.w_u << np.uint64(p.t)


def draw_exponential(rng: np.random.Generator, p: ExpParams, n: int) -> ExpDraw:
    """Draw E for n elements (vectorised); elements not decided in floats are flagged ``exact``."""
    w_h = random_words(rng, n)
    # H: candidate by inversion in floats, then certified against the threshold tables
    # −ln W ≤ 54 ln 2 < 45/(Tc)·Tc, so the candidate lies in [0, h_max]; truncation is ⌊·⌋ here
    log_mid = np.log((w_h >> U11).astype(np.float64) + 0.5)
    h = ((53.0 * math.log(2.0) - log_mid) * (2.0 / (p.tc_lo + p.tc_hi))).astype(np.int64)
    top = w_h >> np.uint64(1)
    exact = (top >= p.sure_h[h]) | (top < p.none_h[h + 1]) | _exact.FORCE_EXACT
    # U: rejection sampling, rounds over the pending elements
    w_u = np.zeros(n, dtype=np.uint64)
    w_a = np.zeros(n, dtype=np.uint64)
    pending = np.arange(n)
    while pending.size:
        u = random_words(rng, pending.size)
        a = random_words(rng, pending.size)
        if pending.size == n:
            w_u, w_a = u, a
        else:
            w_u[pending], w_a[pending] = u, a
        accept = a < p.band
        band = np.flatnonzero(~accept)
        if band.size:
            u_lo = word_lo(u[band])
            arg_lo = p.tc_lo * u_lo * (1 - 2.0**-51)
            arg_hi = p.tc_hi * (u_lo + P53) * (1 + 2.0**-51)
            th_lo, th_hi = exp_neg_bounds(arg_lo, arg_hi)
            yes, decided = decide_below(a[band], th_lo, th_hi)
            accept[band] = yes
            undecided = band[~decided]
            exact[pending[undecided]] = True
            accept[undecided] = True  # leaves the loop; finished exactly
        pending = pending[~accept]
    return ExpDraw(w_h, w_u, w_a, h, exact)
