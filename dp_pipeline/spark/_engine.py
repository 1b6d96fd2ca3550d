"""The Spark engine of the frame functions: the exact bounded aggregate computed by Spark, distributed.

One aggregate is one Spark job: the columns it needs, a window over the person column that marks at most m
rows per person (:func:`~dp_pipeline.spark._bounding.with_kept`), a broadcast left join on the table of
declared keys (:func:`~dp_pipeline.spark._keys.key_table`), and a ``groupBy`` on the key's position with
conditional sums over the kept rows of declared keys. The same job counts, over all rows, the values the
frame functions refuse (missing person, NaN/±inf/missing values), so that the checks cost no extra pass;
the driver raises the pandas functions' errors from those counts before it adds any noise. Only one row per
declared key (one per key and grid bucket for quantiles) reaches the driver.

The per-row releases run in ``mapInPandas``: each Python worker creates its own secure generator from OS
entropy inside the function and draws the noise of its rows there. The result is checkpointed at once
(``localCheckpoint(eager=True)``): every later action on it reads the same noisy rows, where a lazy frame
would redraw fresh noise at every action and so release the data again for one charge.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import types as st

from dp_pipeline.exceptions import InvalidParameterError, data_value_error
from dp_pipeline.frames._common import (
    NO_MATCH,
    check_distinct_keys,
    no_answer,
    no_partition,
    no_person,
    not_a_number,
    not_finite,
    not_yes_no,
    observed_index,
    require_pandas,
)
from dp_pipeline.frames._engine import HALF, Bounding, join_sum, noisy_batch, one_on_grid, randomized_batch
from dp_pipeline.frames._registry import register_engine
from dp_pipeline.mechanisms import ContinuousMechanism, KRandomizedResponse, Mechanism, sampling
from dp_pipeline.spark._api import functions_of
from dp_pipeline.spark._bounding import KEEP, with_kept
from dp_pipeline.spark._grid import bucket
from dp_pipeline.spark._keys import KEY, key_table, matches_any, spark_value

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["SparkEngine"]

_SEED_RANGE = 2**62
_WIDE = st.DecimalType(38, 0)
_BUCKET = "__dp_bucket"


@dataclass(frozen=True)
class _Check:
    """Rows a frame function refuses: ``bad`` is true for such a row; ``error(count)`` is the refusal."""

    bad: Column
    error: Callable[[int], InvalidParameterError]


def _fixed(error: InvalidParameterError) -> Callable[[int], InvalidParameterError]:
    return lambda _count: error


class SparkEngine:
    """A Spark DataFrame as a frame-function engine (see :class:`~dp_pipeline.frames._engine.Engine`)."""

    def __init__(self, sdf: DataFrame) -> None:
        self.sdf = sdf
        self._sf = functions_of(sdf)  # classic or Spark Connect, as the DataFrame is
        self._checks: list[_Check] = []
        self._seed: tuple[Bounding, int] | None = None

    @classmethod
    def accepts(cls, df: Any) -> bool:
        """Whether ``df`` is a Spark DataFrame (classic or Spark Connect)."""
        return isinstance(df, DataFrame)

    @classmethod
    def of(cls, df: Any) -> SparkEngine:
        if not isinstance(df, DataFrame):
            raise InvalidParameterError(
                f"'df' must be a pandas or Spark DataFrame, got {type(df).__name__}", "df"
            )
        return cls(df)

    @property
    def columns(self) -> Sequence[Hashable]:
        return list(self.sdf.columns)

    def _type(self, column: Hashable) -> Any:
        return self.sdf.schema[str(column)].dataType

    # ---------------------------------------------------------------------------------------- checks

    def check_numeric(self, column: Hashable, name: str) -> None:
        data_type = self._type(column)
        if not isinstance(data_type, st.NumericType):
            raise not_a_number(name, column, data_type.simpleString(), isinstance(data_type, st.BooleanType))
        value = self._sf.col(str(column))
        bad = value.isNull()
        if isinstance(data_type, st.FloatType | st.DoubleType):
            bad = bad | self._sf.isnan(value) | (self._sf.abs(value) == self._sf.lit(float("inf")))
        self._checks.append(_Check(bad, _fixed(not_finite(name, column))))

    def check_unit(self, unit: Hashable) -> None:
        self._checks.append(_Check(self._sf.col(str(unit)).isNull(), _fixed(no_person(unit))))

    def check_partition(self, column: Hashable) -> None:
        self._checks.append(_Check(self._sf.col(str(column)).isNull(), _fixed(no_partition(column))))

    def check_yes_no(self, column: Hashable) -> None:
        data_type = self._type(column)
        if not isinstance(data_type, st.NumericType | st.BooleanType):
            raise not_yes_no(column, data_type.simpleString())

    def check_answers(self, column: Hashable, mechanism: Mechanism) -> None:
        value, data_type = self._sf.col(str(column)), self._type(column)
        self._checks.append(_Check(value.isNull(), _fixed(no_answer(column))))
        if isinstance(mechanism, KRandomizedResponse):
            allowed, problem = list(mechanism.categories), f"not among the {mechanism.k} declared categories"
            hint = ""
        else:
            allowed, problem = [0, 1], "not True/False or 0/1"
            hint = "declare 'categories' for k-ary randomized response"
        unknown = value.isNotNull() & ~matches_any(value, data_type, allowed)
        where = f"'column': column {column!r}"
        self._checks.append(
            _Check(unknown, lambda count: data_value_error(where, count, problem, "column", hint))
        )

    def holds_no_rows(self) -> bool:
        return False  # known only after a job: an empty Spark frame is charged and released empty

    def validate(self) -> None:
        if self._checks:
            (row,) = self.sdf.agg(*_check_counts(self._checks, self._sf.lit(True))).collect()
            self._raise(list(row))

    def _raise(self, counts: Sequence[Any]) -> None:
        """The first refusal whose rows were counted (in the order the checks were made)."""
        for check, count in zip(self._checks, counts, strict=True):
            if count:
                raise check.error(int(count))

    # --------------------------------------------------------------------------------------- reading

    def observed_keys(self, by: list[Hashable]) -> pd.Index:
        pandas = require_pandas()
        rows = self.sdf.select(*[str(c) for c in by]).distinct().collect()
        return observed_index(pandas.DataFrame([tuple(r) for r in rows], columns=by))

    def distinct_values(self, column: Hashable) -> NDArray[Any]:
        rows = self.sdf.select(str(column)).distinct().collect()
        return np.array([r[0] for r in rows], dtype=object)

    def check_keys(self, by: list[Hashable], keys: pd.Index, name: str) -> None:
        """Also refuses a declared key value that no value of its column's Spark type equals: the result
        table holds the keys in the columns' types (:meth:`result`), so such a key could be released by
        pandas (with a zero statistic) but not stored in a Spark result, a failure known before the data is
        read and so refused before the charge. The error counts the values, never quotes one."""
        types = [self._type(c) for c in by]
        converts = [functools.partial(spark_value, data_type=t) for t in types]
        for level, (column, convert) in enumerate(zip(by, converts, strict=True)):
            values = keys.get_level_values(level) if len(by) > 1 else keys
            foreign = sum(convert(v) is NO_MATCH for v in values)
            if foreign:
                raise InvalidParameterError(
                    f"{name!r}: {foreign} declared value(s) for column {column!r} cannot be a value of its "
                    f"Spark type {types[level].simpleString()}; a Spark result holds the keys in the "
                    "column's type: declare keys of that type",
                    name,
                )
        check_distinct_keys(by, keys, converts, name)

    def _seed_of(self, bounding: Bounding) -> int:
        """The priority seed of a bounding: one per call, so that two jobs of a call keep the same rows."""
        if self._seed is None or self._seed[0] is not bounding:
            self._seed = (bounding, sampling.uniform_index(bounding.rng, _SEED_RANGE))
        return self._seed[1]

    def _kept(self, bounding: Bounding, column: Hashable | None) -> tuple[DataFrame, Column]:
        """The needed columns with KEEP and KEY, and the condition of the rows that enter the release."""
        read = bounding.partitions
        partition = None if read is None else read.column
        needed = [c for c in (bounding.unit, *(bounding.by or []), column, partition) if c is not None]
        frame = with_kept(
            self.sdf.select(*dict.fromkeys(str(c) for c in needed)),
            bounding.unit,
            bounding.limit,
            self._seed_of(bounding),
            read,
        )
        if bounding.by is None:
            return frame, self._sf.col(KEEP)
        assert bounding.keys is not None
        keys = key_table(self.sdf.sparkSession, self.sdf.schema, bounding.by, list(bounding.keys))
        on = functools.reduce(
            lambda a, b: a & b, [frame[str(c)].eqNullSafe(keys[str(c)]) for c in bounding.by]
        )
        joined = frame.join(self._sf.broadcast(keys), on, "left").select(frame["*"], keys[KEY])
        return joined, self._sf.col(KEEP) & self._sf.col(KEY).isNotNull()

    def sums(
        self,
        bounding: Bounding,
        column: Hashable | None,
        clip: tuple[float, float],
        centre: float,
        powers: Sequence[int],
        exponents: Sequence[int],
    ) -> list[list[int]]:
        """The exact sums (see :meth:`~dp_pipeline.frames._engine.Engine.sums`): each row's grid integer q is
        a long (|q| < 2⁵³), split in halves q = hi·2²⁶ + lo whose long sums (``try_sum``: null on
        overflow, never a wrapped value) are exact below 2³⁶ rows per key. When one overflows, the job
        runs again with the halves summed as DecimalType(38, 0), exact below 10²² rows: the result is the
        same exact sum either way (beyond that, OverflowError)."""
        return self._sums(bounding, column, clip, centre, powers, exponents, wide=False)

    def _sums(
        self,
        bounding: Bounding,
        column: Hashable | None,
        clip: tuple[float, float],
        centre: float,
        powers: Sequence[int],
        exponents: Sequence[int],
        wide: bool,
    ) -> list[list[int]]:
        frame, kept = self._kept(bounding, column)
        parts = [self._sf.count(self._sf.when(kept, 1))]  # the kept rows: the count, and the overflow check
        for p, j in zip(powers, exponents, strict=True):
            if p > 0:
                assert column is not None
                y = _clipped(self._sf.col(str(column)), clip) - self._sf.lit(centre)
                q = self._sf.when(kept, _grid_integer(functools.reduce(lambda a, b: a * b, [y] * p), j))
                add = _wide_sum if wide else self._sf.try_sum
                parts += [add(self._sf.shiftright(q, HALF)), add(q.bitwiseAND(self._sf.lit((1 << HALF) - 1)))]
        counts = _check_counts(self._checks, self._sf.lit(True))
        rows = _aggregate(frame, bounding, [*parts, *counts])
        self._raise([sum(int(r[len(parts) + i] or 0) for r in rows) for i in range(len(counts))])
        out = [[0] * bounding.n_keys for _ in powers]
        for row in rows:
            if row[KEY] is None or not row[0]:
                continue
            if any(total is None for total in row[1 : len(parts)]):
                if wide:
                    raise OverflowError("an exact sum exceeded DecimalType(38, 0)")
                return self._sums(bounding, column, clip, centre, powers, exponents, wide=True)
            halves = iter(row[1 : len(parts)])
            for i, (p, j) in enumerate(zip(powers, exponents, strict=True)):
                total = int(row[0]) * one_on_grid(j) if p == 0 else join_sum(next(halves), next(halves))
                out[i][int(row[KEY])] = total
        return out

    def grid_ranks(
        self, bounding: Bounding, column: Hashable, clip: tuple[float, float], grid: NDArray[np.float64]
    ) -> NDArray[np.int64]:
        frame, kept = self._kept(bounding, column)
        cell = bucket(_clipped(self._sf.col(str(column)), clip), float(grid[0]), clip[1], grid.size)
        frame = frame.withColumn(_BUCKET, self._sf.when(kept, cell))
        counts = _check_counts(self._checks, self._sf.lit(True))
        rows = _aggregate(frame, bounding, [self._sf.count(self._sf.lit(1)), *counts], _BUCKET)
        self._raise([sum(int(r[1 + i] or 0) for r in rows) for i in range(len(counts))])
        histogram = np.zeros((bounding.n_keys, grid.size + 1), dtype=np.int64)
        for row in rows:
            if row[KEY] is not None and row[_BUCKET] is not None:
                histogram[int(row[KEY]), int(row[_BUCKET])] += int(row[0])
        # #{x < cₖ} = #{b(x) ≤ k} for k = 0 … K, then n
        ranks = np.cumsum(histogram, axis=1)
        return np.concatenate([ranks[:, : grid.size], ranks[:, -1:]], axis=1)

    def result(self, table: pd.Series | pd.DataFrame) -> DataFrame:
        """The result table as a small Spark DataFrame, so that ``sdf.transform(dp_mean, ...)`` works
        (Spark's ``transform`` must return a Spark DataFrame): the key columns (and ``quantile``), then the
        pandas result's columns, one row per key; ``.attrs`` holds the pandas result's attrs and
        ``.toPandas()`` brings the table back to the driver."""
        pandas = require_pandas()
        if isinstance(table, pandas.Series):
            frame, keys = table.to_frame().T, set()
        else:  # the index levels that are columns of the data (not a quantile level) hold keys
            frame, keys = table.reset_index(), {str(c) for c in table.index.names} & set(self.sdf.columns)
        # the key columns in the data's types (each key a value of it: check_keys), the rest doubles: an
        # explicit schema, so that building the table cannot fail after the charge on either Spark API
        fields = [
            st.StructField(str(c), self._type(c) if str(c) in keys else st.DoubleType(), True)
            for c in frame.columns
        ]
        convert = [
            functools.partial(spark_value, data_type=f.dataType) if f.name in keys else _double
            for f in fields
        ]
        rows = [tuple(f(v) for f, v in zip(convert, row, strict=True)) for row in frame.itertuples(False)]
        out = self.sdf.sparkSession.createDataFrame(rows, st.StructType(fields))
        return _with_attrs(out, table.attrs)

    def attrs(self) -> dict[str, Any]:
        """The ``attrs`` a frame function set on this Spark DataFrame (read from the object itself: on a
        Spark Connect DataFrame, ``sdf.attrs`` would name a column when none was set)."""
        return dict(vars(self.sdf).get("attrs", {}))

    # ------------------------------------------------------------------------------ per-row releases

    def with_noise(
        self,
        columns: list[Hashable],
        lower: NDArray[np.float64],
        upper: NDArray[np.float64],
        mechanisms: Sequence[ContinuousMechanism],
        rng: np.random.Generator | None,
    ) -> _DistributedRows:
        names = {str(c) for c in columns}
        fields = self.sdf.schema.fields
        schema = st.StructType(
            [st.StructField(f.name, st.DoubleType(), f.nullable) if f.name in names else f for f in fields]
        )
        transform = functools.partial(
            noisy_batch, columns=columns, lower=lower, upper=upper, mechanisms=mechanisms
        )
        return self._per_row(transform, schema, rng)

    def randomized(
        self, column: Hashable, mechanism: Mechanism, rng: np.random.Generator | None
    ) -> _DistributedRows:
        transform = functools.partial(randomized_batch, column=column, mechanism=mechanism)
        return self._per_row(transform, self.sdf.schema, rng)

    def _per_row(
        self, transform: Callable[..., pd.DataFrame], schema: Any, rng: np.random.Generator | None
    ) -> _DistributedRows:
        """The plan that randomises the rows in ``mapInPandas``, analysed now (no job runs): the schema
        is resolved and, on Spark Connect, the pickled function sent, so that neither fails after the
        charge."""
        key = None if rng is None else sampling.uniform_index(rng, _SEED_RANGE)
        run = functools.partial(_in_partition, transform=transform, key=key)
        mapped = self.sdf.mapInPandas(run, schema)
        mapped.schema  # noqa: B018 - the analysis (a Spark Connect DataFrame is analysed only when asked)
        return _DistributedRows(mapped)


@dataclass(frozen=True)
class _DistributedRows:
    """A per-row release of a Spark frame (see :class:`~dp_pipeline.frames._engine.RowRelease`): the
    analysed ``mapInPandas`` plan. :meth:`run` checkpoints it at once (``localCheckpoint(eager=True)``):
    every later action reads the same noisy rows, where a lazy frame would draw fresh noise at every action
    and so release the data again for one charge."""

    mapped: DataFrame

    def run(self, attrs: Mapping[str, Any]) -> DataFrame:
        return _with_attrs(self.mapped.localCheckpoint(eager=True), attrs)


def _double(value: Any) -> float | None:
    return None if value is None else float(value)


def _with_attrs(frame: DataFrame, attrs: Mapping[str, Any]) -> DataFrame:
    """``frame`` carrying ``attrs`` as its Python attribute ``attrs`` (as a pandas frame carries its own)."""
    frame.attrs = dict(attrs)  # type: ignore[attr-defined]
    return frame


def _in_partition(
    batches: Iterator[pd.DataFrame], transform: Callable[..., pd.DataFrame], key: int | None
) -> Iterator[pd.DataFrame]:
    """Runs in a Python worker: one generator per partition, from OS entropy (or, for a seeded release, from
    the release's key and the partition), drawing the noise of every batch of the partition."""
    if key is None:
        rng = sampling.secure_rng()
    else:
        context = TaskContext.get()
        partition = 0 if context is None else context.partitionId()
        rng = sampling.secure_rng((key << 32) | partition)
    for batch in batches:
        yield transform(batch, rng=rng)


def _wide_sum(value: Column) -> Column:
    return functions_of(value).sum(value.cast(_WIDE))


def _grid_integer(value: Column, exponent: int) -> Column:
    """trunc(v / 2^j) as a long: v times 2^−j in exact power-of-two steps (each a normal double), then the
    cast, which truncates toward zero (as :func:`~dp_pipeline.frames._exact_sums.grid_integers`)."""
    sf = functions_of(value)
    shift = -exponent
    while shift:
        step = max(min(shift, 1000), -1000)
        value = value * sf.lit(math.ldexp(1.0, step))
        shift -= step
    return value.cast("long")


def _clipped(value: Column, clip: tuple[float, float]) -> Column:
    sf = functions_of(value)
    return sf.least(sf.greatest(value.cast("double"), sf.lit(clip[0])), sf.lit(clip[1]))


def _check_counts(checks: Sequence[_Check], rows: Column) -> list[Column]:
    sf = functions_of(rows)
    return [sf.sum(sf.when(rows & check.bad, 1).otherwise(0)) for check in checks]


def _aggregate(frame: DataFrame, bounding: Bounding, columns: list[Column], *extra: str) -> list[Any]:
    """The aggregates per declared key (and the ``extra`` columns), collected; one row without groups."""
    named = [c.alias(f"__dp_{i}") for i, c in enumerate(columns)]
    if bounding.by is None:
        frame = frame.withColumn(KEY, functions_of(frame).lit(0))
    grouped = frame.groupBy(KEY, *extra).agg(*named)
    return grouped.select(*[f"__dp_{i}" for i in range(len(named))], KEY, *extra).collect()


register_engine(SparkEngine)  # found without the installed entry point (see frames._registry)
