"""Independent references for the allocation tests (of :func:`dp_pipeline.allocate` and of the Airflow run
shares that calibrate with it): the μ-GDP → (ε, δ) conversion evaluated at 40 digits with mpmath, the exact
optimum of an all-Gaussian plan in closed form, dp-accounting's privacy-loss distributions called directly,
and a bisection over a common noise scale. Nothing here calls dp-pipeline."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import mpmath
import pytest


def gdp_delta(mu: Any, eps: Any) -> Any:
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Cor. 2.13), in mpmath."""
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def largest_mu(epsilon: float, delta: float) -> float:
    """The largest μ whose μ-GDP is (ε, δ)-DP, by bisection at 40 digits (δ(ε) grows with μ)."""
    with mpmath.workdps(40):
        eps, target = mpmath.mpf(epsilon), mpmath.mpf(delta)
        low, high = mpmath.mpf("1e-6"), mpmath.mpf(1)
        while gdp_delta(high, eps) <= target:
            high *= 2
        for _ in range(200):
            middle = (low + high) / 2
            low, high = (middle, high) if gdp_delta(middle, eps) <= target else (low, middle)
        return float(low)


def gaussian_optimum(sensitivities: Sequence[float], weights: Sequence[float], mu: float) -> list[float]:
    """σᵢ = s/√wᵢ with Σ(Δᵢ/σᵢ)² = μ², i.e. s = √(ΣΔᵢ²wᵢ)/μ."""
    s = math.sqrt(math.fsum(d * d * w for d, w in zip(sensitivities, weights, strict=True))) / mu
    return [s / math.sqrt(w) for w in weights]


def pld_epsilon(
    laplace_scales: dict[float, int], gaussian_sigmas: dict[float, int], delta: float, *, pessimistic: bool
) -> float:
    """ε at δ of Laplace noise of the given scales and Gaussian noise of the given σ (sensitivity 1; value →
    how many), composed by dp-accounting's PLD directly (interval 1e-4): an upper bound (pessimistic,
    connect-the-dots) or a lower bound (optimistic privacy buckets)."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    builders = [(pld.from_laplace_mechanism, laplace_scales), (pld.from_gaussian_mechanism, gaussian_sigmas)]
    parts = []
    for build, noise in builders:
        for parameter, count in noise.items():
            one = build(
                parameter,
                value_discretization_interval=1e-4,
                pessimistic_estimate=pessimistic,
                use_connect_dots=pessimistic,
            )
            parts.append(one.self_compose(count) if count > 1 else one)
    composed = parts[0]
    for part in parts[1:]:
        composed = composed.compose(part)
    return float(composed.get_epsilon_for_delta(delta))


def least_scale(fits: Callable[[float], bool], start: float) -> float:
    """The least t where the monotone ``fits`` holds, by doubling then 40 bisections."""
    low, high = start, start
    while fits(low):
        low /= 2
    while not fits(high):
        high *= 2
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (low, middle) if fits(middle) else (middle, high)
    return high
