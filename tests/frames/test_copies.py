"""Copies of a configured pandas release never add the same noise, and seeds are labelled.

Each frame function is configured once (a ``functools.partial``, as a job or a pipeline step would hold it),
then releases two neighbouring DataFrames (one person's row changed or removed) through two copies: pickled,
deep-copied, run by joblib (loky) workers, a forkserver process pool, by a FeatureUnion with ``n_jobs=2``, by
a ColumnTransformer with ``n_jobs=2`` (row-level functions), or as the step of one saved pipeline loaded
twice. Shared noise would make the releases of the unchanged rows (or groups) identical; with fresh noise that
has probability below 0.53¹⁹⁹ < 10⁻⁵⁴ (binary RR at ε = 1/2; the other releases lower still).
"""

from __future__ import annotations

import copy
import functools
import multiprocessing
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import FunctionTransformer

from dp_pipeline import PrivacyLeakWarning
from dp_pipeline.frames import add_noise, dp_count, dp_histogram, dp_mean, dp_sum, randomized_response
from dp_pipeline.mechanisms import fast_rng, secure_rng

ROWS = 200
OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
Release = functools.partial[Any]


def _rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """200 people; the second frame changes person 0's value (7 → 9) and answer (1 → 0)."""
    df1 = pd.DataFrame({"a": 3.0, "b": 5.0, "c": np.full(ROWS, 7.0), "answer": np.ones(ROWS, dtype=int)})
    df2 = df1.copy()
    df2.loc[0, ["c", "answer"]] = [9.0, 0]
    return df1, df2


def _one_per_group() -> tuple[pd.DataFrame, pd.DataFrame]:
    """200 groups of one person each; the second frame removes the person in group 0."""
    df1 = pd.DataFrame({"g": np.arange(ROWS)})
    return df1, df1.iloc[1:]


def _ten_per_group() -> tuple[pd.DataFrame, pd.DataFrame]:
    """20 groups of ten people each; the second frame removes one person of group 0."""
    df1 = pd.DataFrame({"g": np.repeat(np.arange(20), 10), "v": 5.0})
    return df1, df1.iloc[1:]


GROUPS = list(range(ROWS))
CASES: list[tuple[Release, Callable[[], tuple[pd.DataFrame, pd.DataFrame]]]] = [
    (
        functools.partial(add_noise, columns=["a", "b", "c"], epsilon=1.0, lower=0.0, upper=10.0, **OPT_OUT),
        _rows,
    ),
    (functools.partial(randomized_response, column="answer", epsilon=0.5, **OPT_OUT), _rows),
    (functools.partial(dp_count, epsilon=1.0, by="g", keys=GROUPS, **OPT_OUT), _one_per_group),
    (functools.partial(dp_histogram, column="g", categories=GROUPS, epsilon=1.0, **OPT_OUT), _one_per_group),
    (
        functools.partial(
            dp_sum, column="v", lower=0.0, upper=10.0, epsilon=1.0, by="g", keys=list(range(20)), **OPT_OUT
        ),
        _ten_per_group,
    ),
    (
        functools.partial(
            dp_mean, column="v", lower=0.0, upper=10.0, epsilon=1.0, by="g", keys=list(range(20)), **OPT_OUT
        ),
        _ten_per_group,
    ),
]
ROW_LEVEL = {add_noise, randomized_response}


def _pickled(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
    blob = pickle.dumps(release)
    return pickle.loads(blob)(df1), pickle.loads(blob)(df2)


def _deep_copied(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
    return copy.deepcopy(release)(df1), copy.deepcopy(release)(df2)


def _joblib(backend: str) -> Callable[[Release, pd.DataFrame, pd.DataFrame], tuple[Any, Any]]:
    def run(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
        out1, out2 = joblib.Parallel(n_jobs=2, backend=backend)(
            joblib.delayed(release)(df) for df in (df1, df2)
        )
        return out1, out2

    run.__name__ = f"joblib_{backend}"
    return run


def _process_pool(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
    # forkserver: workers forked from a clean server process cannot deadlock on this process's threads
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        out1, out2 = pool.map(release, (df1, df2))
    return out1, out2


def _feature_union(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
    union = FeatureUnion([("a", FunctionTransformer(release)), ("b", FunctionTransformer(release))], n_jobs=2)
    union.fit(df1)
    return union.transform(df1), union.transform(df2)


def _pipeline_loaded_twice(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
    saved = pickle.dumps(Pipeline([("dp", FunctionTransformer(release))]).fit(df1))
    return pickle.loads(saved).transform(df1), pickle.loads(saved).transform(df2)


def _column_transformer(release: Release, df1: pd.DataFrame, df2: pd.DataFrame) -> tuple[Any, Any]:
    columns = list(df1.columns)
    steps = [("a", FunctionTransformer(release), columns), ("b", FunctionTransformer(release), columns)]
    ct = ColumnTransformer(steps, n_jobs=2).fit(df1)
    return ct.transform(df1), ct.transform(df2)


_LOKY = _joblib("loky")
COPIES = [
    _pickled,
    _deep_copied,
    _LOKY,
    _process_pool,
    _feature_union,
    _pipeline_loaded_twice,
    _column_transformer,
]
# the copies made in worker processes (loky workers, a process pool, joblib workers of n_jobs=2)
IN_WORKER_PROCESSES = {_LOKY, _process_pool, _feature_union, _column_transformer}


def _unchanged_identical(out1: Any, out2: Any) -> bool:
    """Whether the releases of the rows (groups) the two frames share, all but the first, are identical."""
    return bool(np.array_equal(np.asarray(out1)[1:], np.asarray(out2)[1:]))


def _name(value: Any) -> str:
    return value.func.__name__ if isinstance(value, functools.partial) else ""


COMBINATIONS = [
    pytest.param(
        release,
        data,
        copies,
        id=f"{_name(release)}-{copies.__name__.strip('_')}",
        marks=pytest.mark.processes if copies in IN_WORKER_PROCESSES else (),
    )
    for release, data in CASES
    for copies in COPIES
    # a ColumnTransformer step must return one row per input row
    if copies is not _column_transformer or release.func in ROW_LEVEL
]


@pytest.mark.parametrize(("release", "data", "copies"), COMBINATIONS)
def test_copies_of_a_configured_release_draw_fresh_noise(
    release: functools.partial[Any], data: Callable[[], tuple[pd.DataFrame, pd.DataFrame]], copies: Any
) -> None:
    df1, df2 = data()
    out1, out2 = copies(release, df1, df2)
    assert np.shape(out1) == np.shape(out2)
    assert not _unchanged_identical(out1, out2)


@pytest.mark.parametrize(("release", "data"), CASES, ids=_name)
def test_copies_of_a_release_seeded_on_purpose_repeat_its_noise(
    release: functools.partial[Any], data: Callable[[], tuple[pd.DataFrame, pd.DataFrame]]
) -> None:
    # the labelled opt-in (no warning) travels with the copies; this also shows the check above can fail
    df1, df2 = data()
    out1, out2 = _pickled(functools.partial(release, random_state=secure_rng(3)), df1, df2)
    assert _unchanged_identical(out1, out2)


@pytest.mark.parametrize(("release", "data"), CASES, ids=_name)
def test_a_bare_seed_or_generator_warns_and_the_wrappers_do_not(
    release: functools.partial[Any], data: Callable[[], tuple[pd.DataFrame, pd.DataFrame]]
) -> None:
    df, _ = data()
    name = release.func.__name__
    with pytest.warns(PrivacyLeakWarning, match=rf"seeded noise: {name}\(random_state=7\)"):
        seeded = release(df, random_state=7)
    pd.testing.assert_frame_equal(pd.DataFrame(seeded), pd.DataFrame(release(df, random_state=secure_rng(7))))
    with pytest.warns(PrivacyLeakWarning, match=rf"{name}\(random_state=<a numpy Generator>\)"):
        release(df, random_state=np.random.default_rng(7))
    release(df, random_state=fast_rng(7))  # labelled: no warning (warnings are errors in this suite)
