"""The exponential mechanism's choice by exact rejection sampling, and uniform indices."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dp_pipeline.mechanisms.sampling import _exact
from dp_pipeline.mechanisms.sampling._bounds import decide_below, exp_neg_bounds, float_bounds
from dp_pipeline.mechanisms.sampling._exact import LazyUniform, below_exp, point_interval, random_words

__all__ = [
    "exponential_choice",
    "uniform_index",
]

_PROPOSALS = (16, 4096)  # proposals drawn (and decided) in the first vectorised round, and at most


def exponential_choice(rng: np.random.Generator, gammas: Sequence[Fraction], weights: Sequence[int]) -> int:
    """An index i drawn exactly with P(i) ∝ wᵢ·e^{−γᵢ} (rationals γᵢ ≥ 0, integers wᵢ ≥ 0, not all 0).

    Rejection sampling: propose i with probability wᵢ/Σw (an exact uniform integer below Σw located in the
    cumulative weights) and accept it with an exact Bernoulli(e^{−γᵢ}) (a lazy uniform compared with the
    certified bounds of :func:`exp_neg_bounds`, in exact arithmetic when they do not decide); the first
    accepted proposal is the draw. Proposals are drawn and decided in rounds (16 first, doubling up to
    4096) and taken in order, so the draw is the first success of independent trials: its law is exactly
    the target. With min γ = 0 a trial succeeds with probability at least (the weight of the candidates
    with γ = 0)/Σw.

    The work is not data-independent: a trial succeeds with probability q = Σwᵢe^{−γᵢ}/Σw, so the number
    of trials (and of rounds) has a law that depends on the γᵢ through q, while the index returned is
    independent of it (see the timing note of :class:`~dp_pipeline.mechanisms.Exponential`).
    """
    cumulative = np.cumsum(np.asarray(weights, dtype=np.int64))
    total = int(cumulative[-1])
    bounds = np.array([float_bounds(g) for g in gammas], dtype=np.float64).reshape(-1, 2)
    size = _PROPOSALS[0]
    while True:
        idx = np.searchsorted(cumulative, rng.integers(0, total, size=size), side="right")
        w = random_words(rng, size)
        low, high = exp_neg_bounds(bounds[idx, 0], bounds[idx, 1])
        accept, decided = decide_below(w, low, high)
        for j in range(size):
            if not decided[j] or _exact.FORCE_EXACT:
                exact = gammas[int(idx[j])]
                accept[j] = below_exp(rng, LazyUniform(int(w[j])), functools.partial(point_interval, exact))
            if accept[j]:
                return int(idx[j])
        size = min(2 * size, _PROPOSALS[1])


def uniform_index(rng: np.random.Generator, n: int) -> int:
    """A uniform integer in {0, …, n − 1} (numpy's exact bounded-integer rejection sampler)."""
    return int(rng.integers(0, n))
