"""Exact randomized-response draws: whether a report is the truth, and which other answer it gives."""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms.sampling._bounds import word_thresholds
from dp_pipeline.mechanisms.sampling._exact import LazyUniform, below_fraction, exp_neg_exact, random_words

__all__ = [
    "other_offset",
    "truthful",
]


@functools.lru_cache(maxsize=256)
def _truth_probability(epsilon: float, others: int, digits: int) -> tuple[Fraction, Fraction]:
    """Bounds of p = 1/(1 + (k − 1)e^{−ε}) = e^ε/(e^ε + k − 1), k − 1 = ``others``."""
    th_lo, th_hi = exp_neg_exact(Fraction(epsilon), Fraction(epsilon), digits)
    return 1 / (1 + others * th_hi), 1 / (1 + others * th_lo)


def truthful(rng: np.random.Generator, epsilon: float, categories: int, n: int) -> NDArray[np.bool_]:
    """Exact Bernoulli(p) with p = e^ε/(e^ε + k − 1): whether each randomized-response report is the truth.

    A lazy uniform W is compared with rational bounds of p; a 64-bit word decides all but about 2⁻⁴⁵ of the
    draws, the rest get more bits until decided.
    """
    p_lo, p_hi = _truth_probability(epsilon, categories - 1, 40)
    sure, none = word_thresholds(p_lo, p_hi)
    w = random_words(rng, n)
    out = w < sure
    undecided = ~out if none is None else ~out & (w < none)
    for i in np.flatnonzero(undecided):
        out[i] = below_fraction(
            rng, LazyUniform(int(w[i])), lambda digits: _truth_probability(epsilon, categories - 1, digits)
        )
    return out


def other_offset(rng: np.random.Generator, categories: int, n: int) -> NDArray[np.int64]:
    """Uniform integers in {1, …, k − 1} (exact: numpy's bounded integers use rejection)."""
    return rng.integers(1, categories, size=n, dtype=np.int64)
