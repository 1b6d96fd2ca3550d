"""The frame functions on a partitioned dataset: the rows of the named partitions, each person kept in at most
L of their partitions (chosen at random), and the release charged to those partitions."""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd
import pytest
from scipy import stats

from dp_pipeline import InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline.accounting import partition_spending
from dp_pipeline.frames import dp_count, dp_mean, dp_median, dp_var
from dp_pipeline.frames._common import bound_partitions
from dp_pipeline.mechanisms import fast_rng

EXACT = 1e9  # an ε so large that the noise is negligible: the value is the exact (bounded) statistic


def visits() -> pd.DataFrame:
    """Person p1 has 5 visits in ward a and 5 in ward b, p2 one in a, p3 three in c, p4 one in each of a–d."""
    return pd.DataFrame(
        {
            "person": ["p1"] * 10 + ["p2"] + ["p3"] * 3 + ["p4"] * 4,
            "ward": ["a"] * 5 + ["b"] * 5 + ["a"] + ["c"] * 3 + ["a", "b", "c", "d"],
            "cost": [float(v) for v in range(18)],
        }
    )


def _ledger(limit: int = 1) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1e12), relation="add_remove", partitions=limit)
    return acct


def _wards(rows: pd.DataFrame) -> dict[str, set[str]]:
    return {person: set(group["ward"]) for person, group in rows.groupby("person")}


def test_each_person_keeps_at_most_l_partitions_and_everything_of_those() -> None:
    df = visits()
    for limit in (1, 2, 3):
        rows = bound_partitions(df, "person", "ward", (), limit, fast_rng(limit))
        wards = _wards(rows)
        assert all(len(kept) <= limit for kept in wards.values())
        assert wards["p2"] == {"a"} and wards["p3"] == {"c"}  # one partition each: all kept
        for person, kept in wards.items():  # every row of a kept partition stays
            expected = df[(df["person"] == person) & df["ward"].isin(kept)]
            assert rows[rows["person"] == person].equals(expected)


def test_only_the_named_partitions_are_read() -> None:
    rows = bound_partitions(visits(), "person", "ward", ("a", "c"), 2, fast_rng(0))
    assert set(rows["ward"]) == {"a", "c"} and _wards(rows)["p4"] == {"a", "c"}
    rows = bound_partitions(visits(), None, "ward", ("b",), 1, fast_rng(0))  # each row its own person
    assert list(rows["person"]) == ["p1"] * 5 + ["p4"]


@pytest.mark.slow
def test_the_partitions_kept_are_a_uniform_sample() -> None:
    person = visits()[lambda d: d["person"] == "p4"]  # four wards, one row each
    pairs = list(itertools.combinations("abcd", 2))
    draws = 1200
    seen = [
        tuple(sorted(bound_partitions(person, "person", "ward", (), 2, fast_rng(s))["ward"]))
        for s in range(draws)
    ]
    counts = [seen.count(pair) for pair in pairs]
    assert sum(counts) == draws
    assert stats.chisquare(counts).pvalue > 1e-4  # each of the 6 pairs with probability 1/6


def test_dp_count_reads_its_partition_and_charges_it() -> None:
    acct = _ledger()
    options: dict[str, Any] = {"accountant": acct, "dataset": "visits", "privacy_unit": "person"}
    result = visits().pipe(
        dp_count, epsilon=EXACT, partition_column="ward", partition="a", max_contributions=10, **options
    )
    assert result["value"] == pytest.approx(5 + 1 + 1, abs=1e-3)  # the visits in ward a
    assert list(partition_spending(acct.store, "visits")) == ["a"]
    whole = visits().pipe(dp_count, epsilon=EXACT, partition_column="ward", max_contributions=10, **options)
    # every person in one ward at most (L = 1): p1 keeps 5, p2 1, p3 3, p4 1
    assert whole["value"] == pytest.approx(10, abs=1e-3)
    assert acct.spent("visits").epsilon == pytest.approx(2 * EXACT)  # ward a and the whole dataset
    records = [r for r in acct.store.records("visits") if r.kind == "reserve"]
    assert [r.body.get("partitions") for r in records] == [["a"], None]


def test_other_aggregates_charge_their_partitions() -> None:
    acct = _ledger(2)
    options: dict[str, Any] = {"accountant": acct, "dataset": "visits", "privacy_unit": "person"}
    df = visits()
    df.pipe(
        dp_mean, "cost", lower=0, upper=20, epsilon=1.0, partition_column="ward", partition="b", **options
    )
    df.pipe(dp_median, "cost", lower=0, upper=20, epsilon=1.0, partition="c", **options)
    df.pipe(dp_var, "cost", lower=0, upper=20, epsilon=1.0, partition=["a", "d"], **options)
    assert list(partition_spending(acct.store, "visits")) == ["a", "b", "c", "d"]
    acct.verify()


def test_a_partition_column_needs_a_partitioned_dataset() -> None:
    with pytest.raises(InvalidParameterError, match="partitioned dataset") as info:
        visits().pipe(dp_count, epsilon=1.0, accountant="unaccounted", partition_column="ward")
    assert info.value.parameter == "partition_column"
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0))
    with pytest.raises(InvalidParameterError, match="partitioned dataset"):
        visits().pipe(dp_count, epsilon=1.0, accountant=acct, dataset="d", partition_column="ward")
    with pytest.raises(InvalidParameterError, match="not partitioned"):
        visits().pipe(dp_count, epsilon=1.0, accountant=acct, dataset="d", partition="a")
    assert [r.kind for r in acct.store.records("d")] == ["budget"]


def test_missing_partitions_and_bad_names_are_refused_before_anything_is_charged() -> None:
    acct = _ledger()
    df = visits().astype({"ward": object})
    df.loc[3, "ward"] = None
    with pytest.raises(InvalidParameterError, match="missing values") as info:
        df.pipe(dp_count, epsilon=1.0, accountant=acct, dataset="visits", partition_column="ward")
    assert info.value.parameter == "partition_column"
    with pytest.raises(InvalidParameterError) as info:
        visits().pipe(dp_count, epsilon=1.0, accountant=acct, dataset="visits", partition=["a", "a"])
    assert info.value.parameter == "partition"
    assert [r.kind for r in acct.store.records("visits")] == ["budget"]


def test_through_a_reservation_the_partition_named_is_read_and_paid() -> None:
    """Code paying from a task's reservation on partition ``a`` names it with ``partition=`` (``dataset=``
    omitted: the reservation's): the release reads only that partition's rows (``partition_column``) and
    pays from the reservation on it; another partition is refused, and a partition inside the dataset
    name (``"visits/a"``, parsed only at the Airflow edge) is another dataset: refused, nothing paid."""
    acct = _ledger()
    task = acct.reserve("visits", PureDP(2 * EXACT), key="task", partition="a")
    options: dict[str, Any] = {"accountant": task, "privacy_unit": "person", "max_contributions": 10}
    result = visits().pipe(dp_count, epsilon=EXACT, partition="a", partition_column="ward", **options)
    in_a = int((visits()["ward"] == "a").sum())  # counted independently: p1 5, p2 1, p4 1
    assert in_a == 7 and result["value"] == pytest.approx(in_a, abs=1e-3)
    before = acct.store.records("visits")
    with pytest.raises(InvalidParameterError, match="among those"):
        visits().pipe(dp_count, epsilon=EXACT, partition="b", partition_column="ward", **options)
    with pytest.raises(InvalidParameterError, match="names another one") as info:
        visits().pipe(dp_count, epsilon=EXACT, dataset="visits/a", partition_column="ward", **options)
    assert info.value.parameter == "dataset"
    assert acct.store.records("visits") == before
    paid = [entry for entry in acct.history("visits") if entry.paid_from == "task"]
    assert [entry.partitions for entry in paid] == [("a",)]
    assert task.spent().epsilon == pytest.approx(EXACT)
