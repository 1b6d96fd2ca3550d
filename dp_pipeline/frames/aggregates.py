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
change it (see :func:`_sensitivity`, never the data), with Laplace noise (ε-DP, L1) or Gaussian noise
((ε, δ)-DP, L2), through :func:`dp_pipeline._release.plan_noise`. The result's ``attrs["relation"]`` names
the relation.

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

from collections.abc import Hashable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dp_pipeline._release import (
    NoiseFamily,
    NoisePlan,
    charge,
    check_delta,
    check_epsilon,
    check_ledger,
    dataset_partitions,
    dataset_relation,
    declared_bounds,
    plan_noise,
    release_rng,
)
from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting.partitions import partition_names
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exact import sqrt_up, subtract_up, times_up
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import (
    bound_contributions,
    bound_partitions,
    check_frame,
    check_level,
    column_list,
    group_index,
    interval_half_width,
    numeric_values,
    require_pandas,
    result_frame,
)
from dp_pipeline.frames._dpbounds import check_outer, learn_and_charge

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["dp_count", "dp_histogram", "dp_mean", "dp_sum"]

_NOISES = ("laplace", "gaussian")


class _Release:
    """The common steps of one aggregate: arguments, contribution bounding, grouping, noise plan.

    ``arguments`` are the aggregate's own (its ``locals()`` on entry): every aggregate takes the options they
    share (``df``, ``epsilon``, ``delta``, ``mechanism``, ``by``, ``keys``, ``privacy_unit``,
    ``max_contributions``, ``group_size``, ``accountant``, ``dataset``, ``random_state`` and ``level``, and
    ``partition_column`` and ``partition``) under these names.
    """

    def __init__(self, owner: str, arguments: Mapping[str, Any], *, keys_name: str = "keys") -> None:
        self.df = check_frame(arguments["df"])
        self.accountant, self.dataset = arguments["accountant"], arguments["dataset"]
        check_ledger(self.accountant, self.dataset)
        mechanism = arguments["mechanism"]
        if mechanism not in _NOISES:
            raise InvalidParameterError(
                f"'mechanism' must be 'laplace' or 'gaussian', got {mechanism!r}", "mechanism"
            )
        self.noise: NoiseFamily = mechanism
        self.epsilon = check_epsilon(arguments["epsilon"])
        self.delta = arguments["delta"]
        check_delta(self.noise, self.delta)
        self.level = check_level(arguments["level"])
        by, keys = arguments["by"], arguments["keys"]
        self.by: list[Hashable] | None = None
        self.index: pd.Index | None = None
        if by is not None:
            self.by, self.index = group_index(self.df, by, keys, keys_name)
        if by is None and keys is not None:
            raise InvalidParameterError(f"{keys_name!r} needs 'by' (the columns to group by)", keys_name)
        self.max_contributions = arguments["max_contributions"]
        self.privacy_unit = arguments["privacy_unit"]
        self.partition = partition_names(arguments["partition"])
        self.partition_column = arguments["partition_column"]
        self.partitions_per_person = self._partitions_per_person()
        self.relation = dataset_relation(self.accountant, self.dataset)
        self.group_size = check_positive_int(arguments["group_size"], "group_size")
        self.rng = release_rng(arguments["random_state"], owner)

    def _partitions_per_person(self) -> int | None:
        """L of the dataset charged, needed when ``partition_column`` is given; None otherwise."""
        if self.partition_column is None:
            return None
        limit = dataset_partitions(self.accountant, self.dataset)
        if limit is None:
            raise InvalidParameterError(
                "'partition_column' bounds each person to the L partitions the dataset charged declares "
                "(set_budget(..., partitions=L)); this release is charged to no partitioned dataset",
                "partition_column",
            )
        return limit

    def rows(self) -> pd.DataFrame:
        """The rows that enter the release: with ``partition_column``, those of the named partitions in at
        most L partitions per person (:func:`~dp_pipeline.frames._common.bound_partitions`); then at most
        ``max_contributions`` per person."""
        rows, unit, limit = self.df, self.privacy_unit, self.partitions_per_person
        if limit is not None:
            rows = bound_partitions(rows, unit, self.partition_column, self.partition, limit, self.rng)
        return bound_contributions(rows, unit, self.max_contributions, self.rng)

    @property
    def m(self) -> int:
        return int(self.max_contributions)

    def per_group(self, frame: pd.DataFrame, values: NDArray[np.float64] | None) -> NDArray[np.float64]:
        """Σ values (or the row count when ``values`` is None) over all rows, or per declared group."""
        if self.by is None:
            total = float(len(frame)) if values is None else float(np.sum(values))
            return np.array([total])
        pandas = require_pandas()
        weights = pandas.Series(np.ones(len(frame)) if values is None else values, index=frame.index)
        try:
            grouped = weights.groupby([frame[c] for c in self.by], observed=True, dropna=False).sum()
        except TypeError:  # unhashable keys; refused outside the handler, whose message may quote one
            grouped = None
        if grouped is None:
            raise InvalidParameterError(
                f"column(s) {self.by} hold unhashable values (e.g. lists); only hashable keys can be grouped",
                "by",
            )
        assert self.index is not None
        if len(self.by) == 1:
            grouped.index = grouped.index.get_level_values(0) if grouped.index.nlevels > 1 else grouped.index
        return np.asarray(grouped.reindex(self.index, fill_value=0.0).to_numpy(dtype=np.float64))

    def plan(self, ranges: list[tuple[float, float]], epsilon: float | None = None) -> NoisePlan:
        """The noise of one part per value range [l, u] (see :func:`_sensitivity`), for ``epsilon`` (the
        release's own by default)."""
        norm = 1 if self.noise == "gaussian" else 0  # L2 for Gaussian noise, L1 for Laplace

        def under(relation: str) -> list[float]:
            return [_sensitivity(relation, self.by is not None, self.m, lo, hi)[norm] for lo, hi in ranges]

        return plan_noise(
            self.noise,
            under(self.relation),
            epsilon=self.epsilon if epsilon is None else epsilon,
            delta=self.delta,
            relation=self.relation,
            replace_one=under("replace_one") if self.relation == "add_remove" else None,
        )

    def charge(self, plan: NoisePlan, label: str) -> None:
        self.charge_event(plan.event, label)

    def charge_event(self, event: PrivacyEvent, label: str) -> None:
        """Charge the release's event to the dataset (and the partitions it names) before any noise."""
        charge(self.accountant, self.dataset, event, label, self.group_size, self.partition or None)

    def attrs(self, plan: NoisePlan, **extra: Any) -> dict[str, Any]:
        return {
            "mechanism": self.noise,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "noise_std": plan.noise_std.tolist(),
            "level": self.level,
            "max_contributions": self.m,
            "relation": self.relation,
            "group_size": self.group_size,
            "cost": plan.event.to_dict(),
            **extra,
        }

    def label(self, what: str) -> str:
        return what if self.by is None else f"{what} by {self.by}"


def _sensitivity(relation: str, grouped: bool, m: int, low: float, high: float) -> tuple[float, float]:
    """(L1, L2): the most one person changes a sum of per-row values in [low, high] (or the vector of its
    per-group sums), each person having at most m rows; rounded up.

    Write M = max(|l|, |u|) and W = max(u, 0) − min(l, 0), the width of [min(l, 0), max(u, 0)].

    * add/remove: the person's ≤ m rows appear or vanish. One total moves by at most mM; a vector of group
      totals by at most mM in L1, and in L2 too (all rows in one group).
    * replace-one, one total: the old person's rows sum to some A and the new one's to some B, both in
      [m·min(l, 0), m·max(u, 0)] (a person may have 0 to m rows), so |B − A| ≤ mW.
    * replace-one, group totals: the change is B − A with A, B the two persons' vectors of group totals.
      Each row is an atom: ±value at one group (the new person's rows add, the old one's subtract). The norms
      are convex in the atoms, so they are largest with every row at l or u (or absent) and all atoms of one
      sign in one group: either everything in one group (|change| ≤ mW), or the old person's atoms and the
      new one's in two groups, each of size up to mM. Hence L1 = max(mW, 2mM) = 2mM (W ≤ 2M), and
      L2 = m·max(W, √2·M). For counts (l = u = 1): L1 = 2m, L2 = √2·m.

    Values in [l, u] with l ≥ 0 or u ≤ 0 give W = M, so replace-one never costs less than add/remove.
    """
    magnitude = max(abs(low), abs(high))
    width = subtract_up(max(high, 0.0), min(low, 0.0))
    if relation == "add_remove":
        return times_up(m, magnitude), times_up(m, magnitude)
    if not grouped:
        return times_up(m, width), times_up(m, width)
    root2_magnitude = sqrt_up(2 * Fraction(magnitude) ** 2)
    return times_up(2 * m, magnitude), max(times_up(m, width), times_up(m, root2_magnitude))


def _noisy(
    plan: NoisePlan, part: int, exact: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.float64]:
    return np.asarray(plan.mechanisms[part].randomize(exact, rng), dtype=np.float64).reshape(exact.shape)


def _count_or_sum(
    release: _Release,
    exact: NDArray[np.float64],
    values: tuple[float, float],
    label: str,
    name: str,
    floor: float | None,
    extra: dict[str, Any],
    plan: NoisePlan | None = None,
) -> Any:
    if plan is None:
        plan = release.plan([values])
        release.charge(plan, label)
    noisy = _noisy(plan, 0, exact, release.rng)
    std = np.full(noisy.shape, plan.noise_std[0])
    half = interval_half_width(release.noise, std, release.level)
    low = noisy - half if floor is None else np.maximum(noisy - half, floor)
    high = noisy + half if floor is None else np.maximum(noisy + half, floor)
    return result_frame(noisy, std, low, high, release.index, name, release.attrs(plan, **extra))


def _count(release: _Release, label: str) -> Any:
    """The noisy row count, whole or per group (each row counts 1), clipped at 0."""
    exact = release.per_group(release.rows(), None)
    return _count_or_sum(release, exact, (1.0, 1.0), label, "count", 0.0, {})


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
) -> pd.Series | pd.DataFrame:
    """DP row count, whole or per declared group.

    ``df.pipe(dp_count, epsilon=0.5, accountant=acct, dataset="patients")``

    Parameters
    ----------
    df : DataFrame
        The private data.
    epsilon : float
        ε > 0 of the release (the whole vector of group counts).
    accountant : PrivacyAccountant or "unaccounted"
        Charged once per call, before the noise is drawn; ``"unaccounted"`` is the explicit opt-out.
    dataset : str
        The dataset (budget) charged.
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
        On a partitioned dataset (``set_budget(..., partitions=L)``): the column holding each row's
        partition. Only rows of the named ``partition`` are read, and with a ``privacy_unit`` each person's
        rows are kept in at most L of their partitions, chosen at random (as ``max_contributions`` keeps
        rows). L must hold for the whole dataset across releases: bound it once, before the data are split
        into per-partition releases, when releases read one partition each.
    partition : str or list of str, optional
        The partitions the release reads: it is charged to each of them (``spend(..., partition=...)``).
        None: the whole dataset.

    Returns
    -------
    Series or DataFrame
        ``value`` (the noisy count, unbiased; it may be negative), ``std_error``, ``ci_low``, ``ci_high``
        (clipped at 0). A DataFrame indexed by the keys when grouped.

    Notes
    -----
    Sensitivity (see :func:`_sensitivity`): m under add/remove and for one count under replace-one; for the
    vector of group counts under replace-one, L1 2m (Laplace scale 2m/ε) and L2 √2·m (the Gaussian σ of
    (ε, δ) at that sensitivity). See the module notes for the privacy unit and the keys.

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
    release = _Release("dp_count", locals())
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
) -> pd.DataFrame:
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
    (name,) = column_list(check_frame(df), column, "column")
    release = _Release("dp_histogram", {**locals(), "by": name, "keys": categories}, keys_name="categories")
    result: pd.DataFrame = _count(release, f"dp_histogram of {name!r}")
    return result


def _clipped_column(
    release: _Release, column: Any, lower: Any, upper: Any, bounds: Any = None, outer: Any = None
) -> tuple[Any, float, float, pd.DataFrame, NDArray[np.float64], bool]:
    """The column (numeric, no missing values), its declared bounds (the outer range with ``bounds="dp"``),
    the rows that enter the release with their values of the column clipped to those bounds, and whether
    the bounds are still to be learned."""
    (name,) = column_list(release.df, column, "column")
    searched = check_outer(lower, upper, bounds, outer, str(name))
    if searched is None:
        lows, highs = declared_bounds(lower, upper, [str(name)], required=True)
        low, high = float(lows[0]), float(highs[0])
    else:
        low, high = searched
    numeric_values(release.df, name, "column")
    rows = release.rows()
    values = np.clip(numeric_values(rows, name, "column"), low, high)
    return name, low, high, rows, values, searched is not None


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
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
    bounds: str | None = None,
    outer: tuple[float, float] | None = None,
) -> pd.Series | pd.DataFrame:
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
        whose cost is fixed before the data are read (see :mod:`dp_pipeline.frames._dpbounds`).
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
    Sensitivity (see :func:`_sensitivity`) with M = max(|lower|, |upper|), W = max(upper, 0) − min(lower, 0):
    mM under add/remove; under replace-one mW for one sum, and for group sums L1 2mM, L2 m·max(W, √2·M).
    """
    release = _Release("dp_sum", locals())
    name, low, high, rows, values, learn = _clipped_column(release, column, lower, upper, bounds, outer)
    label = release.label(f"dp_sum of {name!r}")
    plan, extra = None, {}
    if learn:
        low, high, plan, event = learn_and_charge(release, (low, high), values, lambda a, b: [(a, b)], label)
        values, extra = np.clip(values, low, high), {"cost": event.to_dict(), "outer": outer}
    exact = release.per_group(rows, values)
    return _count_or_sum(
        release, exact, (low, high), label, f"sum({name})", None, {"lower": low, "upper": high, **extra}, plan
    )


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
    partition_column: Any = None,
    partition: str | Sequence[str] | None = None,
    bounds: str | None = None,
    outer: tuple[float, float] | None = None,
) -> pd.Series | pd.DataFrame:
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
    release = _Release("dp_mean", locals())
    name, low, high, rows, values, learn = _clipped_column(release, column, lower, upper, bounds, outer)
    label = release.label(f"dp_mean of {name!r}")
    extra: dict[str, Any] = {}
    if learn:
        low, high, plan, event = learn_and_charge(release, (low, high), values, _mean_ranges, label)
        values, extra = np.clip(values, low, high), {"cost": event.to_dict(), "outer": outer}
    else:
        plan = release.plan(_mean_ranges(low, high))
        release.charge(plan, label)
    centre = (low + high) / 2.0
    exact_sum = release.per_group(rows, values - centre)
    exact_count = release.per_group(rows, None)
    noisy_sum = _noisy(plan, 0, exact_sum, release.rng)
    noisy_count = _noisy(plan, 1, exact_count, release.rng)
    count = np.maximum(noisy_count, 1.0)
    ratio = noisy_sum / count
    mean = np.clip(centre + ratio, low, high)
    var_sum, var_count = plan.noise_std**2
    std = np.sqrt(var_sum + ratio**2 * var_count) / count
    half = std * float(special.ndtri((1.0 + release.level) / 2.0))
    ci_low, ci_high = np.clip(mean - half, low, high), np.clip(mean + half, low, high)
    return result_frame(
        mean,
        std,
        ci_low,
        ci_high,
        release.index,
        f"mean({name})",
        release.attrs(plan, lower=low, upper=high, **extra),
    )


def _mean_ranges(low: float, high: float) -> list[tuple[float, float]]:
    """The value ranges of the centred sum and of the count (see :func:`dp_mean`).

    The centred values are the floats x − c (rounded to nearest, monotone in x): bounded by their values at
    the clip bounds, rounded up, not by (upper − lower)/2, which can be one unit in the last place less.
    """
    centre = (low + high) / 2.0
    half_width = max(subtract_up(high, centre), subtract_up(centre, low))
    return [(-half_width, half_width), (1.0, 1.0)]
