"""The re-draw check of tests/statistical.py: one rejection is forgiven once, two in a row fail, and its
chance failure rate under the null hypothesis is α²."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from tests.statistical import ALPHA, assert_not_rejected


def _sequence(pvalues: list[float | list[float]]) -> tuple[Callable[[], float | list[float]], list[int]]:
    """A draw returning the given p-values in turn, and the list counting its calls."""
    calls: list[int] = []

    def draw() -> float | list[float]:
        calls.append(1)
        return pvalues[len(calls) - 1]

    return draw, calls


def test_a_first_draw_that_passes_is_not_redrawn() -> None:
    draw, calls = _sequence([0.5, 0.0])
    assert_not_rejected(draw)
    assert len(calls) == 1


def test_one_rejection_is_redrawn_and_forgiven() -> None:
    draw, calls = _sequence([ALPHA / 2, 0.3])
    assert_not_rejected(draw)
    assert len(calls) == 2


def test_several_pvalues_of_one_draw_are_tested_at_alpha_over_their_number() -> None:
    draw, calls = _sequence([[0.9, 0.75 * ALPHA, 0.6]])  # above α/3: not a rejection
    assert_not_rejected(draw)
    assert len(calls) == 1


@pytest.mark.parametrize("second", [ALPHA, [0.9, ALPHA / 2]])
def test_two_rejections_in_a_row_fail(second: float | list[float]) -> None:
    draw, calls = _sequence([[0.5, ALPHA / 2], second])  # two p-values: each tested at α/2
    with pytest.raises(AssertionError, match="rejected on two independent draws"):
        assert_not_rejected(draw)
    assert len(calls) == 2


def test_the_chance_failure_rate_is_alpha_squared() -> None:
    """Under the null hypothesis (uniform p-values) the check at α = 0.1 fails with probability 0.01."""
    rng = np.random.default_rng(3)
    trials, alpha = 20_000, 0.1
    failures = 0
    for _ in range(trials):
        try:
            assert_not_rejected(lambda: float(rng.random()), alpha)
        except AssertionError:
            failures += 1
    assert stats.binomtest(failures, trials, alpha**2).pvalue > 1e-3  # seeded: the same every run

