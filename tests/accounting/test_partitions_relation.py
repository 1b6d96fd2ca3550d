"""Partitions under each neighbouring relation: parallel composition holds under add/remove only.

Under replace-one a person may be replaced by one whose rows lie in other partitions, so releases on two
partitions both change: partitioned budgets require ``relation="add_remove"``. Ledgers written before, with
partitioned replace-one datasets, are re-read without parallel composition and reported by ``verify``. The
check for L = 1 is exact: every person's own totals fit. Each claim is checked against a computation made
here (quadrature of the output densities, closed forms, brute force over people).
"""

from __future__ import annotations

import math
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st
from scipy import integrate, stats

from dp_pipeline import ApproxDP, BudgetExceededError, PrivacyAccountant, PureDP
from dp_pipeline.accounting.testing import gaussian_event, laplace_event
from dp_pipeline.exceptions import InvalidParameterError, UnsupportedCompositionError

DATA = Path(__file__).parent / "data"


def _laplace_density(y: float, centre: float) -> float:
    return 0.5 * math.exp(-abs(y - centre))


def _moved_person_delta(epsilon: float) -> float:
    """δ(ε) between two ε = 1 counts (Laplace noise of scale 1) on days A and B when one person moves from
    A to B: the hockey-stick divergence of Lap(1)⊗Lap(0) against Lap(0)⊗Lap(1), by 2-d quadrature."""

    def excess(y_a: float, y_b: float) -> float:
        before = _laplace_density(y_a, 1.0) * _laplace_density(y_b, 0.0)
        after = _laplace_density(y_a, 0.0) * _laplace_density(y_b, 1.0)
        return max(0.0, before - math.exp(epsilon) * after)

    opts = {"points": [0.0, 1.0], "limit": 200}
    value, _ = integrate.nquad(excess, [[-30.0, 31.0], [-30.0, 31.0]], opts=[opts, opts])
    return float(value)


# ------------------------------------------------------------------------------------------ the breach


def test_two_counts_on_two_days_lose_two_when_a_person_moves_so_replace_one_partitions_are_refused() -> None:
    # independently: the tail event {y_A ≥ 1, y_B ≤ 0} has probability 1/4 with the person on day A and
    # e⁻²/4 with them moved to day B: a ratio of e², so the pair is not 1-DP ...
    tail = stats.laplace.sf(1.0, loc=1.0) * stats.laplace.cdf(0.0, loc=0.0)
    moved = stats.laplace.sf(1.0, loc=0.0) * stats.laplace.cdf(0.0, loc=1.0)
    assert tail / moved == pytest.approx(math.e**2)
    # ... and its exact δ at ε = 1 is far from 0
    assert _moved_person_delta(1.0) == pytest.approx(0.2418, abs=5e-4)
    acct = PrivacyAccountant("memory://")
    for relation in (None, "replace_one"):
        with pytest.raises(InvalidParameterError, match="relation='add_remove'") as info:
            acct.set_budget("visits", PureDP(1.0), relation=relation, partitions=1)
        assert info.value.parameter == "partitions"
        assert "randomized_response" in str(info.value)  # says what the fix implies
    assert acct.datasets() == []  # nothing was written


def test_under_add_remove_the_two_counts_lose_the_largest_day() -> None:
    """One person added or removed changes one day's count: the loss is 1, what is charged."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    for day in ("a", "b"):
        acct.spend("visits", laplace_event(1.0).under("add_remove"), partition=day)
    # independently: adding the person to day A moves one Laplace(1) centre by 1; the largest ratio is e
    ratio = max(_laplace_density(y, 1.0) / _laplace_density(y, 0.0) for y in (-3.0, -1.0, 0.0, 0.5, 1.0, 4.0))
    assert acct.spent("visits").epsilon == pytest.approx(math.log(ratio)) == 1.0
    assert "add_remove" in str(acct.spent("visits"))


def test_randomized_response_on_partitions_is_refused_on_a_partitioned_dataset() -> None:
    """Moving a person between days changes how many rows each day's randomized response returns (an
    unbounded loss); on the only relation that keeps partitions, add/remove, it is refused."""
    from dp_pipeline.mechanisms import BinaryRandomizedResponse

    mechanism = BinaryRandomizedResponse(epsilon=1.0)
    day_a = [1, 0, 1]
    moved = day_a[:-1]
    assert len(mechanism.randomize(day_a)) != len(moved)  # the row count shows the move, whatever ε
    acct = PrivacyAccountant("memory://")
    acct.set_budget("coded", PureDP(2.0), relation="add_remove", partitions=1)
    with pytest.raises(UnsupportedCompositionError, match="add_remove"):
        acct.spend("coded", mechanism, partition="a")
    assert len(acct.store.records("coded")) == 1


def test_a_partitioned_add_remove_dataset_cannot_become_replace_one() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("v", PureDP(1.0), relation="add_remove", partitions=1)
    with pytest.raises(InvalidParameterError, match="requires relation='add_remove'"):
        acct.set_budget("v", PureDP(1.0), relation="replace_one")
    acct.set_budget("flat", PureDP(1.0))
    with pytest.raises(InvalidParameterError, match="requires relation='add_remove'"):
        acct.set_budget("flat", PureDP(1.0), partitions=2)
    assert acct.budget("v").relation == "add_remove" and acct.budget("flat").partitions is None


# ------------------------------------------------------------------------------------ a ledger written before


@pytest.fixture
def old_ledger(tmp_path: Path) -> str:
    """The ledger data/make_ledger_partitions_replace_one.py wrote with the version that composed
    partitions of replace-one datasets in parallel."""
    path = tmp_path / "old.db"
    shutil.copy(DATA / "ledger_partitions_replace_one.db", path)
    return f"sqlite:///{path}"


def test_an_old_ledger_verifies_and_reports_its_replace_one_partitions(old_ledger: str) -> None:
    with PrivacyAccountant(old_ledger, create=False) as acct:
        report = acct.verify()
    assert set(report.datasets) == {"visits", "coded", "wards", "flat", "withdrawn"}
    findings = {finding.split("'")[1]: finding for finding in report.findings}
    assert set(findings) == {"visits", "coded", "wards", "withdrawn"}  # flat is not partitioned
    # visits: two ε = 1 counts on two days; every partition counts for every person: 2 > 1
    assert "ε = 2" in findings["visits"] and "ABOVE its budget ε = 1" in findings["visits"]
    # wards: 0.5 on the whole dataset, 1 on north, 1 on south: 2.5 ≤ 5
    assert "ε = 2.5" in findings["wards"] and "within its budget" in findings["wards"]
    # coded: randomized response on two days: no amount bounds it
    assert "unbounded" in findings["coded"] and "unbounded" not in findings["wards"]
    assert "unbounded" not in findings["withdrawn"]  # its randomized response was cancelled
    assert all("replace-one" in finding for finding in findings.values())
    assert "finding: dataset 'visits'" in str(report)


def test_an_old_replace_one_partitioned_dataset_is_priced_without_parallel_composition(
    old_ledger: str,
) -> None:
    import json

    written = json.loads((DATA / "ledger_partitions_replace_one.json").read_text(encoding="utf-8"))
    with PrivacyAccountant(old_ledger, create=False) as acct:
        assert written["spent_as_written"]["visits"] == 1.0  # what the old version reported
        assert acct.spent("visits").epsilon == 2.0  # 1 + 1: both days count for the moved person
        assert acct.remaining("visits").epsilon == 0.0
        assert acct.spent("wards").epsilon == 2.5 and acct.remaining("wards").epsilon == 2.5
        before = acct.store.records("wards")
        with pytest.raises(InvalidParameterError, match="replace-one") as info:
            acct.spend("wards", PureDP(0.1), partition="north")
        assert info.value.parameter == "partition" and "relation='add_remove'" in str(info.value)
        with pytest.raises(InvalidParameterError, match="replace-one"):
            acct.quote("wards", [([PureDP(0.1)], 1, "east")])
        assert acct.store.records("wards") == before  # refused: nothing written
        acct.spend("wards", PureDP(2.5))  # the whole dataset, against the sum of every partition
        with pytest.raises(BudgetExceededError):
            acct.spend("wards", PureDP(0.25))
        with pytest.raises(BudgetExceededError):
            acct.spend("visits", PureDP(0.1))
        acct.set_budget("wards", PureDP(6.0), reason="raised")  # the old declaration may be kept ...
        with pytest.raises(InvalidParameterError, match="active spend"):
            acct.set_budget("wards", PureDP(6.0), relation="add_remove")  # ... not changed while active
        assert len(acct.verify().findings) == 4


def _rr_outputs_per_day(rows_a: list[int], rows_b: list[int]) -> tuple[int, int]:
    """How many answers randomized response releases on days A and B: one per row, whatever ε."""
    from dp_pipeline.mechanisms import BinaryRandomizedResponse

    mechanism = BinaryRandomizedResponse(epsilon=1.0)
    return len(mechanism.randomize(rows_a)), len(mechanism.randomize(rows_b))


def test_an_old_dataset_with_randomized_response_on_partitions_is_exhausted_and_refuses_every_spend(
    old_ledger: str,
) -> None:
    """``coded`` holds randomized response on days a and b under replace-one. Independently: moving one
    person from day a to day b changes how many answers each day releases, an event of probability 1 on one
    dataset and 0 on its neighbour, so no ε bounds the loss: the dataset is spent, not at a finite sum."""
    before, moved = _rr_outputs_per_day([1, 0], [1]), _rr_outputs_per_day([1], [0, 1])
    assert before != moved  # P[lengths = before] is 1 on one neighbour, 0 on the other: the ratio is ∞
    with PrivacyAccountant(old_ledger, create=False) as acct:
        spent, remaining = acct.spent("coded"), acct.remaining("coded")
        assert math.isinf(spent.epsilon) and remaining.epsilon == 0.0 and remaining.delta == 0.0
        assert spent.unbounded is not None and spent.unbounded == remaining.unbounded
        assert "seq 2, 4" in spent.unbounded and "unbounded" in str(spent) and "unbounded" in str(remaining)
        records = acct.store.records("coded")
        head = acct.store.head("coded")
        refusals = (
            lambda: acct.spend("coded", PureDP(0.01)),  # the whole dataset, however small
            lambda: acct.reserve("coded", PureDP(0.01)),
            lambda: acct.spend_plan("coded", [PureDP(0.01)]),
        )
        for refused in refusals:
            with pytest.raises(InvalidParameterError, match="treated as spent") as info:
                refused()
            assert info.value.parameter == "dataset" and "declare a new dataset" in str(info.value)
        assert not acct.quote("coded", [([PureDP(0.01)], 1, None)]).fits
        assert acct.store.records("coded") == records and acct.store.head("coded") == head  # nothing written
        # the same reading as verify's, which names the same records
        finding = next(f for f in acct.verify().findings if "'coded'" in f)
        assert "seq 2, 4" in finding
        # the reading touches only that dataset: the others keep finite amounts and take spends
        assert acct.spent("visits").unbounded is None and acct.spent("wards").epsilon == 2.5
        acct.spend("wards", PureDP(0.5))


def test_a_cancelled_randomized_response_on_a_partition_does_not_exhaust_an_old_dataset(
    old_ledger: str,
) -> None:
    """``withdrawn``: randomized response reserved on day a and cancelled (nothing released), then an
    ε = 0.5 count on day b: read without parallel composition it has spent 0.5 of ε = 2."""
    with PrivacyAccountant(old_ledger, create=False) as acct:
        assert acct.spent("withdrawn").unbounded is None
        assert acct.spent("withdrawn").epsilon == 0.5 and acct.remaining("withdrawn").epsilon == 1.5
        acct.spend("withdrawn", PureDP(1.5))
        with pytest.raises(BudgetExceededError):
            acct.spend("withdrawn", PureDP(0.01))
        acct.verify()


def test_the_row_level_kinds_are_those_of_the_mechanisms_that_state_replace_one() -> None:
    """The kinds the reading recognises are exactly the event kinds of the mechanisms that state
    replace-one themselves (row-level: one output per row), found here by walking the mechanism classes."""
    from dp_pipeline import mechanisms
    from dp_pipeline.accounting._verify import ROW_LEVEL_KINDS

    def subclasses(cls: type) -> list[type]:
        return [cls, *(c for sub in cls.__subclasses__() for c in subclasses(sub))]

    row_level = {
        c.event_kind
        for c in subclasses(mechanisms.Mechanism)
        if getattr(c, "event_relation", None) == "replace_one"
    }
    assert row_level == ROW_LEVEL_KINDS


def test_datasets_not_declared_by_an_earlier_version_read_no_records_to_price(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("v", PureDP(2.0), relation="add_remove", partitions=1)
    acct.set_budget("flat", PureDP(2.0))

    def no_scan(dataset: str) -> None:
        raise AssertionError(f"records of {dataset!r} read")

    monkeypatch.setattr(acct.store, "records", no_scan)
    acct.spend("v", laplace_event(1.0).under("add_remove"), partition="a")
    acct.spend("flat", PureDP(1.0))
    assert acct.spent("v").unbounded is None and acct.remaining("flat").epsilon == 1.0
    assert acct.quote("v", [([PureDP(0.5)], 1, "b")]).fits


# --------------------------------------------------------------------------------- exact check for L = 1


def _worst_gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of μ-GDP, Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su, Cor. 2.13)."""
    return float(
        stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)
    )


def test_zcdp_admits_a_pure_day_and_gaussian_days_while_every_person_fits() -> None:
    """A pure ε = 1 release on day A, then Gaussian releases (μ = 0.05) on day B: a person lies in one day,
    so the day-A person loses pure ε = 1 and the day-B person only the Gaussians. Taking the largest ε and
    the largest ρ of different days refused the first Gaussian; every person's own totals admit 19."""
    budget = ApproxDP(1.0, 1e-6)
    acct = PrivacyAccountant("memory://")
    acct.set_budget("v", budget, rule="zcdp", relation="add_remove", partitions=1)
    acct.spend("v", laplace_event(1.0), partition="a")
    fitted = 0
    while True:
        try:
            acct.spend("v", gaussian_event(0.05), partition="b")
        except BudgetExceededError:
            break
        fitted += 1
        # independently, the worst person of each day: day A pure ε = 1 (δ = 0); day B the composed
        # Gaussians, μ = √n·0.05, read at ε_B
        assert _worst_gaussian_delta(math.sqrt(fitted) * 0.05, budget.epsilon) <= budget.delta
    assert fitted == 19  # ρ = 0.05²/2 each, within ρ_B ≈ 0.02436; the per-amount bound admitted 0
    with pytest.raises(BudgetExceededError):
        acct.spend("v", gaussian_event(0.05))  # the whole dataset: the day-B person would exceed ρ_B
    acct.verify()


_DAYS = ("a", "b", "c")


@st.composite
def _approx_spends(draw: Any) -> list[tuple[Fraction, Fraction, str | None]]:
    eps = st.sampled_from([Fraction(1, 8), Fraction(1, 4), Fraction(1, 2)])
    deltas = st.sampled_from([Fraction(0), Fraction(1, 2**22), Fraction(1, 2**20)])
    return [
        (draw(eps), draw(deltas), draw(st.one_of(st.none(), st.sampled_from(_DAYS))))
        for _ in range(draw(st.integers(1, 12)))
    ]


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(spends=_approx_spends())
def test_one_partition_per_person_admits_exactly_what_every_person_can_afford(
    spends: list[tuple[Fraction, Fraction, str | None]],
) -> None:
    """Basic composition of (ε, δ) releases, L = 1: accepted iff, computed here, the person of every day (and
    the person in none) has Σε ≤ 1 and Σδ ≤ 2⁻¹⁹, counting the whole-dataset releases and that day's."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("v", ApproxDP(1.0, 2.0**-19), relation="add_remove", partitions=1)
    accepted: list[tuple[Fraction, Fraction, str | None]] = []

    def everyone_fits(spent: list[tuple[Fraction, Fraction, str | None]]) -> bool:
        for day in (*_DAYS, None):
            mine = [(e, d) for e, d, on in spent if on is None or on == day]
            if sum(e for e, _ in mine) > 1 or sum(d for _, d in mine) > Fraction(1, 2**19):
                return False
        return True

    for epsilon, delta, day in spends:
        expected = everyone_fits([*accepted, (epsilon, delta, day)])
        try:
            acct.spend("v", ApproxDP(float(epsilon), float(delta)), partition=day)
        except BudgetExceededError:
            assert not expected
            continue
        assert expected
        accepted.append((epsilon, delta, day))
    acct.verify()
