"""The fast path: textbook floating-point samplers (not floating-point safe) and plain uniforms."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "bernoulli",
    "gaussian",
    "geometric",
    "laplace",
    "randomized_response_offsets",
    "uniform",
]

_GRID = 2**53
"""The uniform draws are the multiples of 2⁻⁵³ in [0, 1), each with probability 2⁻⁵³."""


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

    Drawn by inversion, G = ⌊ln U / ln q⌋ with U uniform on (0, 1] (not exact: the secure path draws
    exact geometrics from the exponential magnitude).
    """
    u = 1.0 - rng.random(size=shape)
    return np.floor(np.log(u) / log_q)


def randomized_response_offsets(
    rng: np.random.Generator, epsilon: float, categories: int, shape: tuple[int, ...]
) -> NDArray[np.int64]:
    """Fast path: the offset j of each report from the truth (report = truth + j mod k) of k-ary randomized
    response at ε: 0 (the truth) unless a uniform draw falls below the other reports' mass
    (k − 1)/(e^ε + k − 1), then uniform on {1, …, k − 1} (numpy's bounded integers, exact).

    The mass is rounded up to the 2⁻⁵³ grid of the draws (at least one grid point; a 1e-12 relative margin
    covers the rounding of its evaluation, whose error is below 1e-13 while the mass is above 0), and at
    most to (k − 1)/k of the grid. So each other report has probability at least q = 1/(e^ε + k − 1) and
    the truth at most p = e^ε·q, and no other report is likelier than the truth: every ratio is at most
    e^ε for every ε ≥ 1e-11 (below, within 2⁻⁵⁰ of it). Comparing a draw with p instead would make the
    ratio e^ε only to within 2⁻⁵³ of 1 − p, and p would round to 1 (no randomisation) for ε ≳ 36.7.
    """
    x = math.log(categories - 1) - epsilon  # the mass is the logistic function of x
    mass = math.exp(x) / (1.0 + math.exp(x)) if x < 0.0 else 1.0 / (1.0 + math.exp(-x))
    cap = _GRID * (categories - 1) // categories
    steps = min(max(math.ceil(mass * (1.0 + 1e-12) * _GRID), 1), cap)
    other = rng.random(size=shape) < steps / _GRID
    if categories == 2:  # the one other report: offset 1
        return other.astype(np.int64)
    return np.where(other, rng.integers(1, categories, size=shape, dtype=np.int64), 0)
