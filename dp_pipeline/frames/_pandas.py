"""The pandas engine of the frame functions: the data is in memory, so every check is made at once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dp_pipeline.exceptions import InvalidParameterError, data_value_error
from dp_pipeline.frames._common import (
    bound_contributions,
    bound_partitions,
    check_distinct_keys,
    check_frame,
    no_answer,
    no_partition,
    no_person,
    not_yes_no,
    numeric_values,
    observed_index,
    pandas_value,
    require_pandas,
)
from dp_pipeline.frames._engine import Bounding, noisy_batch, randomized_batch
from dp_pipeline.frames._exact_sums import (
    SPLIT_ROWS,
    exact_total,
    grid_integers,
    join_sum,
    one_on_grid,
    split_sum,
)
from dp_pipeline.mechanisms import ContinuousMechanism, KRandomizedResponse, Mechanism, sampling

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PandasEngine"]


class PandasEngine:
    """A pandas DataFrame as a frame-function engine (see :class:`~dp_pipeline.frames._engine.Engine`)."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.df = df
        self._kept: tuple[Bounding, pd.DataFrame] | None = None

    @classmethod
    def accepts(cls, df: Any) -> bool:
        """Whether ``df`` is a pandas DataFrame."""
        return isinstance(df, require_pandas().DataFrame)

    @classmethod
    def of(cls, df: Any) -> PandasEngine:
        return cls(check_frame(df))

    @property
    def columns(self) -> Sequence[Hashable]:
        return list(self.df.columns)

    def check_numeric(self, column: Hashable, name: str) -> None:
        numeric_values(self.df, column, name)

    def check_unit(self, unit: Hashable) -> None:
        if self.df[unit].isna().any():
            raise no_person(unit)

    def check_partition(self, column: Hashable) -> None:
        if self.df[column].isna().any():
            raise no_partition(column)

    def check_yes_no(self, column: Hashable) -> None:
        if self.df[column].isna().any():
            raise no_answer(column)
        dtype = self.df[column].dtype
        if getattr(dtype, "kind", "O") not in "biuf":
            raise not_yes_no(column, dtype)

    def check_answers(self, column: Hashable, mechanism: Mechanism) -> None:
        values = self.df[column]
        if values.isna().any():
            raise no_answer(column)
        check_answer_values(column, values.to_numpy(), mechanism)

    def validate(self) -> None:
        """Nothing is left to check: the ``check_*`` methods read the values."""

    def holds_no_rows(self) -> bool:
        return len(self.df) == 0

    def observed_keys(self, by: list[Hashable]) -> pd.Index:
        return observed_index(self.df[by])

    def distinct_values(self, column: Hashable) -> NDArray[Any]:
        return np.asarray(self.df[column].to_numpy())

    def check_keys(self, by: list[Hashable], keys: pd.Index, name: str) -> None:
        check_distinct_keys(by, keys, [pandas_value(self.df[c].dtype) for c in by], name)

    def _rows(self, bounding: Bounding) -> pd.DataFrame:
        """The kept rows; one sample per bounding (a call that reads the column twice sees the same rows)."""
        if self._kept is None or self._kept[0] is not bounding:
            rows, read, unit, rng = self.df, bounding.partitions, bounding.unit, bounding.rng
            if read is not None:
                rows = bound_partitions(rows, unit, read.column, read.names, read.limit, rng)
            self._kept = (bounding, bound_contributions(rows, unit, bounding.limit, rng))
        return self._kept[1]

    def _by_key(self, bounding: Bounding, rows: pd.DataFrame, values: pd.DataFrame) -> pd.DataFrame:
        """``values`` (aligned with ``rows``) summed per declared key, in the keys' order, zero-filled."""
        assert bounding.by is not None and bounding.keys is not None
        try:
            grouped = values.groupby([rows[c] for c in bounding.by], observed=True, dropna=False).sum()
        except TypeError:  # unhashable keys; refused outside the handler, whose message may quote one
            grouped = None
        if grouped is None:
            raise InvalidParameterError(
                f"column(s) {bounding.by} hold unhashable values (e.g. lists); only hashable keys can be "
                "grouped",
                "by",
            )
        if len(bounding.by) == 1 and grouped.index.nlevels > 1:
            grouped.index = grouped.index.get_level_values(0)
        return grouped.reindex(bounding.keys, fill_value=0)

    def sums(
        self,
        bounding: Bounding,
        column: Hashable | None,
        clip: tuple[float, float],
        centre: float,
        powers: Sequence[int],
        exponents: Sequence[int],
    ) -> list[list[int]]:
        rows = self._rows(bounding)
        base = None if column is None else np.clip(rows[column].to_numpy(dtype=np.float64), *clip) - centre
        integers = {}
        for i, (p, j) in enumerate(zip(powers, exponents, strict=True)):
            if p > 0:
                assert base is not None
                values = base if p == 1 else functools.reduce(np.multiply, [base] * p)
                integers[i] = grid_integers(values, j)
        if bounding.by is None:
            count, totals = [len(rows)], {i: [exact_total(q)] for i, q in integers.items()}
        else:
            count, totals = self._totals_by_key(bounding, rows, integers)
        return [
            [n * one_on_grid(j) for n in count] if p == 0 else totals[i]
            for i, (p, j) in enumerate(zip(powers, exponents, strict=True))
        ]

    def _totals_by_key(
        self, bounding: Bounding, rows: pd.DataFrame, integers: dict[int, NDArray[np.int64]]
    ) -> tuple[list[int], dict[int, list[int]]]:
        """The row count and the exact Σq of each part per declared key: int64 sums of the halves of q
        (:func:`~dp_pipeline.frames._exact_sums.split_sum`) over slices of at most ``SPLIT_ROWS`` rows,
        added as Python integers."""
        pandas = require_pandas()
        count = [0] * bounding.n_keys
        totals = {i: [0] * bounding.n_keys for i in integers}
        for start in range(0, max(len(rows), 1), SPLIT_ROWS):
            piece = slice(start, start + SPLIT_ROWS)
            parts: dict[str, NDArray[np.int64]] = {"n": np.ones(len(rows.index[piece]), dtype=np.int64)}
            for i, q in integers.items():
                parts[f"hi{i}"], parts[f"lo{i}"] = split_sum(q[piece])
            table = pandas.DataFrame(parts, index=rows.index[piece])
            sums = self._by_key(bounding, rows.iloc[piece], table)
            count = [a + int(b) for a, b in zip(count, sums["n"].tolist(), strict=True)]
            for i, total in totals.items():
                pairs = zip(total, sums[f"hi{i}"].tolist(), sums[f"lo{i}"].tolist(), strict=True)
                totals[i] = [a + join_sum(hi, lo) for a, hi, lo in pairs]
        return count, totals

    def grid_ranks(
        self, bounding: Bounding, column: Hashable, clip: tuple[float, float], grid: NDArray[np.float64]
    ) -> NDArray[np.int64]:
        pandas = require_pandas()
        rows = self._rows(bounding)
        values = np.clip(rows[column].to_numpy(dtype=np.float64), *clip)
        if bounding.by is None:
            groups = [values]
        else:
            positions = (
                pandas.Series(values, index=rows.index)
                .groupby([rows[c] for c in bounding.by], observed=True, dropna=False)
                .indices
            )
            assert bounding.keys is not None
            empty = np.array([], dtype=np.intp)
            groups = [values[positions.get(key, empty)] for key in bounding.keys]
        # i(c) = #{x < c}: the sorted values searched at every grid point, then at +inf (n)
        points = np.append(grid, np.inf)
        return np.array([np.searchsorted(np.sort(v), points, side="left") for v in groups], dtype=np.int64)

    def result(self, table: pd.Series | pd.DataFrame) -> pd.Series | pd.DataFrame:
        return table

    def attrs(self) -> dict[str, Any]:
        return dict(self.df.attrs)

    def with_noise(
        self,
        columns: list[Hashable],
        lower: NDArray[np.float64],
        upper: NDArray[np.float64],
        mechanisms: Sequence[ContinuousMechanism],
        rng: np.random.Generator | None,
    ) -> _InMemoryRows:
        transform = functools.partial(
            noisy_batch, self.df, columns=columns, lower=lower, upper=upper, mechanisms=mechanisms
        )
        return _InMemoryRows(transform, rng)

    def randomized(
        self, column: Hashable, mechanism: Mechanism, rng: np.random.Generator | None
    ) -> _InMemoryRows:
        transform = functools.partial(randomized_batch, self.df, column=column, mechanism=mechanism)
        return _InMemoryRows(transform, rng)


@dataclass(frozen=True)
class _InMemoryRows:
    """A per-row release of a pandas frame (see :class:`~dp_pipeline.frames._engine.RowRelease`): the
    transform of the whole frame, run with ``rng`` (None: a generator from OS entropy)."""

    transform: Callable[..., pd.DataFrame]
    rng: np.random.Generator | None

    def run(self, attrs: Mapping[str, Any]) -> pd.DataFrame:
        out = self.transform(rng=self.rng or sampling.secure_rng())
        out.attrs = dict(attrs)
        return out


def check_answer_values(column: Hashable, values: NDArray[Any], mechanism: Mechanism) -> None:
    """Every value is a declared category of a k-RR ``mechanism``, or 0/1 for binary randomized response."""
    if isinstance(mechanism, KRandomizedResponse):
        try:
            mechanism.tally(values)  # every value must be a declared category
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"'column': column {column!r}: {exc}", "column") from None
    elif not (answers := np.isin(values, (0, 1))).all():
        raise data_value_error(
            f"'column': column {column!r}",
            int(np.count_nonzero(~answers)),
            "not True/False or 0/1",
            "column",
            "declare 'categories' for k-ary randomized response",
        )
