"""The timing channel of the exact exponential-mechanism sampler, as its docstring states it: the work (the
number of vectorised rounds of proposals) has a law that depends on the scores, through the acceptance
probability q = Σ wᵣe^{−γᵣ} / Σ wᵣ alone; the selected candidate does not depend on the work.

The round count R is observed by counting the rounds of proposal words the sampler draws. Rounds hold 16,
32, 64, … proposals, so P(R = 1) = 1 − (1 − q)¹⁶; q is computed here with mpmath from the utilities."""

from __future__ import annotations

from collections.abc import Iterator

import mpmath
import numpy as np
import pytest

from dp_pipeline.mechanisms import Exponential, secure_rng
from dp_pipeline.mechanisms.sampling import _choice

N = 64
DRAWS = 600


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The sizes of the rounds of proposals drawn (one entry per round)."""
    sizes: list[int] = []
    words = _choice.random_words

    def counted(rng: np.random.Generator, size: int) -> object:
        sizes.append(size)
        return words(rng, size)

    monkeypatch.setattr(_choice, "random_words", counted)
    yield sizes


def _acceptance(utilities: list[float], epsilon: float, sensitivity: float) -> mpmath.mpf:
    """q = mean of exp(−ε(u* − uᵣ)/(2Δ)) over unit-weight candidates (mpmath, 50 digits)."""
    mpmath.mp.dps = 50
    top = max(utilities)
    terms = [mpmath.exp(-mpmath.mpf(epsilon) * (top - u) / (2 * mpmath.mpf(sensitivity))) for u in utilities]
    return mpmath.fsum(terms) / len(utilities)


def _first_round_share(
    mech: Exponential, utilities: list[float], sizes: list[int]
) -> tuple[float, list[int]]:
    """The share of draws that ended in their first round, and the candidates drawn."""
    rng = secure_rng(2026)
    first, chosen = 0, []
    for _ in range(DRAWS):
        sizes.clear()
        chosen.append(mech.select(utilities, rng=rng))
        first += len(sizes) == 1
    return first / DRAWS, chosen


def test_the_samplers_work_depends_on_the_scores(rounds: list[int]) -> None:
    mech = Exponential(epsilon=1.0, sensitivity=1.0)
    level = [0.0] * N  # all tied: q = 1, every draw ends in its first round
    apart = [0.0] + [-100.0] * (N - 1)  # one clear winner: q ≈ 1/64
    share_level, _ = _first_round_share(mech, level, rounds)
    share_apart, chosen = _first_round_share(mech, apart, rounds)
    q_apart = _acceptance(apart, 1.0, 1.0)
    expected = float(1 - (1 - q_apart) ** 16)  # ≈ 0.22
    assert share_level == 1.0
    sd = (expected * (1 - expected) / DRAWS) ** 0.5
    assert abs(share_apart - expected) < 5 * sd
    assert set(chosen) == {0}  # the winner is chosen (the other candidates have e^{-50} of the mass)


def test_the_work_depends_on_the_scores_only_through_q(rounds: list[int]) -> None:
    """Two score vectors with the same acceptance probability q (a permutation, and the same gaps shifted
    by a constant) give the same law of the round count, though different candidates win."""
    mech = Exponential(epsilon=1.0, sensitivity=1.0)
    base = ([0.0] + [-20.0] * 15) * (N // 16)  # q ≈ 1/16: P(R = 1) ≈ 0.64
    shifted = [u + 40.0 for u in reversed(base)]
    assert _acceptance(base, 1.0, 1.0) == _acceptance(shifted, 1.0, 1.0)
    q = _acceptance(base, 1.0, 1.0)
    expected = float(1 - (1 - q) ** 16)
    sd = (expected * (1 - expected) / DRAWS) ** 0.5
    for utilities in (base, shifted):
        share, _ = _first_round_share(mech, utilities, rounds)
        assert abs(share - expected) < 5 * sd
