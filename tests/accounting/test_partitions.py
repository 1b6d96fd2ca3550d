"""Parallel composition over partitions: a dataset declared with at most L partitions per person composes,
under its rule, the L largest partition totals. Checked against independent sums, against a brute force over
every set of L partitions a person could lie in, and through the ledger (refusals, cancellations, verify,
records, SQLite, reports), and the name mapping ``visits/2026-11-24``."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import hypothesis
import mpmath
import pytest
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, BudgetExceededError, GaussianDP, PrivacyAccountant, PureDP
from dp_pipeline.accounting import Request, ledger_entries, partition_spending
from dp_pipeline.accounting._concentrated import zcdp_epsilon
from dp_pipeline.accounting.testing import gaussian_event, laplace_event
from dp_pipeline.airflow.partition_names import locate_partition, split_partition
from dp_pipeline.exceptions import InvalidParameterError, LedgerError, UnknownDatasetError
from tests.accounting.conftest import untriggered

_SETTINGS = hypothesis.settings(max_examples=40, deadline=None)


def _partitioned(budget: Any, limit: int, rule: str = "auto") -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("v", budget, rule=rule, relation="add_remove", partitions=limit)
    return acct


# ------------------------------------------------------------------------------------------------ the issue


def test_ten_releases_on_their_own_partitions_fit_and_an_eleventh_on_a_charged_one_is_refused() -> None:
    acct = _partitioned(PureDP(2.0), 2)
    for day in range(10):
        acct.spend("v", PureDP(1.0), partition=f"2026-11-{day + 10}")
    # independently: a person lies in at most 2 partitions, each charged ε = 1: 1 + 1 = 2 ≤ 2
    totals = sorted((Fraction(1) for _ in range(10)), reverse=True)
    assert sum(totals[:2]) == 2 == acct.spent("v").epsilon
    before = acct.store.records("v")
    with pytest.raises(BudgetExceededError):
        acct.spend("v", PureDP(1.0), partition="2026-11-13")  # that partition would hold 2, the top two 3
    assert acct.store.records("v") == before  # a refusal writes nothing
    acct.spend("v", PureDP(1.0), partition="2026-11-30")  # a new partition still fits: the top two stay 2
    acct.verify()


# ------------------------------------------------------------------------------------------------ composition

_PARTS = ["a", "b", "c", "d"]


@st.composite
def _spends(draw: Any) -> list[tuple[float, tuple[str, ...]]]:
    """Releases of ε in [0.05, 1], each on one to three partitions or on the whole dataset (no partition)."""
    spends = []
    for _ in range(draw(st.integers(1, 14))):
        epsilon = draw(st.floats(0.05, 1.0))
        named = draw(
            st.one_of(st.just(()), st.lists(st.sampled_from(_PARTS), min_size=1, max_size=3, unique=True))
        )
        spends.append((epsilon, tuple(named)))
    return spends


def _person_sums(accepted: list[tuple[Fraction, tuple[str, ...]]], people: tuple[str, ...]) -> Fraction:
    """The loss of a person whose data lie in ``people``: every release that read them, counted once."""
    return sum((cost for cost, named in accepted if not named or set(named) & set(people)), Fraction(0))


@_SETTINGS
@hypothesis.given(spends=_spends(), limit=st.integers(1, 3))
def test_basic_composition_accepts_only_what_every_person_can_afford(
    spends: list[tuple[float, tuple[str, ...]]], limit: int
) -> None:
    budget = Fraction(3)
    acct = _partitioned(PureDP(3.0), limit)
    accepted: list[tuple[Fraction, tuple[str, ...]]] = []
    totals = {name: Fraction(0) for name in _PARTS}
    common = Fraction(0)
    for epsilon, named in spends:
        cost = Fraction(epsilon)
        after = {name: totals[name] + (cost if name in named else 0) for name in _PARTS}
        after_common = common + (0 if named else cost)
        # the rule, computed here: the whole-dataset sum plus the L largest partition sums
        expected = after_common + sum(sorted(after.values(), reverse=True)[:limit]) <= budget
        try:
            acct.spend("v", PureDP(epsilon), partition=list(named) or None)
        except BudgetExceededError:
            assert not expected
            continue
        assert expected
        accepted.append((cost, named))
        totals, common = after, after_common
        # validity, by brute force: every person, in any set of at most L partitions, is within budget
        for size in range(1, limit + 1):
            for people in itertools.combinations(_PARTS, size):
                assert _person_sums(accepted, people) <= budget
        spent = common + sum(sorted(totals.values(), reverse=True)[:limit])
        assert Fraction(acct.spent("v").epsilon) >= spent and acct.spent("v").epsilon == pytest.approx(
            float(spent)
        )
    acct.verify()


@_SETTINGS
@hypothesis.given(
    mus=st.lists(st.tuples(st.floats(0.05, 0.6), st.sampled_from(_PARTS)), min_size=1, max_size=12),
    limit=st.integers(1, 3),
)
def test_gdp_composes_the_root_of_the_sum_of_the_l_largest_squares(
    mus: list[tuple[float, str]], limit: int
) -> None:
    acct = _partitioned(GaussianDP(1.0), limit)
    squares = {name: Fraction(0) for name in _PARTS}
    for mu, name in mus:
        after = dict(squares)
        after[name] += Fraction(mu) ** 2
        fits = sum(sorted(after.values(), reverse=True)[:limit]) <= 1
        try:
            acct.spend("v", GaussianDP(mu), partition=name)
        except BudgetExceededError:
            assert not fits
            continue
        assert fits
        squares = after
    top = sum(sorted(squares.values(), reverse=True)[:limit])
    with mpmath.workdps(50):
        expected = mpmath.sqrt(mpmath.mpf(top.numerator) / top.denominator)
        assert mpmath.mpf(acct.spent("v").mu) >= expected
        assert acct.spent("v").mu <= expected * (1 + mpmath.mpf("1e-15"))


def test_zcdp_composes_the_sum_of_the_l_largest_rho() -> None:
    acct = _partitioned(ApproxDP(3.0, 1e-6), 2, rule="zcdp")
    acct.spend("v", laplace_event(0.25), partition="a")  # Laplace: ρ = ε + e^−ε − 1 ≈ 0.0288
    acct.spend("v", gaussian_event(0.5), partition="b")  # σ = 2: ρ = 1/8
    acct.spend("v", gaussian_event(0.25), partition="c")  # σ = 4: ρ = 1/32
    acct.spend("v", laplace_event(0.125))  # whole dataset: ρ = 0.125 + e^−0.125 − 1
    with mpmath.workdps(60):  # the whole dataset and the two largest partitions (b, then c above a)
        whole = mpmath.mpf("0.125") + mpmath.exp(mpmath.mpf("-0.125")) - 1
        rho = Decimal(mpmath.nstr(whole + mpmath.mpf(1) / 8 + mpmath.mpf(1) / 32, 40))
    assert acct.spent("v").method == "zcdp"
    assert acct.spent("v").epsilon == pytest.approx(zcdp_epsilon(rho, 1e-6), rel=1e-12)
    assert acct.spent("v").epsilon >= zcdp_epsilon(rho, 1e-6) * (1 - 1e-15)


def test_one_partition_per_person_composes_the_largest() -> None:
    acct = _partitioned(ApproxDP(1.0, 1e-6), 1)
    for name, epsilon in (("north", 0.5), ("south", 0.75), ("east", 0.25)):
        acct.spend("v", ApproxDP(epsilon, 1e-7), partition=name)
    spent = acct.spent("v")
    assert (spent.epsilon, spent.delta) == (0.75, 1e-7)
    assert acct.remaining("v").epsilon == 0.25
    acct.spend("v", PureDP(0.25), partition="north")  # 0.75 there: the largest stays 0.75
    acct.spend("v", PureDP(0.25), partition="east")


# ------------------------------------------------------------------------------------------------ the ledger


def test_a_release_on_several_partitions_is_charged_to_each() -> None:
    acct = _partitioned(PureDP(2.0), 2)
    acct.spend("v", PureDP(0.5), partition=["a", "b"])
    acct.spend("v", PureDP(0.25), partition="a")
    reports = partition_spending(acct.store, "v")
    assert list(reports) == ["a", "b"]
    assert (reports["a"].epsilon, reports["b"].epsilon) == (0.75, 0.5)
    assert reports["a"].partition == "a" and reports["a"].partitions == 2
    assert str(reports["a"]).startswith("spent on 'v', partition 'a': ε = 0.75")
    assert "add_remove" in str(reports["a"]) and "add_remove" in str(acct.spent("v"))
    assert {entry.relation for entry in acct.history("v")} == {"add_remove"}
    assert acct.spent("v").epsilon == 1.25 and acct.budget("v").partitions == 2


def test_whole_dataset_releases_count_for_every_partition() -> None:
    acct = _partitioned(PureDP(2.0), 1)
    acct.spend("v", PureDP(0.5))
    acct.spend("v", PureDP(1.0), partition="a")
    assert partition_spending(acct.store, "v")["a"].epsilon == 1.5 and acct.spent("v").epsilon == 1.5
    with pytest.raises(BudgetExceededError):
        acct.spend("v", PureDP(1.5))  # a person in a would reach 3


# ------------------------------------------------------------------------------------ one partition's report


def _replayed(spends: list[tuple[float, tuple[str, ...]]], limit: int) -> PrivacyAccountant:
    """A dataset of ε_B = 3 with at most ``limit`` partitions per person, holding the spends it accepts."""
    acct = _partitioned(PureDP(3.0), limit)
    for epsilon, named in spends:
        with contextlib.suppress(BudgetExceededError):
            acct.spend("v", PureDP(epsilon), partition=list(named) or None)
    return acct


def test_spent_and_remaining_of_one_partition_are_those_of_a_person_in_it_alone() -> None:
    acct = _partitioned(ApproxDP(2.0, 1e-6), 1)
    charges = [(0.5, ()), (1.0, ("a",)), (0.25, ("a",)), (0.125, ("b",))]
    for epsilon, named in charges:
        acct.spend("v", PureDP(epsilon), partition=list(named) or None)
    # independently: a person in p alone lost the whole-dataset releases and those naming p
    for name in ("a", "b", "never-named"):
        lost = sum((Fraction(e) for e, named in charges if not named or name in named), Fraction(0))
        spent, remaining = acct.spent("v", partition=name), acct.remaining("v", partition=name)
        assert Fraction(spent.epsilon) == lost and Fraction(remaining.epsilon) == 2 - lost
        assert spent.partition == remaining.partition == name and (spent.what, remaining.what) == (
            "spent",
            "remaining",
        )
        assert spent.delta == 0.0 and remaining.delta == 1e-6
    assert (
        acct.remaining("v").epsilon == 0.25 < acct.remaining("v", partition="b").epsilon
    )  # the dataset: a's
    assert partition_spending(acct.store, "v") == {n: acct.spent("v", partition=n) for n in ("a", "b")}
    left = acct.remaining("v", partition="b").guarantee
    acct.spend("v", left, partition="b")  # exactly what is left on b is accepted (L = 1: exact)
    before = acct.store.records("v")
    with pytest.raises(BudgetExceededError):
        acct.spend("v", PureDP(2.0**-20), partition="b")
    assert acct.store.records("v") == before and acct.remaining("v", partition="b").epsilon == 0.0


@_SETTINGS
@hypothesis.given(_spends(), st.integers(1, 3), st.sampled_from(_PARTS))
def test_what_remains_on_a_partition_is_accepted_there(
    spends: list[tuple[float, tuple[str, ...]]], limit: int, name: str
) -> None:
    """For every L, a release of ``remaining(partition=p)`` on p is accepted; for L = 1 it is the budget less
    the person in p's own sum (exact), for L ≥ 2 the dataset's remaining amount (a lower bound)."""
    acct = _replayed(spends, limit)
    remaining = acct.remaining("v", partition=name)
    accepted = [(Fraction(e.cost.epsilon), e.partitions) for e in acct.history("v")]  # type: ignore[union-attr]
    if limit == 1:
        exact = 3 - _person_sums(accepted, (name,))  # rounded down to the float just below, or equal
        assert Fraction(remaining.epsilon) <= exact < Fraction(math.nextafter(remaining.epsilon, math.inf))
    else:
        assert remaining.guarantee == acct.remaining("v").guarantee
    if remaining.epsilon > 0:
        acct.spend("v", remaining.guarantee, partition=name)  # never refused
    acct.verify()


@pytest.mark.parametrize("partition", ["", 3, ["a"], "x" * 300])
def test_a_report_on_a_bad_partition_name_is_refused(partition: Any) -> None:
    acct = _partitioned(PureDP(1.0), 1)
    for report in (acct.spent, acct.remaining):
        with pytest.raises(InvalidParameterError):
            report("v", partition=partition)


def test_a_report_on_a_partition_of_a_dataset_that_is_not_partitioned_is_refused() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("flat", PureDP(1.0), relation="add_remove")
    for report in (acct.spent, acct.remaining):
        with pytest.raises(InvalidParameterError, match="not partitioned"):
            report("flat", partition="a")
    assert partition_spending(acct.store, "flat") == {}
    with pytest.raises(UnknownDatasetError, match="memory://"):
        partition_spending(acct.store, "ghost")


def test_a_cancelled_reservation_gives_its_partitions_back() -> None:
    acct = _partitioned(PureDP(1.0), 1)
    acct.spend("v", PureDP(0.5), partition="a")
    reservation = acct.reserve("v", PureDP(0.5), partition=["a", "b"], key="k")
    assert acct.spent("v").epsilon == 1.0
    reservation.cancel("read no data")
    assert acct.spent("v").epsilon == 0.5 and list(partition_spending(acct.store, "v")) == ["a"]
    acct.spend("v", PureDP(0.5), partition="a")
    assert acct.verify().records == 7


def test_naming_a_partition_of_a_dataset_that_is_not_partitioned_is_refused() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    with pytest.raises(InvalidParameterError, match="not partitioned") as info:
        acct.spend("d", PureDP(0.5), partition="a")
    assert info.value.parameter == "partition"
    with pytest.raises(InvalidParameterError, match="not partitioned"):
        acct.quote("d", Request.plan([PureDP(0.5)], partition="a"))
    assert len(acct.store.records("d")) == 1


@pytest.mark.parametrize("partition", [[], ["a", "a"], [""], "", 3, [None], b"a", {"a": 1}])
def test_bad_partition_names_are_refused_and_change_nothing(partition: Any) -> None:
    acct = _partitioned(PureDP(1.0), 2)
    with pytest.raises(InvalidParameterError) as info:
        acct.spend("v", PureDP(0.5), partition=partition)
    assert info.value.parameter == "partition"
    assert len(acct.store.records("v")) == 1


def test_bad_numbers_of_partitions_are_refused() -> None:
    acct = PrivacyAccountant("memory://")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidParameterError):
            acct.set_budget("v", PureDP(1.0), partitions=bad)  # type: ignore[arg-type]
    assert acct.datasets() == []


def test_the_number_of_partitions_may_grow_but_not_shrink_while_spends_are_active() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("v", PureDP(3.0), relation="add_remove")
    acct.spend("v", PureDP(0.5))  # before the declaration: a whole-dataset release
    acct.set_budget("v", PureDP(3.0), relation="add_remove", partitions=2)
    acct.spend("v", PureDP(1.0), partition="a")
    acct.spend("v", PureDP(1.0), partition="b")
    acct.set_budget("v", PureDP(3.0))  # None keeps L = 2
    assert acct.budget("v").partitions == 2
    with pytest.raises(InvalidParameterError, match="cannot fall to 1"):
        acct.set_budget("v", PureDP(3.0), partitions=1)
    acct.spend("v", PureDP(0.5), partition="c")
    with pytest.raises(InvalidParameterError, match="below what is already spent"):
        acct.set_budget("v", PureDP(2.5), partitions=3)  # 0.5 + 1 + 1 + 0.5 = 3 > 2.5
    acct.set_budget("v", PureDP(3.0), partitions=3)
    assert acct.spent("v").epsilon == 3.0
    acct.verify()


def test_records_store_only_the_partitions_they_change() -> None:
    acct = _partitioned(PureDP(10.0), 1)
    for day in range(40):
        acct.spend("v", PureDP(0.5), partition=f"day-{day}")
    reserve, commit = acct.store.records("v")[-2:]
    assert list(reserve.body["totals"]["partitions"]) == ["day-39"]
    assert reserve.body["partitions"] == ["day-39"]
    assert "partitions" not in commit.body["totals"]
    head = acct.store.head("v")
    assert head is not None and len(head.state.totals["partitions"]) == 40


def test_an_unpartitioned_dataset_writes_what_it_wrote_before() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(1.0, 1e-6))
    acct.spend("d", PureDP(0.5), key="k")
    budget, reserve, commit = acct.store.records("d")
    assert set(budget.body) == {
        "budget",
        "method",
        "mu_limit",
        "relation",
        "previous",
        "reason",
        "actor",
        "totals",
    }
    request = {"label", "events", "group_size", "plan", "delta"}
    spent = {"spend"}  # a release made by spend() says so (nothing is paid from its reservation)
    priced = {"pricing", "cost", "composition", "charge"}  # "pricing": what verify re-prices the charge by
    assert set(reserve.body) == {*request, *spent, *priced, "relation", "totals"}
    keys = {"epsilon", "delta", "mu2", "impure", "no_mu", "active", "open"}
    assert set(reserve.body["totals"]) == set(commit.body["totals"]) == keys
    head = acct.store.head("d")
    assert head is not None and set(head.state.totals) == keys and "partitions" not in head.state.budget


def test_a_reused_key_on_other_partitions_is_another_request() -> None:
    acct = _partitioned(PureDP(2.0), 2)
    acct.spend("v", PureDP(0.5), partition="a", key="k")
    with pytest.raises(InvalidParameterError, match="different cost"):
        acct.spend("v", PureDP(0.5), partition="b", key="k")


def test_plans_are_priced_and_charged_on_their_partitions() -> None:
    acct = _partitioned(ApproxDP(1.0, 1e-6), 1)
    plan = [PureDP(0.25), PureDP(0.25)]
    acct.spend_plan("v", plan, partition="a")
    assert acct.quote("v", Request.plan(plan + plan, partition="b")).fits  # b holds nothing yet
    assert not acct.quote("v", Request.plan(plan + plan, partition="a")).fits
    assert acct.plan_cost("v", plan, partition="b").partitions == 1
    acct.spend_plan("v", plan + plan, partition="b")
    assert acct.spent("v").epsilon == 1.0 and partition_spending(acct.store, "v")["a"].epsilon == 0.5


def test_a_partitioned_sqlite_ledger_reopens_and_verify_finds_edited_partition_totals(
    sqlite_url: str,
) -> None:
    with PrivacyAccountant(sqlite_url, create=True) as acct:
        acct.set_budget("v", PureDP(2.0), relation="add_remove", partitions=2)
        acct.spend("v", PureDP(1.0), partition="a")
        acct.spend("v", PureDP(0.5), partition="b")
    with PrivacyAccountant(sqlite_url, create=False) as again:
        assert again.spent("v").epsilon == 1.5 and again.budget("v").partitions == 2
        again.spend("v", PureDP(1.0), partition="c")
        with pytest.raises(BudgetExceededError):
            again.spend("v", PureDP(0.75), partition="b")
        assert again.verify().records == 7
    conn = untriggered(Path(sqlite_url.removeprefix("sqlite:///")))  # lower partition a's cached total
    (totals,) = conn.execute("SELECT totals FROM dp_ledger_budgets WHERE dataset = 'v'").fetchone()
    edited = json.loads(totals)
    edited["partitions"]["a"]["epsilon"] = "0.5"
    conn.execute("UPDATE dp_ledger_budgets SET totals = ? WHERE dataset = 'v'", (json.dumps(edited),))
    conn.close()
    with (
        PrivacyAccountant(sqlite_url, create=False) as edited_ledger,
        pytest.raises(LedgerError, match="cached"),
    ):
        edited_ledger.verify()


# ------------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("name", "datasets", "expected"),
    [
        ("visits/2026-11-24", None, ("visits", "2026-11-24")),
        ("visits", None, ("visits", None)),
        ("clinic/visits/2026-11-24", None, ("clinic/visits", "2026-11-24")),
        ("clinic/visits", ["clinic/visits"], ("clinic/visits", None)),
        ("clinic/visits", ["clinic"], ("clinic", "visits")),
    ],
)
def test_split_partition(name: str, datasets: list[str] | None, expected: tuple[str, str | None]) -> None:
    assert split_partition(name, datasets) == expected


@pytest.mark.parametrize("name", ["/2026-11-24", "visits/", "", None])
def test_split_partition_refuses_empty_parts(name: Any) -> None:
    with pytest.raises(InvalidParameterError):
        split_partition(name)


def test_a_templated_name_charges_its_partition() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    for run in ("visits/2026-11-24", "visits/2026-11-25"):
        dataset, partition = split_partition(run, acct.datasets())
        acct.spend(dataset, PureDP(1.0), partition=partition)
    assert list(partition_spending(acct.store, "visits")) == ["2026-11-24", "2026-11-25"]
    assert acct.spent("visits").epsilon == 1.0


# ------------------------------------------------------------------------------------------ names on a ledger


def _days() -> PrivacyAccountant:
    """``visits`` partitioned (L = 1), ``flat`` not, and ``visits/2026-11-30`` a dataset of its own."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    acct.set_budget("flat", PureDP(1.0))
    acct.set_budget("visits/2026-11-30", PureDP(1.0))
    return acct


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("visits/2026-11-24", ("visits", "2026-11-24")),
        ("visits", ("visits", None)),
        ("flat", ("flat", None)),
        ("visits/2026-11-30", ("visits/2026-11-30", None)),  # itself a dataset: whole
        ("nowhere/2026-11-24", ("nowhere/2026-11-24", None)),  # no budget either way: charged (refused) whole
    ],
)
def test_locate_partition_maps_a_name_by_the_budgets(name: str, expected: tuple[str, str | None]) -> None:
    assert locate_partition(name, _days()) == expected


def test_a_partition_of_a_dataset_that_is_not_partitioned_is_refused_never_a_new_dataset() -> None:
    acct = _days()
    with pytest.raises(InvalidParameterError, match="'flat', which is not partitioned") as info:
        locate_partition("flat/2026-11-24", acct)
    assert info.value.parameter == "dataset" and "partitions=L" in str(info.value)
    flat = acct.reserve("flat", PureDP(0.5), key="flat task")
    with pytest.raises(InvalidParameterError, match="not partitioned"):
        flat.spend("flat", PureDP(0.25), partition="2026-11-24")
    with pytest.raises(InvalidParameterError, match="another dataset"):
        flat.spend("flat/2026-11-24", PureDP(0.25))  # a reservation never splits a name
    assert sorted(acct.datasets()) == ["flat", "visits", "visits/2026-11-30"]
    assert [entry.paid_from for entry in acct.history("flat")] == [None]


def test_a_reservation_on_a_partition_pays_for_releases_naming_it_by_partition() -> None:
    """The task's reservation is on partition 2026-11-24 (its rendered ``visits/{{ ds }}``, split at the
    Airflow edge): code passing ``visits`` with ``partition=`` pays from it, recorded on the partition; a
    release naming no partition (it would read every day), another day, a partition inside the dataset
    name (the core never splits names), or another dataset, is refused and pays nothing."""
    acct = _days()
    task = acct.reserve("visits", PureDP(0.5), key="task", partition="2026-11-24")
    task.spend("visits", PureDP(0.25), partition="2026-11-24", label="by partition")
    task.spend("visits", PureDP(0.25), partition=["2026-11-24"], label="as a list")
    before = acct.store.records("visits")
    refused = {
        "every partition": lambda: task.spend("visits", PureDP(0.0625)),
        "among those": lambda: task.spend("visits", PureDP(0.0625), partition="2026-11-23"),
        "another dataset": lambda: task.spend("visits/2026-11-24", PureDP(0.0625)),
        "on dataset 'visits'; it cannot pay": lambda: task.spend("flat", PureDP(0.1), partition="x"),
    }
    for message, call in refused.items():
        with pytest.raises(InvalidParameterError, match=message):
            call()
    assert acct.store.records("visits") == before
    assert task.relation() == acct.budget("visits").relation
    assert task.partitions_limit() == acct.budget("visits").partitions == 1
    history = acct.history("visits")
    assert [(e.label, e.status, e.partitions) for e in history] == [
        (None, "open", ("2026-11-24",)),
        ("by partition", "paid", ("2026-11-24",)),
        ("as a list", "paid", ("2026-11-24",)),
    ]
    assert [e.partitions for e in ledger_entries(acct.store, "visits") if e.kind in ("reserve", "pay")] == [
        ("2026-11-24",)
    ] * 3
    paid = sum((Fraction(e.cost.epsilon) for e in history if e.paid_from == "task"), Fraction(0))
    assert paid == Fraction(1, 2) == Fraction(task.spent().epsilon)
    assert acct.spent("visits").epsilon == 0.5  # charged once, by the reservation


# --------------------------------------------------------------------------------------------- plans together

_DAYS = ["d1", "d2", "d3"]


@st.composite
def _parts(draw: Any) -> list[tuple[list[float], str | None]]:
    """One to three plans of one to three pure releases, each plan on one day or on the whole dataset."""
    return [
        (
            draw(st.lists(st.sampled_from(NICE_EPS), min_size=1, max_size=3)),
            draw(st.one_of(st.none(), st.sampled_from(_DAYS))),
        )
        for _ in range(draw(st.integers(1, 3)))
    ]


NICE_EPS = (0.0625, 0.125, 0.25, 0.5)  # exact in binary: the sums below are exact


@_SETTINGS
@hypothesis.given(
    earlier=st.lists(st.tuples(st.sampled_from(NICE_EPS), st.sampled_from([None, *_DAYS])), max_size=4),
    parts=_parts(),
    limit=st.integers(1, 2),
)
def test_plans_fit_together_exactly_when_each_spend_plan_after_the_other_is_accepted(
    earlier: list[tuple[float, str | None]], parts: list[tuple[list[float], str | None]], limit: int
) -> None:
    """``plans_fit`` of a run's parts (plans on days and on the whole dataset) agrees with ``spend_plan`` of
    each, one after the other, on a copy of the ledger, and with the rule computed here: the whole-dataset
    sum plus the L largest day sums within ε = 1 (pure releases add up under basic composition)."""

    def ledger() -> PrivacyAccountant:
        acct = _partitioned(PureDP(1.0), limit)
        for epsilon, day in earlier:
            with contextlib.suppress(BudgetExceededError):  # a refused earlier spend is not on either copy
                acct.spend("v", PureDP(epsilon), partition=day)
        return acct

    acct = ledger()
    plans = [([PureDP(e) for e in epsilons], 1, day) for epsilons, day in parts]
    copy = ledger()  # the same budget and spends: a copy of the ledger
    try:
        for costs, _, day in plans:
            copy.spend_plan("v", costs, partition=day)
        accepted = True
    except BudgetExceededError:
        accepted = False
    assert acct.quote("v", plans).fits == accepted

    def within(spends: list[tuple[Fraction, str | None]]) -> bool:
        whole = sum((e for e, day in spends if day is None), Fraction(0))
        days = sorted((sum((e for e, d in spends if d == day), Fraction(0)) for day in _DAYS), reverse=True)
        return whole + sum(days[:limit]) <= 1

    charged = [
        (Fraction(e.cost.epsilon), e.partitions[0] if e.partitions else None) for e in acct.history("v")
    ]
    planned = [(sum(map(Fraction, epsilons), Fraction(0)), day) for epsilons, day in parts]
    steps = [charged + planned[: i + 1] for i in range(len(planned))]
    assert accepted == all(within(step) for step in steps)
    assert acct.quote("v", plans, against="budget").fits == all(
        within(planned[: i + 1]) for i in range(len(planned))
    )
    assert [r.kind for r in acct.store.records("v")].count("reserve") == len(charged)  # nothing charged


def test_plans_fit_refuses_what_is_not_a_list_of_plans_and_charges_nothing() -> None:
    acct = _partitioned(PureDP(1.0), 1)
    for plans in ([], "d1", [([PureDP(0.1)], 1)], [([PureDP(0.1)], 0, "d1")]):
        with pytest.raises(InvalidParameterError):
            acct.quote("v", plans)
    with pytest.raises(InvalidParameterError, match="not partitioned"):
        _days().quote("flat", [([PureDP(0.1)], 1, "d1")])
    assert acct.quote("v", [([PureDP(0.5)], 1, "d1"), ([PureDP(0.5)], 1, "d2")]).fits  # L = 1: the largest
    assert not acct.quote("v", [([PureDP(0.5)], 1, "d1"), ([PureDP(0.75)], 1, "d1")]).fits
    assert [r.kind for r in acct.store.records("v")] == ["budget"]
