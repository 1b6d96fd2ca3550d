"""The frame functions on Spark DataFrames: the pandas results, one charge per call, refusals that read
nothing, and the pandas functions' errors for bad input."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import BudgetExceededError, InvalidParameterError, PrivacyAccountant, PureDP, frames
from dp_pipeline import spark as dps
from dp_pipeline.mechanisms import secure_rng
from tests.frames.conftest import charges
from tests.statistical import assert_not_rejected

pytestmark = pytest.mark.spark

OPT_OUT: dict[str, Any] = {"accountant": "unaccounted"}
WARDS = ["a", "b", "c"]


def patients() -> pd.DataFrame:
    rng = np.random.default_rng(16)
    person = np.repeat(np.arange(40), 3)
    return pd.DataFrame(
        {
            "person": [f"p{i}" for i in person],
            "age": rng.integers(0, 100, person.size).astype(float),
            "ward": rng.choice(WARDS, person.size),
            "smoker": rng.integers(0, 2, person.size),
        }
    )


@pytest.fixture
def acct() -> Iterator[PrivacyAccountant]:
    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("d", PureDP(10.0))
    yield accountant
    accountant.close()


CALLS: dict[str, Callable[..., Any]] = {
    "dp_count": lambda f, df, **kw: f.dp_count(df, by="ward", keys=WARDS, **kw),
    "dp_sum": lambda f, df, **kw: f.dp_sum(df, "age", lower=0, upper=100, **kw),
    "dp_mean": lambda f, df, **kw: f.dp_mean(df, "age", lower=0, upper=100, by="ward", keys=WARDS, **kw),
    "dp_histogram": lambda f, df, **kw: f.dp_histogram(df, "ward", categories=WARDS, **kw),
    "dp_var": lambda f, df, **kw: f.dp_var(df, "age", lower=0, upper=100, **kw),
    "dp_quantile": lambda f, df, **kw: f.dp_quantile(df, "age", 0.5, lower=0, upper=100, **kw),
    "dp_quantiles": lambda f, df, **kw: f.dp_quantiles(df, "age", [0.25, 0.75], lower=0, upper=100, **kw),
    "dp_median": lambda f, df, **kw: f.dp_median(df, "age", lower=0, upper=100, by="ward", keys=WARDS, **kw),
    "dp_std": lambda f, df, **kw: f.dp_std(df, "age", lower=0, upper=100, by="ward", keys=WARDS, **kw),
    "dp_mean bounds=dp": lambda f, df, **kw: f.dp_mean(df, "age", bounds="dp", outer=(0, 200), **kw),
    "add_noise": lambda f, df, **kw: f.add_noise(df, "age", lower=0, upper=100, **kw),
    "add_noise bounds=dp": lambda f, df, **kw: f.add_noise(df, "age", bounds="dp", outer=(0, 200), **kw),
    "randomized_response": lambda f, df, **kw: f.randomized_response(df, "smoker", **kw),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_one_charge_per_call_with_the_pandas_label_and_cost(
    any_spark: Any, acct: PrivacyAccountant, name: str
) -> None:
    sdf = any_spark.createDataFrame(patients())
    CALLS[name](dps, sdf, epsilon=0.5, accountant=acct, dataset="d")
    (entry,) = charges(acct)
    reference = PrivacyAccountant("memory://")
    reference.set_budget("d", PureDP(10.0))
    CALLS[name](frames, patients(), epsilon=0.5, accountant=reference, dataset="d")
    (expected,) = charges(reference)
    assert (entry.label, entry.guarantee) == (expected.label, expected.guarantee)
    assert acct.spent("d").epsilon == pytest.approx(0.5)


def jobs_in_group(spark: Any, group: str, run: Callable[[], Any]) -> list[int]:
    """The ids of the Spark jobs that ``run`` started, read once Spark's listener bus has delivered them."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        run()
    finally:
        context.setJobGroup("rest", "")
        context._jsc.sc().listenerBus().waitUntilEmpty()
    return list(context.statusTracker().getJobIdsForGroup(group))


def test_the_job_count_sees_a_job_that_reads_data(spark: Any) -> None:
    """The control of the refusal test below: a release that runs sees its job."""
    sdf = spark.createDataFrame(patients())
    assert len(jobs_in_group(spark, "control", lambda: dps.dp_count(sdf, epsilon=1.0, **OPT_OUT))) >= 1


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_refusal_charges_nothing_and_runs_no_spark_job(spark: Any, name: str) -> None:
    accountant = PrivacyAccountant("memory://")
    accountant.set_budget("d", PureDP(0.1))
    sdf = spark.createDataFrame(patients())

    def refused() -> None:
        with pytest.raises(BudgetExceededError):
            CALLS[name](dps, sdf, epsilon=0.5, accountant=accountant, dataset="d")

    assert jobs_in_group(spark, f"refused {name}", refused) == []
    assert charges(accountant) == [] and accountant.spent("d").epsilon == 0.0


def test_transform_returns_the_pandas_table_as_a_spark_frame(spark: Any) -> None:
    sdf = spark.createDataFrame(patients())
    options = {"lower": 0, "upper": 100, "by": "ward", "keys": WARDS, "epsilon": 1.0, **OPT_OUT}
    result = sdf.transform(dps.dp_mean, "age", random_state=secure_rng(3), **options)
    expected = frames.dp_mean(patients(), "age", random_state=secure_rng(3), **options)
    table = result.toPandas().set_index("ward")
    assert list(table.columns) == list(expected.columns) and list(table.index) == WARDS
    assert result.attrs.keys() == expected.attrs.keys()
    assert result.attrs["noise_std"] == expected.attrs["noise_std"]
    whole = sdf.transform(dps.dp_count, epsilon=1.0, **OPT_OUT).toPandas()
    assert list(whole.columns) == ["value", "std_error", "ci_low", "ci_high"] and len(whole) == 1


@pytest.mark.slow
def test_pandas_and_spark_give_statistically_matching_releases(spark: Any) -> None:
    """Grouped counts with contribution bounding (each person keeps 1 of 3 rows, in random keys): the
    released values of 200 keys over 3 calls, minus each key's expected bounded count, have the same
    distribution whichever engine ran them (a two-sample KS test); keeping all rows would shift them."""
    rng = np.random.default_rng(5)
    keys = list(range(200))
    person = np.repeat(np.arange(600), 3)
    df = pd.DataFrame({"person": person, "key": rng.integers(0, 200, person.size)})
    expected = (df.groupby("key").size() / 3).reindex(keys, fill_value=0.0).to_numpy()
    sdf = spark.createDataFrame(df)
    options = {"by": "key", "keys": keys, "privacy_unit": "person", "epsilon": 1.0, **OPT_OUT}

    def residuals(release: Callable[[], pd.DataFrame]) -> np.ndarray:
        return np.concatenate([release()["value"].to_numpy() - expected for _ in range(3)])

    def draw() -> tuple[float, float]:  # fresh noise and bounding on the driver and the Spark workers
        pandas_residuals = residuals(lambda: frames.dp_count(df, **options))
        spark_residuals = residuals(lambda: sdf.transform(dps.dp_count, **options).toPandas())
        same_law = stats.ks_2samp(pandas_residuals, spark_residuals).pvalue
        return same_law, stats.ttest_1samp(spark_residuals, 0.0).pvalue  # and centred on the bounded counts

    assert_not_rejected(draw)


def _bad(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["name"] = "x"
    out["flag"] = out["smoker"] == 1
    out.loc[3, "age"] = np.nan
    out.loc[5, "person"] = None
    return out


BAD: list[tuple[str, Callable[..., Any]]] = [
    ("unknown column", lambda f, df: f.dp_sum(df, "height", lower=0, upper=1, epsilon=1.0, **OPT_OUT)),
    ("unknown by", lambda f, df: f.dp_count(df, by="floor", keys=["1"], epsilon=1.0, **OPT_OUT)),
    ("non-numeric", lambda f, df: f.dp_mean(df, "name", lower=0, upper=1, epsilon=1.0, **OPT_OUT)),
    ("bools", lambda f, df: f.dp_sum(df, "flag", lower=0, upper=1, epsilon=1.0, **OPT_OUT)),
    ("nulls", lambda f, df: f.dp_mean(df, "age", lower=0, upper=100, epsilon=1.0, **OPT_OUT)),
    ("null person", lambda f, df: f.dp_count(df, privacy_unit="person", epsilon=1.0, **OPT_OUT)),
    ("undeclared keys", lambda f, df: f.dp_count(df, by="ward", epsilon=1.0, **OPT_OUT)),
    ("keys without by", lambda f, df: f.dp_count(df, keys=WARDS, epsilon=1.0, **OPT_OUT)),
    ("nulls to noise", lambda f, df: f.add_noise(df, "age", sensitivity=1.0, epsilon=1.0, **OPT_OUT)),
    ("non-answers", lambda f, df: f.randomized_response(df, "age", epsilon=1.0, **OPT_OUT)),
]


@pytest.mark.parametrize(("case", "call"), BAD, ids=[case for case, _ in BAD])
def test_bad_input_gets_the_pandas_error(spark: Any, case: str, call: Callable[..., Any]) -> None:
    df = _bad(patients())
    with pytest.raises(InvalidParameterError) as expected:
        call(frames, df)
    with pytest.raises(InvalidParameterError) as got:
        call(dps, spark.createDataFrame(df))
    assert got.value.parameter == expected.value.parameter
    if case != "non-numeric":  # Spark names its types: "string", where pandas says "object"
        assert str(got.value) == str(expected.value)


def test_bad_data_found_by_the_job_charges_nothing(spark: Any, acct: PrivacyAccountant) -> None:
    sdf = spark.createDataFrame(_bad(patients()))
    with pytest.raises(InvalidParameterError, match="'age' contains NaN"):
        dps.dp_mean(sdf, "age", lower=0, upper=100, epsilon=1.0, accountant=acct, dataset="d")
    assert acct.spent("d").epsilon == 0.0
    (entry,) = acct.history("d")
    assert entry.status == "cancelled"  # reserved before the job, returned when the data was refused
