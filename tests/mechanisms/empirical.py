"""Empirical ε check shared by the mechanism tests.

Histogram n outputs of a mechanism on two neighbouring inputs; for every bin, a Clopper–Pearson lower bound
on one probability divided by an upper bound on the other must not exceed e^ε. The confidence level is
split over bins and directions (Bonferroni), so a correct mechanism fails with probability below ``alpha``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dp_pipeline.mechanisms import secure_rng


def clopper_pearson(count: NDArray[np.int64], n: int, alpha: float) -> tuple[NDArray[np.float64], ...]:
    """Two-sided Clopper–Pearson interval for binomial proportions, at level 1 − alpha."""
    lower = np.where(count > 0, stats.beta.ppf(alpha / 2, count, n - count + 1), 0.0)
    upper = np.where(count < n, stats.beta.ppf(1 - alpha / 2, count + 1, n - count), 1.0)
    return lower, upper


def max_certified_ratio(
    out_a: NDArray[np.float64] | NDArray[np.int64],
    out_b: NDArray[np.float64] | NDArray[np.int64],
    bins: NDArray[np.float64] | None = None,
    alpha: float = 1e-6,
) -> float:
    """The largest ratio between the two output distributions that the samples certify, over all bins.

    With ``bins=None`` the outputs are treated as discrete values (one bin per distinct value).
    """
    if bins is None:
        values = np.union1d(np.unique(out_a), np.unique(out_b))
        count_a = np.array([np.count_nonzero(out_a == v) for v in values])
        count_b = np.array([np.count_nonzero(out_b == v) for v in values])
    else:
        count_a, _ = np.histogram(out_a, bins=bins)
        count_b, _ = np.histogram(out_b, bins=bins)
    level = alpha / (2 * len(count_a))
    lo_a, hi_a = clopper_pearson(count_a, len(out_a), level)
    lo_b, hi_b = clopper_pearson(count_b, len(out_b), level)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.concatenate([lo_a / hi_b, lo_b / hi_a])
    return float(np.nanmax(ratios))


def assert_empirically_dp(
    release: Callable[[NDArray[np.float64], int], NDArray[np.float64]],
    t: float,
    t_prime: float,
    epsilon: float,
    bins: NDArray[np.float64] | None,
    n: int = 1_000_000,
) -> float:
    """Release ``n`` copies of ``t`` and of ``t_prime`` and assert that no bin certifies a ratio above e^ε.

    ``release(values, seed)`` randomises an array. Returns the certified ratio, for further assertions.
    """
    out_a = release(np.full(n, t), 11)
    out_b = release(np.full(n, t_prime), 12)
    ratio = max_certified_ratio(out_a, out_b, bins)
    assert ratio <= math.exp(epsilon), f"certified ratio {ratio} exceeds e^ε = {math.exp(epsilon)}"
    return ratio


def seeded(mechanism: Any) -> Callable[[NDArray[np.float64], int], NDArray[np.float64]]:
    """``release(values, seed)`` for :func:`assert_empirically_dp`: ``randomize`` with secure_rng(seed)."""
    return lambda values, seed: mechanism.randomize(values, rng=secure_rng(seed))
