"""DP quantiles and the median for ``DataFrame.pipe``: the exponential mechanism over a fixed grid.

**Method.** The clipped values x₁ ≤ … ≤ xₙ of the column (after contribution bounding) are scored on a
data-independent grid of K + 1 = 2¹⁶ + 1 candidates cₖ = lower + (upper − lower)·k/K: candidate c has rank
i(c) = #{x < c} and utility u(c) = −|i(c) − q·n|, computed exactly (rationals). One candidate is selected by
the exponential mechanism (:class:`~dp_pipeline.mechanisms.Exponential`), sampled exactly: the grid
candidates between two consecutive order statistics share a utility, so the mechanism first selects an
interval [x_(i), x_(i+1)) with probability ∝ (its number of grid points)·e^{εu/(2Δu)}, then a uniform grid
point in it, both with the secure sampler. This is Smith's (2011) interval mechanism with the uniform point
restricted to the grid, so that every probability is exact.

**Sensitivity Δu.** One person has at most m = ``max_contributions`` rows. Adding or removing a row moves
i(c) by at most 1 and q·n by q, so u(c) by at most max(q, 1 − q) ≤ 1; replacing one person's rows (a ≤ m by
b ≤ m) moves i(c) − q·n by at most max(a, b) ≤ m. Hence Δu = m under either relation for one release. Per
declared group, under add/remove the person's rows split between groups (Σ mₘ ≤ m, the losses add up to at
most ε), and under replace-one the old and new person's rows can fall into two groups: Δu = 2m (as for
grouped counts).

**Several quantiles** in one call split ε evenly: each quantile is one exponential mechanism with ε/k, and
the call is charged once, as a composite event of those k pure-ε parts.

**Error estimate** (data-independent): ``rank_error`` is the radius ρ = (2Δu/εq)·(ln(K + 1) + ln(1/β)) with
β = 1 − ``level``: with probability at least ``level`` the released value's rank i is within ρ of the best
grid candidate's (McSherry & Talwar 2007, Thm 8), and the best grid candidate's rank is within ½ of q·n
whenever every gap between consecutive data values holds a grid point. The values of the data at those ranks
are not reported (they are not private).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._validation import check_real
from dp_pipeline.accounting.composition import composite_event
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import require_pandas
from dp_pipeline.frames.aggregates import _clipped_column, _Release
from dp_pipeline.mechanisms import _sampling
from dp_pipeline.mechanisms.exponential import Exponential

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dp_median", "dp_quantile", "dp_quantiles"]

GRID_BITS = 16
"""The grid has 2**GRID_BITS + 1 candidates between the declared bounds."""


def _check_quantiles(quantiles: Any) -> list[float]:
    values = [quantiles] if np.ndim(quantiles) == 0 else list(np.asarray(quantiles, dtype=object).ravel())
    if not values:
        raise InvalidParameterError("'quantiles' must hold at least one quantile", "quantiles")
    checked = [check_real(q, "quantiles") for q in values]
    if any(not 0.0 <= q <= 1.0 for q in checked):
        raise InvalidParameterError("every quantile must lie in [0, 1]", "quantiles")
    return checked


def _grid(low: float, high: float) -> NDArray[np.float64]:
    steps = 1 << GRID_BITS
    return np.asarray(low + (high - low) * (np.arange(steps + 1) / steps), dtype=np.float64)


def quantile_mechanism(epsilon: float, grouped: bool, relation: str, m: int) -> Exponential:
    """The exponential mechanism of one quantile: Δu = m, or 2m for declared groups under replace-one."""
    factor = 2 if grouped and relation == "replace_one" else 1
    return Exponential(epsilon=epsilon, sensitivity=float(factor * m))


def select_quantile(
    mechanism: Exponential,
    ordered: NDArray[np.float64],
    grid: NDArray[np.float64],
    q: float,
    rng: np.random.Generator,
) -> float:
    """One DP quantile of the sorted clipped ``ordered`` over ``grid`` (see the module notes)."""
    ranks = np.searchsorted(ordered, grid, side="left")  # i(c) = #{x < c}, non-decreasing along the grid
    starts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]])
    sizes = np.diff(np.r_[starts, grid.size])
    target = Fraction(q) * int(ordered.size)
    utilities = [-abs(int(r) - target) for r in ranks[starts]]
    block = mechanism.select(utilities, sizes, rng)
    return float(grid[starts[block] + _sampling.uniform_index(rng, int(sizes[block]))])


def rank_error(mechanism: Exponential, candidates: int, level: float) -> float:
    """ρ = (2Δu/ε)·(ln(candidates) + ln(1/(1 − level))), rounded up (see the module notes)."""
    exact = 2.0 * mechanism.sensitivity / mechanism.epsilon * (math.log(candidates) - math.log1p(-level))
    return math.nextafter(exact, math.inf) * (1.0 + 1e-12)


def _groups(release: _Release, rows: pd.DataFrame, values: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """The sorted values of the whole column, or of each declared group (in the order of the keys)."""
    if release.by is None:
        return [np.sort(values)]
    pandas = require_pandas()
    series = pandas.Series(values, index=rows.index)
    positions = series.groupby([rows[c] for c in release.by], observed=True, dropna=False).indices
    assert release.index is not None
    empty = np.array([], dtype=np.intp)
    return [np.sort(values[positions.get(key, empty)]) for key in release.index]


def _index(release: _Release, qs: list[float]) -> pd.Index:
    """The quantiles, or (key columns…, quantile) for each declared key."""
    pandas = require_pandas()
    if release.by is None or release.index is None:
        return pandas.Index(qs, name="quantile")
    several = len(release.by) > 1
    rows = [(*key, q) if several else (key, q) for key in release.index for q in qs]
    return pandas.MultiIndex.from_tuples(rows, names=[*release.by, "quantile"])


def _quantile_table(
    df: Any, column: Any, qs: list[float], options: dict[str, Any], owner: str
) -> tuple[pd.DataFrame, list[float]]:
    release = _Release(owner, {**options, "df": df, "mechanism": "laplace", "delta": None})
    name, low, high, rows, values, _ = _clipped_column(release, column, options["lower"], options["upper"])
    per_quantile = release.epsilon / len(qs)
    mechanism = quantile_mechanism(per_quantile, release.by is not None, release.relation, release.m)
    parts: Sequence[PrivacyEvent] = [mechanism.event.under(release.relation)] * len(qs)
    event = parts[0] if len(qs) == 1 else composite_event(parts, release.relation)
    label = release.label(f"{owner} of {name!r}")
    release.charge_event(event, label)
    grid = _grid(low, high)
    released = [
        [select_quantile(mechanism, ordered, grid, q, release.rng) for q in qs]
        for ordered in _groups(release, rows, values)
    ]
    radius = rank_error(mechanism, grid.size, release.level)
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
        grid_size=int(grid.size),
        level=release.level,
        lower=low,
        upper=high,
        max_contributions=release.m,
        relation=release.relation,
        group_size=release.group_size,
        cost=event.to_dict(),
    )
    return table


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
) -> pd.DataFrame:
    """DP quantiles of ``column`` (each q in [0, 1]), whole or per declared group, in one release.

    ``df.pipe(dp_quantiles, "age", [0.25, 0.5, 0.75], lower=0, upper=120, epsilon=1.0, accountant=acct,
    dataset="patients")``
    Parameters
    ----------
    df : DataFrame
        The private data.
    column : column name
        A numeric column without missing values.
    lower, upper : float
        Declared bounds (lower < upper): values outside are clipped, and the released values lie on the grid
        of 2¹⁶ + 1 points between them.
    epsilon : float
        ε > 0 of the whole call (split evenly between the quantiles, and valid for all groups together).
    accountant : PrivacyAccountant or "unaccounted"
        Charged once per call, before anything is drawn; ``"unaccounted"`` is the explicit opt-out.
    dataset : str
        The dataset (budget) charged.
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
        The partitions the release reads, and each person bounded to L of them (as for
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
    replace-one); see :mod:`dp_pipeline.frames.quantiles`.

    References
    ----------
    McSherry & Talwar, "Mechanism design via differential privacy", FOCS 2007.
    Smith, "Privacy-preserving statistical estimation with optimal convergence rates", STOC 2011.
    """
    options = {k: v for k, v in locals().items() if k not in ("df", "column", "quantiles")}
    return _quantile_table(df, column, _check_quantiles(quantiles), options, "dp_quantiles")


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
) -> pd.Series | pd.DataFrame:
    """One DP quantile of ``column``: :func:`dp_quantiles` with one q.

    Returns a Series ``value, rank_error`` (a DataFrame with those columns indexed by the keys when
    grouped).
    """
    options = {k: v for k, v in locals().items() if k not in ("df", "column", "quantile")}
    return _single(_quantile_table(df, column, _check_quantiles(quantile)[:1], options, "dp_quantile"))


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
) -> pd.Series | pd.DataFrame:
    """The DP median of ``column``: :func:`dp_quantile` with q = ½.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [30, 41, 52, 67]})
    >>> out = df.pipe(dp_median, "age", lower=0, upper=120, epsilon=1.0, accountant="unaccounted")
    >>> list(out.index)
    ['value', 'rank_error']
    """
    options = {k: v for k, v in locals().items() if k not in ("df", "column")}
    return _single(_quantile_table(df, column, [0.5], options, "dp_median"))


def _single(table: pd.DataFrame) -> pd.Series | pd.DataFrame:
    """A one-quantile table without its quantile level: a Series, or a frame indexed by the keys."""
    out: pd.Series | pd.DataFrame
    if isinstance(table.index, require_pandas().MultiIndex):
        out = table.droplevel("quantile")
    else:
        out = table.iloc[0].rename(table.columns.name)
    out.attrs.update(table.attrs)
    return out
