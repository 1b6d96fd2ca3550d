"""Samplers built from the secure path's parts that only the tests use.

They check the building blocks on laws with closed forms: the exact exponential magnitude (through exact
geometric and discrete Laplace integers) and the certified comparisons with e^{−γ} (through exact
Bernoulli(e^{−γ}) draws). The library's samplers use the same parts (see
:mod:`dp_pipeline.mechanisms.sampling`).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline import InvalidParameterError
from dp_pipeline.mechanisms.sampling._bounds import decide_below, exp_neg_bounds
from dp_pipeline.mechanisms.sampling._exact import LazyUniform, below_exp, point_interval, random_words
from dp_pipeline.mechanisms.sampling._exponential import draw_exponential, exact_exponential, params_for


def geometric_exact(rng: np.random.Generator, rate: Fraction, n: int) -> NDArray[np.int64]:
    """Exact geometric integers G ≥ 0 with P(G ≥ k) = e^{−k·rate} (``rate`` a positive rational).

    G = ⌊E⌋ with E ~ Exp(rate) (see :class:`ExpParams`): P(⌊E⌋ ≥ k) = P(E ≥ k) = e^{−k·rate}.
    """
    p = params_for(Fraction(rate))
    draw = draw_exponential(rng, p, n)
    out = draw.whole(p)
    for i in np.flatnonzero(draw.exact):
        th, u = exact_exponential(rng, p, (draw.w_h[i], draw.w_u[i], draw.w_a[i]))
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
    w = random_words(rng, flat.size)
    low, high = exp_neg_bounds(flat, flat)
    out, decided = decide_below(w, low, high)
    for i in np.flatnonzero(~decided):
        exact = Fraction(float(flat[i]))
        out[i] = below_exp(rng, LazyUniform(int(w[i])), functools.partial(point_interval, exact))
    return out.reshape(g.shape)
