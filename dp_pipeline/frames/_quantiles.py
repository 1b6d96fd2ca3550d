"""DP quantiles and the median for ``DataFrame.pipe``: the exponential mechanism over a fixed grid.

**Method** (:mod:`dp_pipeline._quantile`). The clipped values of the column (after contribution bounding)
are scored on a data-independent grid of 2¹⁶ + 1 candidates between the declared bounds: candidate c has
rank i(c) = #{x < c} and utility −|i(c) − q·n|. One candidate is selected by the exponential mechanism
(:class:`~dp_pipeline.mechanisms.Exponential`), sampled exactly (Smith's 2011 interval mechanism with the
uniform point restricted to the grid).

**Sensitivity Δu** = m = ``max_contributions`` under either relation, and 2m per declared group under
replace-one (the old and new person's rows can fall into two groups).

**Several quantiles** in one call split ε evenly: each quantile is one exponential mechanism with ε/k, and
the call is charged once, as a composite event of those k pure-ε parts. They select on the same data
independently, so a plan of that one release prices it by the optimal composition of k ε/k-bounded-range
mechanisms (Dong, Durfee & Rogers 2020), tighter than ε at δ > 0. (The joint exponential mechanism of
Gillenwater, Joseph & Kulesza 2021, which spends ε once on all k quantiles, is not implemented.)

**Error estimate** (data-independent): ``rank_error`` is the radius ρ = (2Δu/εq)·(ln(K + 1) + ln(1/β)) with
β = 1 − ``level``: with probability at least ``level`` the released value's rank i is within ρ of the best
grid candidate's (McSherry & Talwar 2007, Thm 8), and the best grid candidate's rank is within ½ of q·n
whenever every gap between consecutive data values holds a grid point. The values of the data at those ranks
are not reported (they are not private).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dp_pipeline._quantile import grid, quantile_mechanism, rank_error, select_from_ranks
from dp_pipeline._validation import check_real
from dp_pipeline.events import PrivacyEvent, composite_event
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import require_pandas
from dp_pipeline.frames._core import Options, Release

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame as SparkDataFrame

__all__ = ["dp_median", "dp_quantile", "dp_quantiles"]


def _check_quantiles(quantiles: Any) -> list[float]:
    values = [quantiles] if np.ndim(quantiles) == 0 else list(np.asarray(quantiles, dtype=object).ravel())
    if not values:
        raise InvalidParameterError("'quantiles' must hold at least one quantile", "quantiles")
    checked = [check_real(q, "quantiles") for q in values]
    if any(not 0.0 <= q <= 1.0 for q in checked):
        raise InvalidParameterError("every quantile must lie in [0, 1]", "quantiles")
    return checked


def _index(release: Release, qs: list[float]) -> pd.Index:
    """The quantiles, or (key columns…, quantile) for each declared key."""
    pandas = require_pandas()
    if release.by is None or release.index is None:
        return pandas.Index(qs, name="quantile")
    several = len(release.by) > 1
    rows = [(*key, q) if several else (key, q) for key in release.index for q in qs]
    return pandas.MultiIndex.from_tuples(rows, names=[*release.by, "quantile"])


def _quantile_table(
    df: Any,
    column: Any,
    qs: list[float],
    bounds: tuple[Any, Any],
    options: Options,
    owner: str,
    single: bool = False,
) -> Any:
    release = Release(owner, df, options)
    name, low, high = release.value_column(column, *bounds)
    per_quantile = release.epsilon / len(qs)
    mechanism = quantile_mechanism(per_quantile, release.by is not None, release.relation, release.m)
    parts: Sequence[PrivacyEvent] = [mechanism.event.under(release.relation)] * len(qs)
    event = parts[0] if len(qs) == 1 else composite_event(parts, release.relation)
    candidates = grid(low, high)
    with release.holding(event, release.label(f"{owner} of {name!r}")):
        ranks = release.grid_ranks(name, (low, high), candidates)
    released = [[select_from_ranks(mechanism, r, candidates, q, release.rng) for q in qs] for r in ranks]
    radius = rank_error(mechanism, candidates.size, release.level)
    pandas = require_pandas()
    table = pandas.DataFrame(
        {"value": np.ravel(released), "rank_error": np.full(len(released) * len(qs), radius)},
        index=_index(release, qs),
    )
    table.columns.name = f"quantile({name})"
    table.attrs.update(
        mechanism="exponential",
        epsilon=release.epsilon,
        epsilon_per_quantile=per_quantile,
        utility_sensitivity=mechanism.sensitivity,
        grid_size=int(candidates.size),
        level=release.level,
        lower=low,
        upper=high,
        max_contributions=release.m,
        relation=release.relation,
        group_size=release.group_size,
        cost=event.to_dict(),
    )
    return release.engine.result(_single(table) if single else table)


def dp_quantiles(
    df: Any,
    column: Any,
    quantiles: Any,
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
    group_size: int = 1,
    level: float = 0.95,
    random_state: Any = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.DataFrame | SparkDataFrame:
    """DP quantiles of ``column`` (each q in [0, 1]), whole or per declared group, in one release.

    ``df.pipe(dp_quantiles, "age", [0.25, 0.5, 0.75], lower=0, upper=120, epsilon=1.0, accountant=acct,
    dataset="patients")``
    Parameters
    ----------
    df : pandas or Spark DataFrame
        The private data (a Spark DataFrame: see :mod:`dp_pipeline.spark`; the result is then the same
        table as a small Spark DataFrame).
    column : column name
        A numeric column without missing values.
    lower, upper : float
        Declared bounds (lower < upper): values outside are clipped, and the released values lie on the grid
        of 2¹⁶ + 1 points between them.
    epsilon : float
        ε > 0 of the whole call (split evenly between the quantiles, and valid for all groups together).
    accountant : PrivacyAccountant, DatasetHandle, Reservation or "unaccounted"
        Charged once per call, before anything is drawn; ``"unaccounted"`` is the explicit opt-out.
    dataset : str, optional
        The dataset (budget) charged: required with a PrivacyAccountant, omitted with a handle
        (``acct.dataset("visits")``) or a reservation (see :mod:`dp_pipeline._spending`).
    by, keys : optional
        Group by these columns, with the declared keys (as for :func:`~dp_pipeline.frames.dp_count`).
    privacy_unit, max_contributions : optional
        The person column and the most rows kept per person (as for :func:`~dp_pipeline.frames.dp_count`).
    group_size : int
        Charge the release for groups of this many rows.
    level : float
        The probability of the ``rank_error`` bound, 0.95 by default.
    random_state : None, int or numpy.random.Generator
        As for :func:`~dp_pipeline.frames.dp_count`.
    partition_column, partition : optional
        The partitions the release reads, each person kept in at most L of them (as for
        :func:`~dp_pipeline.frames.dp_count`).
    quantiles : float or list of floats
        The quantiles q ∈ [0, 1].

    Returns
    -------
    DataFrame
        Indexed by quantile (by key columns and quantile when grouped): ``value`` and ``rank_error`` (the
        data-independent radius ρ of the module notes: with probability ≥ ``level`` the value's rank is
        within ρ of q·n, up to the grid). ``attrs`` records ε, the utility sensitivity and the cost.

    Notes
    -----
    The exponential mechanism over a fixed grid, sampled exactly; sensitivity m (2m for groups under
    replace-one); see :mod:`dp_pipeline.frames._quantiles`.

    References
    ----------
    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007.
    Smith, "Privacy-preserving statistical estimation with optimal convergence rates", STOC 2011.
    """
    options = Options(
        epsilon=epsilon,
        accountant=accountant,
        dataset=dataset,
        by=by,
        keys=keys,
        privacy_unit=privacy_unit,
        max_contributions=max_contributions,
        mechanism="laplace",
        delta=None,
        group_size=group_size,
        level=level,
        random_state=random_state,
        partition_column=partition_column,
        partition=partition,
    )
    return _quantile_table(df, column, _check_quantiles(quantiles), (lower, upper), options, "dp_quantiles")


def dp_quantile(
    df: Any,
    column: Any,
    quantile: float,
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
    group_size: int = 1,
    level: float = 0.95,
    random_state: Any = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.Series | pd.DataFrame | SparkDataFrame:
    """One DP quantile of ``column``: :func:`dp_quantiles` with one q.

    Returns a Series ``value, rank_error`` (a DataFrame with those columns indexed by the keys when
    grouped).
    """
    options = Options(
        epsilon=epsilon,
        accountant=accountant,
        dataset=dataset,
        by=by,
        keys=keys,
        privacy_unit=privacy_unit,
        max_contributions=max_contributions,
        mechanism="laplace",
        delta=None,
        group_size=group_size,
        level=level,
        random_state=random_state,
        partition_column=partition_column,
        partition=partition,
    )
    qs = _check_quantiles(quantile)[:1]
    return _quantile_table(df, column, qs, (lower, upper), options, "dp_quantile", single=True)


def dp_median(
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
    group_size: int = 1,
    level: float = 0.95,
    random_state: Any = None,
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
) -> pd.Series | pd.DataFrame | SparkDataFrame:
    """The DP median of ``column``: :func:`dp_quantile` with q = ½.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [30, 41, 52, 67]})
    >>> out = df.pipe(dp_median, "age", lower=0, upper=120, epsilon=1.0, accountant="unaccounted")
    >>> list(out.index)
    ['value', 'rank_error']
    """
    options = Options(
        epsilon=epsilon,
        accountant=accountant,
        dataset=dataset,
        by=by,
        keys=keys,
        privacy_unit=privacy_unit,
        max_contributions=max_contributions,
        mechanism="laplace",
        delta=None,
        group_size=group_size,
        level=level,
        random_state=random_state,
        partition_column=partition_column,
        partition=partition,
    )
    return _quantile_table(df, column, [0.5], (lower, upper), options, "dp_median", single=True)


def _single(table: pd.DataFrame) -> pd.Series | pd.DataFrame:
    """A one-quantile table without its quantile level: a Series, or a frame indexed by the keys."""
    out: pd.Series | pd.DataFrame
    if isinstance(table.index, require_pandas().MultiIndex):
        out = table.droplevel("quantile")
    else:
        out = table.iloc[0].rename(table.columns.name)
    out.attrs.update(table.attrs)
    return out
