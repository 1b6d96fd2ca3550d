"""The fast path: textbook floating-point samplers (not floating-point safe) and plain uniforms."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "bernoulli",
    "choice_index",
    "gaussian",
    "geometric",
    "laplace",
    "uniform",
]


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


def choice_index(
    rng: np.random.Generator, cumulative: NDArray[np.float64], shape: tuple[int, ...]
) -> NDArray[np.intp]:
    """Indices drawn from a discrete distribution given by its cumulative probabilities (last entry 1)."""
    u = rng.random(size=shape)
    return np.minimum(np.searchsorted(cumulative, u, side="right"), len(cumulative) - 1)
