"""dp_pipeline.planning against computations made here: basic composition of pure ε and parallel
composition over partitions for the plan checks, and Laplace's b = Δ/ε for a calibrated share."""

from __future__ import annotations

import doctest
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dp_pipeline import ApproxDP, PlannedRelease, PrivacyAccountant, PureDP
from dp_pipeline.accounting import ledger_entries
from dp_pipeline.mechanisms import Laplace
from dp_pipeline.planning import PlanPart, calibrate_share, check_plans, share_terms
from dp_pipeline.planning import _plans as plans
from dp_pipeline.planning import _shares as shares_module

EPSILONS = st.integers(min_value=1, max_value=40).map(lambda k: Fraction(k, 40))


def _epsilon(guarantee: object) -> float:
    assert isinstance(guarantee, ApproxDP)  # PureDP is the δ = 0 case
    return guarantee.epsilon


def _event(epsilon: Fraction):  # type: ignore[no-untyped-def]
    return Laplace(epsilon=float(epsilon), sensitivity=1.0).event


@settings(max_examples=40, deadline=None)
@given(days=st.lists(EPSILONS, min_size=1, max_size=3), whole=EPSILONS, spent=EPSILONS)
def test_parts_are_checked_alone_and_together_as_parallel_composition_says(
    days: list[Fraction], whole: Fraction, spent: Fraction
) -> None:
    """Budget ε = 1 on a dataset partitioned with L = 1 (add/remove), basic composition of pure ε: one part
    per day (ε_d each) and one part on the whole dataset (ε_w) cost ε_w + max_d ε_d together (parallel
    composition over the days, sequential with the whole dataset), and each part alone its own ε. With ε_s
    spent before on the whole dataset, what remains is 1 − ε_s. Nothing is written."""
    total_alone = [*days, whole]
    together = whole + max(days)
    assume(all(abs(x - 1) > Fraction(1, 10**6) for x in [*total_alone, together]))
    assume(abs(together + spent - 1) > Fraction(1, 10**6))
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=1)
    acct.spend("visits", _event(spent))
    before = [record.hash for record in ledger_entries(acct.store, "visits")]
    parts = [PlanPart("visits", (_event(e),), partition=f"day{i}") for i, e in enumerate(days)]
    parts.append(PlanPart("visits", (_event(whole),)))

    checks = check_plans(acct, parts)

    assert [check.part for check in checks] == parts
    fits_whole = together <= 1
    fits_now = together + spent <= 1
    for check, alone in zip(checks, total_alone, strict=True):
        assert _epsilon(check.total) == pytest.approx(float(alone))
        assert check.fits_budget == (alone <= 1 and fits_whole)
        assert check.fits_remaining == (alone + spent <= 1 and fits_now)
        if alone <= 1 and not fits_whole:
            assert any("together they exceed the whole budget" in p for p in check.problems)
    assert [record.hash for record in ledger_entries(acct.store, "visits")] == before


def test_a_share_calibrates_laplace_noise_to_what_the_fixed_releases_leave() -> None:
    """A share of ε = 0.5 with a fixed release of ε = 0.2 beside one free Laplace release of Δ = 1: the free
    one gets ε = 0.3, so b = Δ/ε = 1/0.3 (the search stops within 1e-6, on the side of more noise); the
    plan's cost is at most the share. Without the free release, fixed releases above the share do not fit."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(4.0))
    rule, relation = share_terms(acct, "d", PureDP(0.5))
    fixed = [_event(Fraction(1, 5))]

    calibration = calibrate_share(
        fixed, [PlannedRelease("laplace", sensitivity=1.0)], PureDP(0.5), rule, relation
    )

    assert calibration.fits and calibration.allocation is not None
    scale = calibration.allocation[0].mechanism.scale
    assert 1 / 0.3 <= scale <= (1 / 0.3) * (1 + 1e-5)
    assert _epsilon(calibration.cost) <= 0.5
    assert calibration.events[0] == fixed[0] and len(calibration.events) == 2
    over = calibrate_share([_event(Fraction(3, 5))], [], PureDP(0.5), rule, relation)
    assert not over.fits and _epsilon(over.cost) == pytest.approx(0.6)


def test_a_share_in_another_currency_is_refused() -> None:
    from dp_pipeline import GaussianDP
    from dp_pipeline.exceptions import InvalidParameterError

    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(1.0))
    with pytest.raises(InvalidParameterError, match="not in the currency of its budget"):
        share_terms(acct, "d", GaussianDP(0.5))


def test_the_documented_examples_run() -> None:
    for module in (plans, shares_module):
        assert doctest.testmod(module, raise_on_error=True).failed == 0


def test_a_part_on_several_partitions_is_priced_on_each() -> None:
    """A plan file checked on two partitions (``dp-pipeline plan check --partition a --partition b``): under
    L = 2 each partition is charged the plan, so a plan of ε = 0.3 costs 2 × 0.3 = 0.6 of a budget ε = 1
    beside ε = 0.5 already spent on the whole dataset: 1.1, over what remains but within the whole budget."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("visits", PureDP(1.0), relation="add_remove", partitions=2)
    acct.spend("visits", _event(Fraction(1, 2)))
    part = PlanPart("visits", (_event(Fraction(3, 10)),), partition=("a", "b"))

    (check,) = check_plans(acct, [part])

    assert part.where == "partitions 'a', 'b'"
    assert check.fits_budget and not check.fits_remaining
