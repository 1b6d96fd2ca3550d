"""Copies of a fitted transformer never add the same noise (unless it was seeded, with a warning).

Each test fits a transformer once, then releases two neighbouring datasets X1 and X2 (one person's value
changed) through two copies of it: pickled, deep-copied, sent to joblib (loky) workers or a process pool, run
by a ColumnTransformer or a FeatureUnion with ``n_jobs=2``, or one saved pipeline loaded twice. If the copies
shared their random state, the releases of the 199 unchanged rows would be identical (continuous noise: X2's
release minus X1's would be the true difference exactly; randomized response: the same reports, so the one
changed report shows who changed). With fresh noise per release, identical releases of 199 rows × 3 features
have probability below 0.52⁵⁹⁷ < 10⁻¹⁶⁹ (binary RR at ε/3 = 1/3 per feature; the other transformers are lower
still).
"""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import joblib
import numpy as np
import pytest
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import FeatureUnion, Pipeline

from dp_pipeline import PrivacyLeakWarning
from dp_pipeline.transformers import (
    BoundedLaplaceNoise,
    BoundedStaircaseNoise,
    GaussianNoise,
    KRandomizedResponseEncoder,
    LaplaceNoise,
    RandomizedResponseEncoder,
    StaircaseNoise,
)

ROWS = 200
OPT_OUT: dict[str, Any] = {"accountant": "unaccounted", "epsilon": 1.0}
CATEGORIES = list(range(10))


def _numeric() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x1 = np.tile(np.array([[3.0, 5.0, 7.0]]), (ROWS, 1))
    x2 = x1.copy()
    x2[0, 2] = 9.0  # one person's 7 changed to 9
    return x1, x2


def _binary() -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    x1 = np.tile(np.array([[0, 1, 1]]), (ROWS, 1))
    x2 = x1.copy()
    x2[0, 2] = 0
    return x1, x2


def _categorical() -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    x1 = np.tile(np.array([[3, 5, 7]]), (ROWS, 1))
    x2 = x1.copy()
    x2[0, 2] = 9
    return x1, x2


CASES: list[tuple[BaseEstimator, Callable[[], tuple[Any, Any]]]] = [
    (LaplaceNoise(lower=0.0, upper=10.0, **OPT_OUT), _numeric),
    (GaussianNoise(lower=0.0, upper=10.0, delta=1e-6, **OPT_OUT), _numeric),
    (StaircaseNoise(lower=0.0, upper=10.0, **OPT_OUT), _numeric),
    (BoundedLaplaceNoise(lower=0.0, upper=10.0, **OPT_OUT), _numeric),
    (BoundedStaircaseNoise(lower=0.0, upper=10.0, **OPT_OUT), _numeric),
    (RandomizedResponseEncoder(**OPT_OUT), _binary),
    (KRandomizedResponseEncoder(categories=[CATEGORIES] * 3, **OPT_OUT), _categorical),
]


def _fitted(estimator: BaseEstimator, x: Any) -> Any:
    return clone(estimator).fit(x)


def _pickled(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
    fitted = _fitted(estimator, x1)
    blob = pickle.dumps(fitted)
    return pickle.loads(blob).transform(x1), pickle.loads(blob).transform(x2)


def _deep_copied(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
    fitted = _fitted(estimator, x1)
    return copy.deepcopy(fitted).transform(x1), copy.deepcopy(fitted).transform(x2)


def _joblib(backend: str) -> Callable[[BaseEstimator, Any, Any], tuple[Any, Any]]:
    def release(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
        fitted = _fitted(estimator, x1)
        out1, out2 = joblib.Parallel(n_jobs=2, backend=backend)(
            joblib.delayed(fitted.transform)(x) for x in (x1, x2)
        )
        return out1, out2

    release.__name__ = f"joblib_{backend}"
    return release


def _process_pool(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
    # a forkserver pool: the workers are forked from a clean server process, so a process with threads (a
    # test run) cannot deadlock in them as it can in fork-started joblib "multiprocessing" workers
    fitted = _fitted(estimator, x1)
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        out1, out2 = pool.map(fitted.transform, (x1, x2))
    return out1, out2


def _column_transformer(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
    columns = [0, 1, 2]
    ct = ColumnTransformer([("a", clone(estimator), columns), ("b", clone(estimator), columns)], n_jobs=2)
    ct.fit(x1)
    return ct.transform(x1), ct.transform(x2)


def _feature_union(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
    union = FeatureUnion([("a", clone(estimator)), ("b", clone(estimator))], n_jobs=2).fit(x1)
    return union.transform(x1), union.transform(x2)


def _pipeline_loaded_twice(estimator: BaseEstimator, x1: Any, x2: Any) -> tuple[Any, Any]:
    saved = pickle.dumps(Pipeline([("dp", clone(estimator))]).fit(x1))
    first_job, second_job = pickle.loads(saved), pickle.loads(saved)
    return first_job.transform(x1), second_job.transform(x2)


COPIES = [
    _pickled,
    _deep_copied,
    pytest.param(_joblib("loky"), marks=pytest.mark.processes),
    pytest.param(_process_pool, marks=pytest.mark.processes),
    pytest.param(_column_transformer, marks=pytest.mark.processes),  # n_jobs=2: joblib worker processes
    pytest.param(_feature_union, marks=pytest.mark.processes),  # n_jobs=2: joblib worker processes
    _pipeline_loaded_twice,
]


def _unchanged_rows_identical(out1: Any, out2: Any) -> bool:
    """Whether the releases of the rows X1 and X2 share (all but the first) are identical."""
    return bool(np.array_equal(np.asarray(out1)[1:], np.asarray(out2)[1:]))


@pytest.mark.parametrize("release", COPIES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize(("estimator", "data"), CASES, ids=lambda c: type(c).__name__ if c else "")
def test_copies_of_a_fitted_transformer_draw_fresh_noise(
    estimator: BaseEstimator, data: Callable[[], tuple[Any, Any]], release: Any
) -> None:
    x1, x2 = data()
    out1, out2 = release(estimator, x1, x2)
    assert np.shape(out1) == np.shape(out2) and np.shape(out1)[0] == ROWS
    assert not _unchanged_rows_identical(out1, out2)


def test_a_fitted_transformer_keeps_no_random_state() -> None:
    x1, _ = _numeric()
    fitted = LaplaceNoise(lower=0.0, upper=10.0, **OPT_OUT).fit(x1)
    kept = [name for name, value in vars(fitted).items() if isinstance(value, np.random.Generator)]
    assert kept == []


@pytest.mark.parametrize(("estimator", "data"), CASES, ids=lambda c: type(c).__name__ if c else "")
def test_copies_of_a_seeded_transformer_repeat_its_noise(
    estimator: BaseEstimator, data: Callable[[], tuple[Any, Any]]
) -> None:
    # the documented, warned exception; it also shows that the check above detects shared noise
    x1, x2 = data()
    with pytest.warns(PrivacyLeakWarning, match="every copy of it"):
        out1, out2 = _pickled(clone(estimator).set_params(random_state=3), x1, x2)
    assert _unchanged_rows_identical(out1, out2)
