"""DP aggregates for ``DataFrame.pipe``: count, sum, mean and histogram, whole or by group.

Every function is one release: it checks its arguments and the columns, bounds each person's contribution,
computes the exact statistic, charges the accountant once, and only then adds noise.

**Privacy unit and sensitivity.** Neighbouring datasets differ by one person: added or removed, or replaced
by another, as the dataset charged declares (:meth:`~dp_pipeline.PrivacyAccountant.set_budget`,
``relation=``; ``"replace_one"`` by default and with ``accountant="unaccounted"``). Without a
``privacy_unit`` each row is a person. With ``privacy_unit="<column>"`` the rows sharing a value of that
column are one person, and at most ``max_contributions`` rows per person are kept: a uniform random sample
of that person's rows (the others are dropped before anything is computed). Every statistic is a sum of
per-row values in a declared range [l, u] (a count: l = u = 1; a sum: the clip bounds; a centred sum
Σ(x − c), c = (lower + upper)/2: ±(upper − lower)/2). The noise is calibrated to the most one person can
change it (see :func:`dp_pipeline.frames._core.sensitivity`, never the data), with Laplace noise (ε-DP,
L1) or Gaussian noise ((ε, δ)-DP, L2), through :func:`dp_pipeline._release.plan_noise`. The result's
``attrs["relation"]`` names the relation.

**Groups.** ``by=`` groups the rows by one or more columns. The set of groups that is released must not
depend on the data (a group present only because of one person reveals that person), so the group keys are
declared with ``keys=`` (``categories=`` for :func:`dp_histogram`); every declared key gets a noisy value,
also when no row has it, and rows with an undeclared key are left out. ``keys="data"`` takes the observed
keys instead and raises PrivacyLeakWarning.

**Results** come with their error: a Series ``value, std_error, ci_low, ci_high`` (no groups) or a DataFrame
with those columns indexed by the group keys. For counts and sums the noise is the only error and the
interval is exact for the bounded statistic: P(true value in [ci_low, ci_high]) = ``level`` (Laplace:
half-width b·ln(1/(1 − level)); Gaussian: Φ⁻¹((1 + level)/2)·σ). The "true value" is the statistic after
clipping and contribution bounding. ``result.attrs`` records the mechanism, ε, δ and the noise scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dp_pipeline._exact import subtract_up
from dp_pipeline._splitting import NoisePlan
from dp_pipeline.frames._common import column_list, interval_half_width, result_frame
from dp_pipeline.frames._core import Options, Release
from dp_pipeline.frames._dpbounds import learn_bounds, outer_range, search_cost
from dp_pipeline.frames._exact_sums import ExactSums, noisy_sums
from dp_pipeline.frames._registry import engine_of

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame as SparkDataFrame

__all__ = ["dp_count", "dp_histogram", "dp_mean", "dp_sum"]


def noisy(plan: NoisePlan, part: int, exact: ExactSums, rng: np.random.Generator) -> NDArray[np.float64]:
    """Part ``part`` of a release (one value per key) with its noise, added to the exact sum (see
    :func:`~dp_pipeline.frames._exact_sums.noisy_sums`)."""
    return noisy_sums(plan.parts[part], exact.totals[part], exact.exponents[part], rng)


def _count_or_sum(
    release: Release,
    exact: ExactSums,
    plan: NoisePlan,
    name: str,
    floor: float | None,
    extra: dict[str, Any],
) -> Any:
    noisy_value = noisy(plan, 0, exact, release.rng)
    std = np.full(noisy_value.shape, plan.noise_std[0])
    half = interval_half_width(release.noise, std, release.level)
    low = noisy_value - half if floor is None else np.maximum(noisy_value - half, floor)
    high = noisy_value + half if floor is None else np.maximum(noisy_value + half, floor)
    table = result_frame(noisy_value, std, low, high, release.index, name, release.attrs(plan, **extra))
    return release.engine.result(table)


def _count(release: Release, label: str) -> Any:
    """The noisy row count, whole or per group (each row counts 1), clipped at 0."""
    plan = release.plan([(1.0, 1.0)])
    with release.holding(plan.event, label):
        exact = release.sums(None, (1.0, 1.0), 0.0, [0], plan, [(1.0, 1.0)])
    return _count_or_sum(release, exact, plan, "count", 0.0, {})


def dp_count(
    df: Any,
    *,
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
    """DP row count, whole or per declared group.

    ``df.pipe(dp_count, epsilon=0.5, accountant=acct, dataset="patients")``

    Parameters
    ----------
    df : pandas or Spark DataFrame
        The private data (a Spark DataFrame: see :mod:`dp_pipeline.spark`; the result is then the same
        table as a small Spark DataFrame).
    epsilon : float
        ε > 0 of the release (the whole vector of group counts).
    accountant : PrivacyAccountant, DatasetHandle, Reservation or "unaccounted"
        Charged once per call, before the noise is drawn; ``"unaccounted"`` is the explicit opt-out.
    dataset : str, optional
        The dataset (budget) charged: required with a PrivacyAccountant, omitted with a handle
        (``acct.dataset("visits")``) or a reservation (see :mod:`dp_pipeline._spending`).
    by : column name or list of names, optional
        Group by these columns; needs ``keys``.
    keys : list or "data", optional
        The declared group keys (tuples when grouping by several columns).
    privacy_unit : column name, optional
        The column identifying the person; without it each row is a person.
    max_contributions : int
        m: the most rows kept per person (a random sample of them); needs ``privacy_unit`` when > 1.
    mechanism : {"laplace", "gaussian"}
        Laplace noise (ε-DP) or Gaussian noise ((ε, δ)-DP, needs ``delta``).
    delta : float, optional
        δ for Gaussian noise.
    group_size : int
        k ≥ 1: charge the release for groups of k rows (a person with up to k rows, when no
        ``privacy_unit`` column bounds contributions); the ledger prices the group exactly (Laplace and
        Gaussian: sensitivity ×k). Shown in refusals and the history.
    level : float
        Coverage of the interval, 0.95 by default.
    random_state : None, int or numpy.random.Generator
        The contribution sampling and the noise: None (default) for fresh OS entropy at every call; a
        bare seed or numpy Generator raises PrivacyLeakWarning (reproducible noise is for tests only);
        ``secure_rng(seed)`` seeds on purpose, without the warning.
    partition_column : column name, optional
        On a partitioned dataset (``set_budget(..., relation="add_remove", partitions=L)``): the column
        holding each row's partition (read as a string). Only rows of the named ``partition`` enter the
        release, and with a ``privacy_unit`` each person's rows are kept in at most L of their partitions,
        chosen at random (as ``max_contributions`` keeps rows). That bounds this release's rows; L must hold
        for the whole dataset, so when releases read one partition each, bound the data once before splitting
        them.
    partition : str or list of str, optional
        The partitions the release reads: it is charged to each of them (``spend(..., partition=...)``).
        None: the whole dataset. Without ``partition_column`` every row of ``df`` is read as theirs (a
        per-day extract): give the column when ``df`` holds other partitions too, whose rows would
        otherwise enter a release charged to these partitions only.

    Returns
    -------
    Series or DataFrame
        ``value`` (the noisy count, unbiased; it may be negative), ``std_error``, ``ci_low``, ``ci_high``
        (clipped at 0). A DataFrame indexed by the keys when grouped.

    Notes
    -----
    Sensitivity (see :func:`~dp_pipeline.frames._core.sensitivity`): m under add/remove and for one count
    under replace-one; for the vector of group counts under replace-one, L1 2m (Laplace scale 2m/ε) and
    L2 √2·m (the Gaussian σ of (ε, δ) at that sensitivity). See the module notes for the privacy unit and
    the keys.

    References
    ----------
    Dwork, McSherry, Nissim & Smith, "Calibrating noise to sensitivity in private data analysis", TCC 2006.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"diabetic": [True, False, True]})
    >>> out = df[df["diabetic"]].pipe(dp_count, epsilon=1.0, accountant="unaccounted")
    >>> list(out.index)
    ['value', 'std_error', 'ci_low', 'ci_high']
    """
    release = Release(
        "dp_count",
        df,
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
    )
    return _count(release, release.label("dp_count"))


def dp_histogram(
    df: Any,
    column: Any,
    *,
    categories: Any,
    epsilon: float,
    accountant: Any,
    dataset: str | None = None,
    privacy_unit: Any = None,
    max_contributions: int = 1,
    mechanism: str = "laplace",
    delta: float | None = None,
    group_size: int = 1,
    level: float = 0.95,
    random_state: Any = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.DataFrame | SparkDataFrame:
    """DP value counts of ``column`` over declared ``categories`` (a DP ``value_counts``).

    ``df.pipe(dp_histogram, "blood_type", categories=["A", "B", "AB", "O"], epsilon=1.0, accountant=acct,
    dataset="patients")`` is :func:`dp_count` grouped by ``column`` with ``keys=categories``: one noisy count
    per declared category (also for categories no row has); rows with other values are left out.
    ``categories="data"`` takes the observed values with a PrivacyLeakWarning. Other parameters as for
    :func:`dp_count`.

    Returns
    -------
    DataFrame
        Indexed by category: ``value``, ``std_error``, ``ci_low``, ``ci_high``.
    """
    (name,) = column_list(engine_of(df), column, "column")
    release = Release(
        "dp_histogram",
        df,
        Options(
            epsilon=epsilon,
            accountant=accountant,
            dataset=dataset,
            by=name,
            keys=categories,
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
        keys_name="categories",
    )
    result: pd.DataFrame = _count(release, f"dp_histogram of {name!r}")
    return result


class DeclaredBounds(NamedTuple):
    """How a sum's values are bounded, as the caller passed it: ``lower``/``upper``, or ``bounds="dp"``
    learned inside ``outer``."""

    lower: Any
    upper: Any
    bounds: Any
    outer: Any


def _charged_sums(
    release: Release,
    column: Any,
    declared: DeclaredBounds,
    ranges: Any,
    powers: list[int],
    centred: bool,
    label_what: str,
) -> tuple[Any, float, float, NoisePlan, ExactSums, dict[str, Any]]:
    """Charge the release once and compute its exact bounded sums of ``powers`` (centred on the bounds'
    midpoint when ``centred``): (column, lower, upper, plan, sums, extra attributes).

    With ``bounds="dp"`` the bounds are learned inside the same charge (see :mod:`._dpbounds`)."""
    lower, upper, bounds, outer = declared
    (name,) = column_list(release.engine, column, "column")
    ranged = outer_range(lower, upper, bounds, outer, [str(name)])
    searched = None if ranged is None else (float(ranged[0][0]), float(ranged[1][0]))
    name, low, high = release.value_column(name, lower, upper, searched)
    label = release.label(f"{label_what} of {name!r}")
    if searched is None:
        plan = release.plan(ranges(low, high))
        event, extra = plan.event, {}
    else:
        search, event = search_cost(release, searched, ranges)
        extra = {"cost": event.to_dict(), "outer": outer}
    with release.holding(event, label):
        if searched is not None:
            low, high, plan = learn_bounds(release, search, name, ranges)
        centre = (low + high) / 2.0 if centred else 0.0
        exact = release.sums(name, (low, high), centre, powers, plan, ranges(low, high))
    return name, low, high, plan, exact, {"lower": low, "upper": high, **extra}


def dp_sum(
    df: Any,
    column: Any,
    *,
    lower: float | None = None,
    upper: float | None = None,
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
    bounds: str | None = None,
    outer: tuple[float, float] | None = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.Series | pd.DataFrame | SparkDataFrame:
    """DP sum of ``column`` (values clipped to the declared [lower, upper]), whole or per declared group.

    Parameters
    ----------
    column : column name
        A numeric column without missing values.
    lower, upper : float
        Declared bounds; values outside are clipped (``result.attrs["n_clipped"]`` is not reported: the
        number of clipped values is not private).
    bounds : {None, "dp"}
        ``"dp"`` learns the bounds instead (no ``lower``/``upper``): the 1st and 99th percentiles, released
        with 10% of ε by the exponential mechanism inside ``outer``, charged with the release as one event
        whose cost is fixed before the data are read (see :mod:`dp_pipeline._learned_bounds`).
        ``result.attrs`` records the learned ``lower`` and ``upper``.
    outer : (float, float)
        With ``bounds="dp"``: the declared range (lo < hi) the bounds are learned in.
    Others
        As for :func:`dp_count`.

    Returns
    -------
    Series or DataFrame
        ``value`` (unbiased for the clipped sum), ``std_error``, ``ci_low``, ``ci_high``.

    Notes
    -----
    Sensitivity (see :func:`~dp_pipeline.frames._core.sensitivity`) with M = max(|lower|, |upper|),
    W = max(upper, 0) − min(lower, 0): mM under add/remove; under replace-one mW for one sum, and for group
    sums L1 2mM, L2 m·max(W, √2·M).
    """
    release = Release(
        "dp_sum",
        df,
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
    )
    declared = DeclaredBounds(lower, upper, bounds, outer)
    name, _, _, plan, exact, extra = _charged_sums(
        release, column, declared, lambda a, b: [(a, b)], [1], False, "dp_sum"
    )
    return _count_or_sum(release, exact, plan, f"sum({name})", None, extra)


def dp_mean(
    df: Any,
    column: Any,
    *,
    lower: float | None = None,
    upper: float | None = None,
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
    bounds: str | None = None,
    outer: tuple[float, float] | None = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.Series | pd.DataFrame | SparkDataFrame:
    """DP mean of ``column`` (values clipped to the declared [lower, upper]), whole or per declared group.

    Parameters are as for :func:`dp_sum`.

    Returns
    -------
    Series or DataFrame
        ``value`` in [lower, upper], ``std_error`` (delta method), ``ci_low``, ``ci_high`` (normal
        approximation, clipped to [lower, upper]).

    Notes
    -----
    With c = (lower + upper)/2, one release of two parts: the centred sum S = Σ(x − c) (values in ±h,
    h = (upper − lower)/2: sensitivity mh under add/remove, 2mh under replace-one) and the count N (as for
    :func:`dp_count`), each noisy, the budget split between them by
    :func:`~dp_pipeline._release.plan_noise` (Laplace: ε/2 each). The estimate is
    clip(c + S̃/max(Ñ, 1), lower, upper); centring keeps the noise of S̃ independent of where the data lie.
    Its standard error is the delta-method √(Var S̃ + (S̃/Ñ)² Var Ñ)/max(Ñ, 1), evaluated at the noisy values
    (post-processing, no further cost). The estimate is slightly biased when Ñ is small (division and
    clipping).

    References
    ----------
    Li, Lyu, Su & Yang, "Differential privacy: from theory to practice", 2016, §2.5 (noisy sum over noisy
    count with centring).
    """
    release = Release(
        "dp_mean",
        df,
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
    )
    declared = DeclaredBounds(lower, upper, bounds, outer)
    name, low, high, plan, exact, extra = _charged_sums(
        release, column, declared, _mean_ranges, [1, 0], True, "dp_mean"
    )
    centre = (low + high) / 2.0
    noisy_sum = noisy(plan, 0, exact, release.rng)
    noisy_count = noisy(plan, 1, exact, release.rng)
    count = np.maximum(noisy_count, 1.0)
    ratio = noisy_sum / count
    mean = np.clip(centre + ratio, low, high)
    var_sum, var_count = plan.noise_std**2
    std = np.sqrt(var_sum + ratio**2 * var_count) / count
    half = std * float(special.ndtri((1.0 + release.level) / 2.0))
    ci_low, ci_high = np.clip(mean - half, low, high), np.clip(mean + half, low, high)
    return release.engine.result(
        result_frame(
            mean,
            std,
            ci_low,
            ci_high,
            release.index,
            f"mean({name})",
            release.attrs(plan, **extra),
        )
    )


def centred(low: float, high: float) -> tuple[float, float]:
    """The centre c = (lower + upper)/2 of clipped values and h, the most |x − c| can be.

    The centred values are the floats x − c (rounded to nearest, monotone in x): bounded by their values at
    the clip bounds, rounded up, not by (upper − lower)/2, which can be one unit in the last place less.
    Their squares, rounded to nearest, are at most h·h rounded to nearest.
    """
    centre = (low + high) / 2.0
    return centre, max(subtract_up(high, centre), subtract_up(centre, low))


def _mean_ranges(low: float, high: float) -> list[tuple[float, float]]:
    """The value ranges of the centred sum and of the count (see :func:`dp_mean`)."""
    half_width = centred(low, high)[1]
    return [(-half_width, half_width), (1.0, 1.0)]
