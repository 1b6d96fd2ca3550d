"""The privacy core of the frame functions, shared by every engine: arguments, sensitivity, noise plan,
charge and result attributes.

A frame function builds one :class:`Release` from its arguments (nothing is read), plans its noise from the
declared bounds (:func:`sensitivity`), then computes the exact bounded aggregate inside
:meth:`Release.holding`, which its spender pays (:meth:`~dp_pipeline.accounting._spender.Spender.hold`:
a dataset's budget is reserved before any data is read, a refusal reads nothing), and only then is the
noise drawn, on the driver. Only the
aggregate (``Engine.sums``, ``Engine.grid_ranks`` of :mod:`dp_pipeline.frames._engine`) is the engine's. Sums
are exact and the noise is added to the exact sum (:mod:`dp_pipeline.frames._exact_sums`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline._exact import sqrt_up, subtract_up, times_up
from dp_pipeline._spending import as_spender
from dp_pipeline._splitting import NoiseFamily, NoisePlan, check_delta, check_epsilon, plan_noise
from dp_pipeline._tabular import declared_bounds
from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting import Spender
from dp_pipeline.accounting._partitions import partition_names
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.frames._common import check_level, check_limit, column_list, group_index
from dp_pipeline.frames._engine import Bounding, Engine, PartitionBounding
from dp_pipeline.frames._exact_sums import ExactSums, grid_exponent
from dp_pipeline.frames._registry import engine_of
from dp_pipeline.mechanisms.sampling import drawn_event, release_rng

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Options", "Release", "sensitivity"]

NOISES = ("laplace", "gaussian")


@dataclass(frozen=True)
class Options:
    """The options every aggregate takes, typed as its signature declares them and passed on unchecked
    (:class:`Release` checks them): see :func:`~dp_pipeline.frames.dp_count` for their meaning."""

    epsilon: float
    accountant: Any
    dataset: str | None
    by: Any
    keys: Any
    privacy_unit: Any
    max_contributions: int
    mechanism: str
    delta: float | None
    group_size: int
    level: float
    random_state: Any
    partition_column: Any
    partition: str | Sequence[str] | None


class Release:
    """One aggregate release: its checked arguments, whose rows enter it, its noise plan, who pays.

    Built from the DataFrame ``df`` and the shared :class:`Options` of the frame function ``owner``
    (``keys_name``: the name its keys go by, ``"categories"`` for a histogram). Nothing is read from the
    data but its schema (and, for data in memory, the checks of the person and partition columns). The
    spender is made from ``accountant=``/``dataset=`` once (:func:`~dp_pipeline._spending.as_spender`);
    the relation the noise is calibrated to is read from it once, before any data.
    """

    def __init__(self, owner: str, df: Any, options: Options, *, keys_name: str = "keys") -> None:
        self.engine: Engine = engine_of(df)
        self.spender: Spender = as_spender(options.accountant, options.dataset)
        self.partition = partition_names(options.partition)
        if options.mechanism not in NOISES:
            raise InvalidParameterError(
                f"'mechanism' must be 'laplace' or 'gaussian', got {options.mechanism!r}", "mechanism"
            )
        self.noise: NoiseFamily = "gaussian" if options.mechanism == "gaussian" else "laplace"
        self.epsilon = check_epsilon(options.epsilon)
        self.delta = options.delta
        check_delta(self.noise, self.delta)
        self.level = check_level(options.level)
        self.by: list[Hashable] | None = None
        self.index: pd.Index | None = None
        if options.by is not None:
            self.by, self.index = group_index(self.engine, options.by, options.keys, keys_name)
        elif options.keys is not None:
            raise InvalidParameterError(f"{keys_name!r} needs 'by' (the columns to group by)", keys_name)
        self.m = check_limit(options.max_contributions, options.privacy_unit)
        self.unit: Hashable | None = None
        if options.privacy_unit is not None:
            (self.unit,) = column_list(self.engine, options.privacy_unit, "privacy_unit")
            self.engine.check_unit(self.unit)
        self.relation = self.spender.relation()
        self.group_size = check_positive_int(options.group_size, "group_size")
        self.rng = release_rng(options.random_state, owner)
        partitions = self._partitions(options.partition_column)
        self.bounding = Bounding(self.unit, self.m, self.by, self.index, self.rng, partitions)

    def _partitions(self, partition_column: Any) -> PartitionBounding | None:
        """With ``partition_column``: the rows of the partitions named, each person in at most L of them
        (L of the dataset charged, which must be partitioned)."""
        if partition_column is None:
            return None
        (column,) = column_list(self.engine, partition_column, "partition_column")
        limit = self.spender.partitions_limit()
        if limit is None:
            raise InvalidParameterError(
                "'partition_column' keeps each person in the L partitions that the dataset charged declares "
                "(set_budget(..., relation='add_remove', partitions=L)); this release is charged to no "
                "partitioned dataset",
                "partition_column",
            )
        self.engine.check_partition(column)
        return PartitionBounding(column, self.partition, limit)

    def value_column(
        self, column: Any, lower: Any, upper: Any, searched: tuple[float, float] | None = None
    ) -> tuple[Hashable, float, float]:
        """The numeric column released and its declared bounds (``searched``: the outer range of a bound
        search instead)."""
        (name,) = column_list(self.engine, column, "column")
        if searched is None:
            lows, highs = declared_bounds(lower, upper, [str(name)], required=True)
            low, high = float(lows[0]), float(highs[0])
        else:
            low, high = searched
        self.engine.check_numeric(name, "column")
        return name, low, high

    def sums(
        self,
        column: Hashable | None,
        clip: tuple[float, float],
        centre: float,
        powers: Sequence[int],
        plan: NoisePlan,
        ranges: Sequence[tuple[float, float]],
    ) -> ExactSums:
        """The exact bounded sums of the powers, one per part of ``plan`` (whose value range is the
        matching entry of ``ranges``), on the grid of each part (see :mod:`dp_pipeline.frames._exact_sums`
        and :meth:`~dp_pipeline.frames._engine.Engine.sums`)."""
        exponents = [grid_exponent(lo, hi, part) for (lo, hi), part in zip(ranges, plan.parts, strict=True)]
        totals = self.engine.sums(self.bounding, column, clip, centre, powers, exponents)
        return ExactSums(totals, exponents)

    def grid_ranks(
        self, column: Hashable, clip: tuple[float, float], grid: NDArray[np.float64], whole: bool = False
    ) -> NDArray[np.int64]:
        """#{kept values < cₖ} per key (``whole``: of the whole column, ungrouped)."""
        bounding = self.bounding
        if whole and bounding.by is not None:
            bounding = dataclasses.replace(bounding, by=None, keys=None)
        return self.engine.grid_ranks(bounding, column, clip, grid)

    def plan(self, ranges: list[tuple[float, float]], epsilon: float | None = None) -> NoisePlan:
        """The noise of one part per value range [l, u] (see :func:`sensitivity`), for ``epsilon`` (the
        release's own by default)."""
        norm = 1 if self.noise == "gaussian" else 0  # L2 for Gaussian noise, L1 for Laplace

        def under(relation: str) -> list[float]:
            return [sensitivity(relation, self.by is not None, self.m, lo, hi)[norm] for lo, hi in ranges]

        return plan_noise(
            self.noise,
            under(self.relation),
            epsilon=self.epsilon if epsilon is None else epsilon,
            delta=self.delta,
            relation=self.relation,
            replace_one=under("replace_one") if self.relation == "add_remove" else None,
        )

    def holding(self, event: PrivacyEvent, label: str) -> AbstractContextManager[None]:
        """The block that reads this release's data, paid by its spender
        (:meth:`~dp_pipeline.accounting._spender.Spender.hold`, on the partitions it names), its event marked
        as drawn by this release's generator (:func:`~dp_pipeline.mechanisms.sampling.drawn_event`)."""
        marked = drawn_event(event, self.rng)
        return self.spender.hold(marked, label=label, group_size=self.group_size, partition=self.partition)

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


def sensitivity(relation: str, grouped: bool, m: int, low: float, high: float) -> tuple[float, float]:
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
