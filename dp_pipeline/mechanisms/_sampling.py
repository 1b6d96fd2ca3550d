"""The only code in dp-pipeline that draws randomness.

``rng`` everywhere takes ``None`` (a fresh generator seeded from OS entropy), an ``int`` seed (reproducible),
or a ``numpy.random.Generator``. Every draw goes through a function of this module, so that reviewing what
randomness a mechanism uses means reading this one file.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.exceptions import InvalidParameterError

__all__ = [
    "RNGLike",
    "bernoulli",
    "choice_index",
    "gaussian",
    "geometric",
    "laplace",
    "make_rng",
    "uniform",
]

RNGLike = None | int | np.random.Generator


def make_rng(rng: Any = None) -> np.random.Generator:
    """Return a numpy Generator for ``rng``: None (OS entropy), a non-negative int seed, or a Generator."""
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool) and int(rng) >= 0:
        return np.random.default_rng(int(rng))
    raise InvalidParameterError(
        f"'rng' must be None, a non-negative int seed or a numpy.random.Generator, got {rng!r}", "rng"
    )


def laplace(rng: np.random.Generator, scale: float, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Laplace(0, scale) noise of the given shape."""
    return rng.laplace(0.0, scale, size=shape)


def gaussian(rng: np.random.Generator, sigma: float, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """N(0, sigma²) noise of the given shape."""
    return rng.normal(0.0, sigma, size=shape)


def uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Uniform [0, 1) draws of the given shape."""
    return rng.random(size=shape)


def bernoulli(rng: np.random.Generator, p: float, shape: tuple[int, ...]) -> NDArray[np.bool_]:
    """Bernoulli(p) draws (True with probability ``p``) of the given shape."""
    return rng.random(size=shape) < p


def geometric(rng: np.random.Generator, log_q: float, shape: tuple[int, ...]) -> NDArray[np.float64]:
    """Failures before the first success, P(G ≥ k) = q^k with q = exp(``log_q``) < 1, as floats.

    Drawn by inversion, G = ⌊ln U / ln q⌋ with U uniform on (0, 1]; taking ln q as the parameter keeps
    q = e^{−ε} exact for large ε, and float output cannot overflow when q is close to 1.
    """
    u = 1.0 - rng.random(size=shape)
    return np.floor(np.log(u) / log_q)


def choice_index(
    rng: np.random.Generator, cumulative: NDArray[np.float64], shape: tuple[int, ...]
) -> NDArray[np.intp]:
    """Indices drawn from a discrete distribution given by its cumulative probabilities (last entry 1)."""
    u = rng.random(size=shape)
    return np.minimum(np.searchsorted(cumulative, u, side="right"), len(cumulative) - 1)
