"""The Spender protocol: a dataset handle, a reservation and UNACCOUNTED, and the one edge that makes a
user's ``accountant=``/``dataset=`` a spender."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from fractions import Fraction
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from dp_pipeline import BudgetExceededError, InvalidParameterError, PrivacyAccountant, PureDP
from dp_pipeline._spending import as_spender
from dp_pipeline.accounting import ledger_entries, open_reservations
from dp_pipeline.accounting._spender import UNACCOUNTED, DatasetHandle, Unaccounted
from dp_pipeline.accounting.testing import laplace_event


def _ledger(epsilon: float = 1.0) -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(epsilon))
    return acct


def _kinds(acct: PrivacyAccountant, dataset: str = "visits") -> list[str]:
    return [record.kind for record in ledger_entries(acct.store, dataset)]


# ------------------------------------------------------------------------------------------ the handle


def test_a_handle_reports_and_charges_its_dataset_as_the_accountant_does() -> None:
    acct = _ledger()
    visits = acct.dataset("visits")
    assert visits == DatasetHandle(acct, "visits") and visits.name == "visits"
    visits.spend(PureDP(0.25), label="direct")
    with visits.reserve(PureDP(0.125), key="held"):
        pass
    assert visits.spent() == acct.spent("visits")
    assert visits.remaining() == acct.remaining("visits")
    assert visits.budget() == acct.budget("visits")
    assert visits.history() == acct.history("visits")
    assert [e.label for e in visits.history(limit=1)] == [None]
    # independently: basic composition of pure releases adds their ε exactly
    assert Fraction(visits.spent().epsilon) == Fraction(1, 4) + Fraction(1, 8)
    assert visits.relation() == acct.budget("visits").relation and visits.partitions_limit() is None


def test_a_handle_reports_a_partition_as_the_accountant_does() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    visits = acct.dataset("visits")
    visits.spend(PureDP(0.25), partition="north")
    visits.spend(PureDP(0.125))
    assert visits.spent(partition="north") == acct.spent("visits", partition="north")
    assert visits.remaining(partition="south") == acct.remaining("visits", partition="south")
    # independently: a person in north alone lost 1/4 + 1/8; one in south only the whole-dataset 1/8
    assert Fraction(visits.spent(partition="north").epsilon) == Fraction(3, 8)
    assert Fraction(visits.remaining(partition="south").epsilon) == 1 - Fraction(1, 8)


def test_a_handle_is_frozen_and_its_copies_charge_the_same_ledger(tmp_path: Path) -> None:
    acct = PrivacyAccountant(f"sqlite:///{tmp_path / 'ledger.db'}")
    acct.set_budget("visits", PureDP(1.0))
    visits = acct.dataset("visits")
    with pytest.raises(dataclasses.FrozenInstanceError):
        visits.name = "other"  # type: ignore[misc]
    assert copy.deepcopy(visits) is visits and copy.copy(visits) is visits
    again = pickle.loads(pickle.dumps(visits))
    assert again.name == "visits" and again.accountant.store.url == acct.store.url
    again.spend(PureDP(0.5), label="from the copy")
    assert [e.label for e in acct.history("visits")] == ["from the copy"]
    acct.close()
    again.accountant.close()


@pytest.mark.parametrize("name", ["", 3, None])
def test_a_handle_needs_a_dataset_name(name: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        _ledger().dataset(name)
    assert info.value.parameter == "dataset"


def test_a_handle_holds_the_release_before_its_block_and_commits_after() -> None:
    acct = _ledger()
    visits = acct.dataset("visits")
    event = laplace_event(0.25)
    with visits.hold(event, label="read"):
        assert [e.kind for e in open_reservations(acct.store, "visits")] == ["reserve"]  # before any read
    assert open_reservations(acct.store, "visits") == [] and _kinds(acct) == ["budget", "reserve", "commit"]
    with pytest.raises(InvalidParameterError), visits.hold(event, label="refused data"):
        raise InvalidParameterError("the data failed a check", "df")
    assert _kinds(acct)[-2:] == ["reserve", "release"]  # cancelled: returned to the budget
    with pytest.raises(RuntimeError), visits.hold(event, label="failed after reading"):
        raise RuntimeError("the data may have been read")
    assert _kinds(acct)[-2:] == ["reserve", "commit"]
    assert Fraction(acct.spent("visits").epsilon) == Fraction(1, 2)


def test_a_refused_hold_never_enters_its_block_and_changes_nothing() -> None:
    acct = _ledger(0.25)
    before = acct.store.records("visits")
    entered = []
    with pytest.raises(BudgetExceededError), acct.dataset("visits").hold(laplace_event(0.5), label="x"):
        entered.append(True)
    assert entered == [] and acct.store.records("visits") == before


# ------------------------------------------------------------------------------------------ a reservation


def test_a_reservation_pays_when_its_block_ends_and_never_for_refused_data() -> None:
    acct = _ledger()
    task = acct.reserve("visits", PureDP(0.5), key="task")
    event = laplace_event(0.125)
    with task.hold(event, label="read"):
        assert acct.history("visits")[-1].paid_from is None  # the dataset was charged by the reservation
    with pytest.raises(InvalidParameterError), task.hold(event, label="refused data"):
        raise InvalidParameterError("the data failed a check", "df")
    with pytest.raises(RuntimeError), task.hold(event, label="failed after reading"):
        raise RuntimeError("the data may have been read")
    paid = [e.label for e in acct.history("visits") if e.paid_from == "task"]
    assert paid == ["read", "failed after reading"]
    assert Fraction(task.spent().epsilon) == Fraction(1, 4)
    assert task.relation() == "replace_one" and task.partitions_limit() is None


# ------------------------------------------------------------------------------------------ UNACCOUNTED


def test_unaccounted_is_one_object_that_charges_nothing() -> None:
    assert Unaccounted() is UNACCOUNTED and pickle.loads(pickle.dumps(UNACCOUNTED)) is UNACCOUNTED
    assert copy.deepcopy(UNACCOUNTED) is UNACCOUNTED and repr(UNACCOUNTED) == "UNACCOUNTED"
    with UNACCOUNTED.hold(laplace_event(1.0), label="free"):
        pass
    assert UNACCOUNTED.relation() == "replace_one" and UNACCOUNTED.partitions_limit() is None


@pytest.mark.parametrize("given", [UNACCOUNTED, "unaccounted"])
def test_the_string_and_the_object_are_one_spender(given: Any) -> None:
    assert as_spender(given, None) is UNACCOUNTED
    assert as_spender(given, "ignored") is UNACCOUNTED


# ------------------------------------------------------------------------------------------ the edge


def test_an_accountant_and_a_dataset_make_a_handle_and_a_handle_or_reservation_is_kept() -> None:
    acct = _ledger()
    assert as_spender(acct, "visits") == acct.dataset("visits")
    visits = acct.dataset("visits")
    assert as_spender(visits, None) is visits and as_spender(visits, "visits") is visits
    task = acct.reserve("visits", PureDP(0.5), key="task")
    assert as_spender(task, None) is task and as_spender(task, "visits") is task


class _DuckAccountant:
    """Has ``spend`` and ``reserve``, as an accountant does, but is none: never probed, refused."""

    def spend(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("charged")

    reserve = spend


@pytest.mark.parametrize("accountant", [None, "memory://", "Unaccounted", 3, _DuckAccountant()])
def test_what_is_not_a_spender_is_refused_naming_accountant(accountant: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        as_spender(accountant, "visits")
    assert info.value.parameter == "accountant"
    assert "PrivacyAccountant" in str(info.value)


@pytest.mark.parametrize("dataset", [None, "", 3])
def test_an_accountant_needs_its_dataset(dataset: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        as_spender(_ledger(), dataset)
    assert info.value.parameter == "dataset"


def test_a_bound_spender_refuses_another_dataset_naming_it_without_charging() -> None:
    acct = _ledger()
    acct.set_budget("other", PureDP(1.0))
    task = acct.reserve("visits", PureDP(0.5), key="task")
    before = (acct.store.records("visits"), acct.store.records("other"))
    for spender in (acct.dataset("visits"), task):
        for dataset in ("other", "visits/2026-11-24"):
            with pytest.raises(InvalidParameterError) as info:
                as_spender(spender, dataset)
            assert info.value.parameter == "dataset"
    assert (acct.store.records("visits"), acct.store.records("other")) == before


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=10))
def test_holds_admit_exactly_what_fits_and_a_refusal_changes_nothing(halvings: list[int]) -> None:
    """Laplace releases of ε = 2^-j (Δ = 1, so the scale 2^j and the charge are exact) against a budget of
    ε = 1: by basic composition (computed here in exact fractions) a release is admitted iff the running
    sum plus its ε is at most 1; a refused one leaves the ledger's records exactly as they were."""
    acct = _ledger(1.0)
    visits = acct.dataset("visits")
    total = Fraction(0)
    for j in halvings:
        epsilon = Fraction(1, 2**j)
        before = acct.store.records("visits")
        if total + epsilon <= 1:
            with visits.hold(laplace_event(float(epsilon)), label=f"2^-{j}"):
                pass
            total += epsilon
        else:
            with pytest.raises(BudgetExceededError), visits.hold(laplace_event(float(epsilon)), label="no"):
                raise AssertionError("a refused hold entered its block")
            assert acct.store.records("visits") == before
    assert Fraction(visits.spent().epsilon) == total


def test_the_spender_and_the_reservation_never_import_the_accountant() -> None:
    """They talk to it through small protocols (``Ledger``, ``_Payments``): no import of it at all, not
    even for type checking, so the accountant can import them."""
    import ast
    from pathlib import Path

    import dp_pipeline.accounting._reservation as reservation
    import dp_pipeline.accounting._spender as spender

    for module in (spender, reservation):
        tree = ast.parse(Path(str(module.__file__)).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "dp_pipeline.accounting._accountant" not in imported, module.__name__
        outside = ("dp_pipeline.frames", "dp_pipeline._spending")
        assert not {m for m in imported if m and m.startswith(outside)}
