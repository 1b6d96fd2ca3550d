"""DP variance and standard deviation for ``DataFrame.pipe``, from noisy sums of x, x² and the count.

**Estimator.** With c = (lower + upper)/2 and h = (upper − lower)/2, each kept value x (clipped to
[lower, upper]) gives y = x − c ∈ [−h, h]. One release of three parts adds noise to S₁ = Σy (values in
[−h, h]), S₂ = Σy² (values in [0, h²]) and the count N (sensitivities as for
:func:`~dp_pipeline.frames.dp_sum`, by :func:`~dp_pipeline._splitting.plan_noise`, which splits ε between
the parts). The estimate of the population variance (ddof = 0) of the clipped values is
V̂ = S̃₂/Ñ − (S̃₁/Ñ)², Ñ = max(noisy count, 1), clamped to [0, h²] = [0, (upper − lower)²/4] (no variance of
values in [lower, upper] exceeds it); the standard deviation is √V̂. Centring keeps S̃₂ small and its noise
independent of where the data lie.

**Error.** ``std_error`` is the delta-method standard deviation of V̂ at the noisy values (of √V̂:
se(V̂)/(2√V̂)), capped at the width of the possible range (h², resp. h). The interval is
**conservative**, not a normal approximation: each noisy sum gets its exact interval at level
1 − (1 − level)/3 (Laplace or Gaussian quantiles), so all three hold together with probability ≥ ``level``
(union bound), and [ci_low, ci_high] is the range of s₂/n − (s₁/n)² over that box (n ≥ 1), clamped to
[0, h²]. Whenever the true count is ≥ 1, the variance of the clipped kept values lies in it with
probability ≥ ``level``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.frames._aggregates import centred, noisy
from dp_pipeline.frames._common import interval_half_width, result_frame
from dp_pipeline.frames._core import Options, Release

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame as SparkDataFrame

__all__ = ["dp_std", "dp_var"]


def _variance_release(
    owner: str, df: Any, column: Any, bounds: tuple[Any, Any], options: Options, std: bool
) -> Any:
    release = Release(owner, df, options)
    name, low, high = release.value_column(column, *bounds)
    centre, half = centred(low, high)
    ranges = [(-half, half), (0.0, half * half), (1.0, 1.0)]
    plan = release.plan(ranges)
    with release.holding(plan.event, release.label(f"{owner} of {name!r}")):
        exact = release.sums(name, (low, high), centre, [1, 2, 0], plan, ranges)
    s1, s2, count = (noisy(plan, part, exact, release.rng) for part in range(3))
    n = np.maximum(count, 1.0)
    cap = half * half
    variance = np.clip(s2 / n - (s1 / n) ** 2, 0.0, cap)
    var1, var2, var_n = plan.noise_std**2
    gradient_n = -s2 / n**2 + 2.0 * s1**2 / n**3
    se = np.minimum(np.sqrt((2.0 * s1 / n**2) ** 2 * var1 + var2 / n**2 + gradient_n**2 * var_n), cap)
    simultaneous = 1.0 - (1.0 - release.level) / 3.0
    a, b, c = (
        interval_half_width(release.noise, np.full(s1.shape, sd), simultaneous) for sd in plan.noise_std
    )
    ci_low, ci_high = _variance_range(s1, s2, count, a, b, c, cap)
    attrs = release.attrs(plan, lower=low, upper=high, interval="conservative (union bound)")
    if not std:
        return release.engine.result(
            result_frame(variance, se, ci_low, ci_high, release.index, f"var({name})", attrs)
        )
    root = np.sqrt(variance)
    with np.errstate(divide="ignore", over="ignore"):  # √V̂ = 0: no delta method, the cap
        se_root = np.minimum(np.where(root > 0, se / (2.0 * root), np.inf), half)
    return release.engine.result(
        result_frame(root, se_root, np.sqrt(ci_low), np.sqrt(ci_high), release.index, f"std({name})", attrs)
    )


def _variance_range(
    s1: NDArray[np.float64],
    s2: NDArray[np.float64],
    count: NDArray[np.float64],
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    c: NDArray[np.float64],
    cap: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The range of s₂/n − (s₁/n)² over |s₁ − S̃₁| ≤ a, |s₂ − S̃₂| ≤ b, |n − Ñ| ≤ c, n ≥ 1, s₂ ≥ 0, in [0, cap].

    s₂/n is largest at the largest s₂ and least n, (s₁/n)² least at the least |s₁| and largest n (and the
    other way round), so each end takes its two terms at their separate extremes: a box that contains the
    exact range."""
    n_lo, n_hi = np.maximum(count - c, 1.0), np.maximum(count + c, 1.0)
    s2_lo, s2_hi = np.maximum(s2 - b, 0.0), np.maximum(s2 + b, 0.0)
    abs_lo = np.maximum(np.abs(s1) - a, 0.0)
    abs_hi = np.abs(s1) + a
    high = s2_hi / n_lo - (abs_lo / n_hi) ** 2
    low = s2_lo / n_hi - (abs_hi / n_lo) ** 2
    return np.clip(low, 0.0, cap), np.clip(high, 0.0, cap)


def dp_var(
    df: Any,
    column: Any,
    *,
    lower: float,
    upper: float,
    epsilon: float,
    accountant: Any,
    dataset: str | None = None,
    by: Any = None,
    keys: Any = None,
    privacy_unit: Any = None,
    max_contributions: int = 1,
    mechanism: str = "laplace",
    delta: float | None = None,
    group_size: int = 1,
    level: float = 0.95,
    random_state: Any = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.Series | pd.DataFrame | SparkDataFrame:
    """DP variance (ddof = 0) of ``column`` clipped to [lower, upper], whole or per declared group.

    Parameters are as for :func:`~dp_pipeline.frames.dp_sum` (Laplace or Gaussian noise, ``level`` the
    interval's coverage). One release of three noisy sums, charged once; see
    :mod:`dp_pipeline.frames._spread` for the estimator and the conservative interval.

    Returns
    -------
    Series or DataFrame
        ``value`` in [0, (upper − lower)²/4], ``std_error`` (delta method), ``ci_low``, ``ci_high``.

    References
    ----------
    Du, Foot, Moniot, Bray & Groce, "Differentially private confidence intervals", 2020 (noisy moments).
    """
    return _variance_release(
        "dp_var",
        df,
        column,
        (lower, upper),
        Options(
            epsilon=epsilon,
            accountant=accountant,
            dataset=dataset,
            by=by,
            keys=keys,
            privacy_unit=privacy_unit,
            max_contributions=max_contributions,
            mechanism=mechanism,
            delta=delta,
            group_size=group_size,
            level=level,
            random_state=random_state,
            partition_column=partition_column,
            partition=partition,
        ),
        std=False,
    )


def dp_std(
    df: Any,
    column: Any,
    *,
    lower: float,
    upper: float,
    epsilon: float,
    accountant: Any,
    dataset: str | None = None,
    by: Any = None,
    keys: Any = None,
    privacy_unit: Any = None,
    max_contributions: int = 1,
    mechanism: str = "laplace",
    delta: float | None = None,
    group_size: int = 1,
    level: float = 0.95,
    random_state: Any = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.Series | pd.DataFrame | SparkDataFrame:
    """DP standard deviation (ddof = 0) of ``column``: √ of :func:`dp_var`'s value and interval ends.

    Returns
    -------
    Series or DataFrame
        ``value`` in [0, (upper − lower)/2], ``std_error`` (delta method), ``ci_low``, ``ci_high``.
    """
    return _variance_release(
        "dp_std",
        df,
        column,
        (lower, upper),
        Options(
            epsilon=epsilon,
            accountant=accountant,
            dataset=dataset,
            by=by,
            keys=keys,
            privacy_unit=privacy_unit,
            max_contributions=max_contributions,
            mechanism=mechanism,
            delta=delta,
            group_size=group_size,
            level=level,
            random_state=random_state,
            partition_column=partition_column,
            partition=partition,
        ),
        std=True,
    )
