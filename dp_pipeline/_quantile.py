"""One DP quantile of a column: the exponential mechanism over a fixed grid, sampled exactly.

Shared by the pandas quantiles (:mod:`dp_pipeline.frames._quantiles`) and by ``bounds="dp"``
(:mod:`dp_pipeline._learned_bounds`); needs neither pandas nor scikit-learn.

**Method.** The clipped values x₁ ≤ … ≤ xₙ are scored on a data-independent grid of K + 1 = 2¹⁶ + 1
candidates cₖ = lower + (upper − lower)·k/K: candidate c has rank i(c) = #{x < c} and utility
u(c) = −|i(c) − q·n|, computed exactly (rationals). One candidate is selected by the exponential mechanism
(:class:`~dp_pipeline.mechanisms.Exponential`), sampled exactly: the grid candidates between two consecutive
order statistics share a utility, so the mechanism first selects an interval [x_(i), x_(i+1)) with
probability ∝ (its number of grid points)·e^{εu/(2Δu)}, then a uniform grid point in it, both with the
secure sampler. This is Smith's (2011) interval mechanism with the uniform point restricted to the grid, so
that every probability is exact.

**Sensitivity Δu.** One person has at most m rows. Adding or removing a row moves i(c) by at most 1 and q·n
by q, so u(c) by at most max(q, 1 − q) ≤ 1; replacing one person's rows (a ≤ m by b ≤ m) moves i(c) − q·n
by at most max(a, b) ≤ m. Hence Δu = m under either relation for one release. Per declared group, under
add/remove the person's rows split between groups (Σ mₘ ≤ m, the losses add up to at most ε), and under
replace-one the old and new person's rows can fall into two groups: Δu = 2m (as for grouped counts).

**Error** (data-independent): with probability at least ``level`` the released value's rank is within
ρ = (2Δu/ε)·(ln(K + 1) + ln(1/(1 − level))) of the best grid candidate's (McSherry & Talwar 2007, Thm 8),
and the best grid candidate's rank is within ½ of q·n whenever every gap between consecutive data values
holds a grid point.

References
----------
McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007.
Smith, "Privacy-preserving statistical estimation with optimal convergence rates", STOC 2011.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.mechanisms import Exponential, sampling

__all__ = [
    "GRID_BITS",
    "grid",
    "quantile_mechanism",
    "rank_error",
    "ranks_of",
    "select_from_ranks",
    "select_quantile",
]

GRID_BITS = 16
"""The grid has 2**GRID_BITS + 1 candidates between the declared bounds."""


def grid(low: float, high: float) -> NDArray[np.float64]:
    """The 2**GRID_BITS + 1 candidates from ``low`` to ``high`` (both included)."""
    steps = 1 << GRID_BITS
    return np.asarray(low + (high - low) * (np.arange(steps + 1) / steps), dtype=np.float64)


def quantile_mechanism(epsilon: float, grouped: bool, relation: str, m: int) -> Exponential:
    """The exponential mechanism of one quantile: Δu = m, or 2m for declared groups under replace-one."""
    factor = 2 if grouped and relation == "replace_one" else 1
    return Exponential(epsilon=epsilon, sensitivity=float(factor * m))


def select_quantile(
    mechanism: Exponential,
    ordered: NDArray[np.float64],
    candidates: NDArray[np.float64],
    q: float,
    rng: np.random.Generator,
) -> float:
    """One DP quantile of the sorted clipped ``ordered`` over the grid ``candidates`` (see the module
    notes)."""
    return select_from_ranks(mechanism, ranks_of(ordered, candidates), candidates, q, rng)


def ranks_of(ordered: NDArray[np.float64], candidates: NDArray[np.float64]) -> NDArray[np.int64]:
    """i(c) = #{x < c} at every candidate, then n (the rank of +∞), from the sorted values."""
    return np.asarray(np.searchsorted(ordered, np.append(candidates, np.inf), side="left"), dtype=np.int64)


def select_from_ranks(
    mechanism: Exponential,
    ranks: NDArray[np.int64],
    candidates: NDArray[np.float64],
    q: float,
    rng: np.random.Generator,
) -> float:
    """One DP quantile from the ranks i(c) = #{x < c} of the candidates followed by n, the number of
    values (:func:`ranks_of`; an engine that cannot sort, such as Spark, counts them per grid bucket)."""
    n = int(ranks[-1])
    ranks = ranks[:-1]  # non-decreasing along the grid
    starts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]])
    sizes = np.diff(np.r_[starts, candidates.size])
    target = Fraction(q) * n
    utilities = [-abs(int(r) - target) for r in ranks[starts]]
    block = mechanism.select(utilities, sizes, rng)
    return float(candidates[starts[block] + sampling.uniform_index(rng, int(sizes[block]))])


def rank_error(mechanism: Exponential, candidates: int, level: float) -> float:
    """ρ = (2Δu/ε)·(ln(candidates) + ln(1/(1 − level))), rounded up (see the module notes)."""
    exact = 2.0 * mechanism.sensitivity / mechanism.epsilon * (math.log(candidates) - math.log1p(-level))
    return math.nextafter(exact, math.inf) * (1.0 + 1e-12)
