"""What differs between dataframe engines: the exact bounded aggregate, and the rows of a per-row release.

Every frame function is written once, against :class:`Engine`: the arguments, the sensitivity, the noise
plan, the charge and the result table are the engine's no business (:mod:`dp_pipeline.frames._core`). An
engine only reads the data:

* checks that a column exists and holds numbers (from the schema; an engine may also check the values
  here, when that is cheap, or else while it computes);
* :meth:`Engine.sums`: Σ (clip(x) − c)ᵖ (on a grid, summed exactly) over the rows that enter the
  release (on a partitioned dataset those of the partitions read, each person in at most L of them; then
  at most m per person, a uniform random sample of that person's rows), per declared key, zero for a key
  no row has;
* :meth:`Engine.grid_ranks`: #{kept values < cₖ} at each point cₖ of a grid, per declared key;
* the per-row releases: noise on numeric columns, randomized response on a column.

:func:`~dp_pipeline.frames._registry.engine_of` asks each registered engine whether it accepts the
DataFrame: pandas (:mod:`dp_pipeline.frames._pandas`) is built in, Spark (:mod:`dp_pipeline.spark`)
registers through the entry-point group ``dp_pipeline.frame_engines``.

**Why not a dataframe-agnostic layer.** Narwhals (on the package registry) would run one implementation
on pandas, Polars and Spark, but its lazy API has no random number expression, so the uniform per-person
sample (random priorities, ranked within each person) would still be written per engine; and the Spark
path needs the schema checks, a broadcast join on the declared keys and the in-job validity counts in one
job, which Narwhals does not express. The protocol here keeps each engine's fastest form (see README).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.frames._exact_sums import HALF, join_sum, one_on_grid  # what engines sum with (re-exported)
from dp_pipeline.mechanisms import ContinuousMechanism, Mechanism

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "HALF",
    "Bounding",
    "Engine",
    "PartitionBounding",
    "RowRelease",
    "join_sum",
    "noisy_batch",
    "one_on_grid",
    "randomized_batch",
]


@dataclass(frozen=True)
class PartitionBounding:
    """The partitions a release reads on a partitioned dataset: the rows whose ``column`` (read as a string)
    is one of ``names`` (all rows when ``names`` is empty), each person's rows kept in at most ``limit`` of
    their partitions, a uniform random choice (before the rows are bounded)."""

    column: Hashable
    names: tuple[str, ...]
    limit: int


@dataclass(frozen=True)
class Bounding:
    """Which rows enter a release: at most ``limit`` per person of column ``unit`` (every row is a person
    when ``unit`` is None), the rows of the declared ``keys`` of the columns ``by`` (all rows when ``by``
    is None), and with ``partitions`` only those of the partitions read, each person in at most L of them;
    ``rng`` draws the samples."""

    unit: Hashable | None
    limit: int
    by: list[Hashable] | None
    keys: pd.Index | None
    rng: np.random.Generator
    partitions: PartitionBounding | None = None

    @property
    def n_keys(self) -> int:
        return 1 if self.keys is None else len(self.keys)


class RowRelease(Protocol):
    """A per-row release made ready before its charge (:meth:`Engine.with_noise`,
    :meth:`Engine.randomized`): what can fail without reading the data (the result's schema, the plan that
    randomises the rows) has been built and checked, so that what is left after the charge is reading the
    rows and randomising them."""

    def run(self, attrs: Mapping[str, Any]) -> Any:
        """The released DataFrame, its rows randomised now, carrying ``attrs`` (see :meth:`Engine.attrs`)."""


class Engine(Protocol):
    """The data side of a frame function (see the module notes).

    The ``check_*`` methods run before the release is charged. An engine whose data is in memory checks
    the values there; a distributed one checks the schema there and the values later, in the job that
    reads them (:meth:`validate`, or inside :meth:`sums` and :meth:`grid_ranks`), raising the same errors.
    """

    @property
    def columns(self) -> Sequence[Hashable]:
        """The DataFrame's column names."""

    def check_numeric(self, column: Hashable, name: str) -> None:
        """InvalidParameterError naming ``name`` unless ``column`` holds numbers (no bools), all finite."""

    def check_unit(self, unit: Hashable) -> None:
        """InvalidParameterError unless every row names its person."""

    def check_partition(self, column: Hashable) -> None:
        """InvalidParameterError unless every row names its partition."""

    def check_yes_no(self, column: Hashable) -> None:
        """InvalidParameterError unless ``column`` can hold yes/no answers (bools or numbers)."""

    def check_answers(self, column: Hashable, mechanism: Mechanism) -> None:
        """InvalidParameterError unless every value is an answer ``mechanism`` takes (no missing value)."""

    def validate(self) -> None:
        """Raise what a check left for later (a job that reads the data); nothing for in-memory data."""

    def holds_no_rows(self) -> bool:
        """Whether the frame is known without a job to have no rows (in memory); False when unknown."""

    def observed_keys(self, by: list[Hashable]) -> pd.Index:
        """The distinct keys of the columns ``by`` present in the data (``keys="data"``; not private)."""

    def distinct_values(self, column: Hashable) -> NDArray[Any]:
        """The column's distinct values (``categories="data"``; not private)."""

    def check_keys(self, by: list[Hashable], keys: pd.Index, name: str) -> None:
        """InvalidParameterError naming ``name`` when two declared ``keys`` of the columns ``by`` are one
        key once converted to the columns' types (see
        :func:`~dp_pipeline.frames._common.check_distinct_keys`)."""

    def sums(
        self,
        bounding: Bounding,
        column: Hashable | None,
        clip: tuple[float, float],
        centre: float,
        powers: Sequence[int],
        exponents: Sequence[int],
    ) -> list[list[int]]:
        """Σ trunc((clip(x) − centre)ᵖ / 2^j) over the kept rows, exactly, for each p of ``powers`` with its
        grid exponent j of ``exponents`` (p = 0: the row count times trunc(2^−j); then ``column`` may be
        None), per key: Python integers, [len(powers)][n_keys]. The power is the product of p floats
        (y·y for p = 2), each row's quotient is exact (:func:`~dp_pipeline.frames._exact_sums.grid_integers`)
        and so is the sum, whatever the number of rows and their order."""

    def grid_ranks(
        self, bounding: Bounding, column: Hashable, clip: tuple[float, float], grid: NDArray[np.float64]
    ) -> NDArray[np.int64]:
        """#{kept clip(x) < cₖ} for each grid point cₖ, then the number of kept values (the rank of +∞),
        per key: an array (n_keys, grid.size + 1)."""

    def result(self, table: pd.Series | pd.DataFrame) -> Any:
        """The release's result table (pandas, built by the core) as this engine returns it."""

    def attrs(self) -> dict[str, Any]:
        """The DataFrame's attributes: pandas' ``attrs``; on Spark those a frame function set on it."""

    def with_noise(
        self,
        columns: list[Hashable],
        lower: NDArray[np.float64],
        upper: NDArray[np.float64],
        mechanisms: Sequence[ContinuousMechanism],
        rng: np.random.Generator | None,
    ) -> RowRelease:
        """The release of a new DataFrame whose listed columns are clipped to [lowerⱼ, upperⱼ] and noised
        (see :func:`noisy_batch`), ready to run; ``rng`` None: a generator from OS entropy where the noise
        is drawn."""

    def randomized(
        self, column: Hashable, mechanism: Mechanism, rng: np.random.Generator | None
    ) -> RowRelease:
        """The release of a new DataFrame whose ``column`` holds the mechanism's reports, ready to run
        (``rng`` as for :meth:`with_noise`)."""


def noisy_batch(
    batch: pd.DataFrame,
    columns: Sequence[Hashable],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    mechanisms: Sequence[ContinuousMechanism],
    rng: np.random.Generator,
) -> pd.DataFrame:
    """``batch`` with column j clipped to [lowerⱼ, upperⱼ] (±inf: no bound) and noised by mechanism j, as
    floats: the per-row release of :func:`~dp_pipeline.frames.add_noise` on rows in memory (all of a
    pandas frame, or one batch of a Spark partition)."""
    out = batch.copy()
    for j, name in enumerate(columns):
        values = np.clip(batch[name].to_numpy(dtype=np.float64), lower[j], upper[j])
        out[name] = mechanisms[j].randomize(values, rng) if values.size else values
    return out


def randomized_batch(
    batch: pd.DataFrame, column: Hashable, mechanism: Mechanism, rng: np.random.Generator
) -> pd.DataFrame:
    """``batch`` with ``column`` replaced by the reports of ``mechanism`` (randomized response), as
    :func:`noisy_batch` is for noise."""
    out = batch.copy()
    if len(batch):
        out[column] = mechanism.randomize(batch[column].to_numpy(), rng)
    return out
