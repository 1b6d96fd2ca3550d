"""The exponential mechanism: exact probabilities, exact sampling, its event and its errors."""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dp_pipeline import PureDP
from dp_pipeline.accounting import compose_plan, group_event
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import InvalidParameterError
from dp_pipeline.guarantees import GaussianDP
from dp_pipeline.mechanisms import Exponential, secure_rng
from dp_pipeline.mechanisms.sampling import _exact
from dp_pipeline.testing import audit


def brute_force(
    utilities: list[float], weights: list[int], eps: float, sens: float, monotone: bool
) -> list[float]:
    """P(r) = w_r·exp(c·ε·u_r/Δu) / Σ, c = 1/2 (or 1 when monotone), in 60-digit arithmetic, unshifted."""
    with mpmath.workdps(60):
        c = mpmath.mpf(1) if monotone else mpmath.mpf(1) / 2
        mass = [
            w * mpmath.exp(c * mpmath.mpf(eps) * mpmath.mpf(u) / mpmath.mpf(sens))
            for u, w in zip(utilities, weights, strict=True)
        ]
        total = mpmath.fsum(mass)
        return [float(m / total) for m in mass]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-30.0, 30.0), st.integers(0, 5)), min_size=1, max_size=6).filter(
        lambda rows: any(w > 0 for _, w in rows)
    ),
    st.floats(0.01, 5.0),
    st.floats(0.1, 10.0),
    st.booleans(),
)
def test_pmf_matches_a_brute_force_computation(rows: Any, eps: float, sens: float, monotone: bool) -> None:
    utilities, weights = [u for u, _ in rows], [w for _, w in rows]
    mech = Exponential(epsilon=eps, sensitivity=sens, monotone=monotone)
    expected = brute_force(utilities, weights, eps, sens, monotone)
    np.testing.assert_allclose(mech.pmf(utilities, np.array(weights)), expected, rtol=1e-12, atol=1e-300)


def _chi_square(mech: Exponential, utilities: list[float], weights: list[int], n: int, seed: int) -> float:
    rng = secure_rng(seed)
    draws = [mech.select(utilities, np.array(weights), rng) for _ in range(n)]
    observed = np.bincount(draws, minlength=len(utilities))
    return float(stats.chisquare(observed, n * mech.pmf(utilities, np.array(weights))).pvalue)


@pytest.mark.slow
def test_sampled_frequencies_match_the_pmf() -> None:
    mech = Exponential(epsilon=1.3, sensitivity=1.0)
    assert _chi_square(mech, [0.0, -1.0, -2.5, -0.5, -6.0], [1, 2, 3, 1, 4], 40_000, 1) > 1e-3


@pytest.mark.slow
def test_the_exact_continuation_has_the_same_law(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_exact, "FORCE_EXACT", True)
    mech = Exponential(epsilon=2.0, sensitivity=1.0, monotone=True)
    assert _chi_square(mech, [0.0, -1.0, -0.25], [1, 1, 2], 3_000, 2) > 1e-3


def test_zero_weight_candidates_are_never_selected() -> None:
    mech = Exponential(epsilon=1.0, sensitivity=1.0)
    rng = secure_rng(3)
    assert {mech.select([5.0, 0.0, -1.0], np.array([0, 1, 1]), rng) for _ in range(300)} == {1, 2}


class _OneUtilityRelease:
    """A selection on one of two neighbouring datasets (0 or 1): utilities of four candidates that change by
    at most Δu = 1 between them, the worst case of the exponential mechanism."""

    def __init__(self, mech: Exponential) -> None:
        self.mech, self.guarantee = mech, mech.guarantee

    def randomize(self, values: Any, rng: Any = None) -> Any:
        utilities = {0: [0.0, -1.0, -2.0, -3.0], 1: [-1.0, 0.0, -1.0, -2.0]}
        return np.array([self.mech.select(utilities[int(v)], rng=rng) for v in np.asarray(values)])


@pytest.mark.slow
def test_the_auditor_finds_no_violation_but_sees_the_loss() -> None:
    report = audit(_OneUtilityRelease(Exponential(epsilon=1.0, sensitivity=1.0)), (0, 1), samples=20_000)
    assert report.consistent
    assert report.epsilon_lower_bound > 0.5  # the worst case loses nearly ε: the audit has power


def test_guarantee_event_and_composition() -> None:
    mech = Exponential(epsilon=0.7, sensitivity=2.0)
    event = mech.event
    assert event.kind == "exponential" and event.guarantee == PureDP(0.7) and event.sensitivity == 2.0
    assert PrivacyEvent.from_dict(event.to_dict()) == event
    total = compose_plan([event] * 3, delta=0.0).guarantee
    assert total.epsilon == pytest.approx(2.1) and total.delta == 0.0
    tight = compose_plan([event] * 20, delta=1e-6).guarantee
    assert tight.epsilon < 14.0  # the pure-ε dominating pair composes better than 20ε
    assert group_event(event, 3).guarantee == PureDP(0.7).group(3)
    wrong = PrivacyEvent(kind="exponential", guarantee=GaussianDP(1.0))
    with pytest.raises(InvalidParameterError, match="pure"):
        compose_plan([wrong], delta=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"utilities": [1.0, float("nan")]}, "utilities"),
        ({"utilities": [[1.0], [2.0]]}, "1-D"),
        ({"utilities": []}, "utilities"),
        ({"utilities": [31337.5, 2.0], "weights": np.array([1, -2])}, "weights"),
        ({"utilities": [31337.5, 2.0], "weights": np.array([0, 0])}, "weights"),
        ({"utilities": [31337.5, 2.0], "weights": np.array([0.5, 1.0])}, "weights"),
    ],
)
def test_bad_input_is_refused_without_quoting_it(kwargs: dict[str, Any], match: str) -> None:
    mech = Exponential(epsilon=1.0, sensitivity=1.0)
    with pytest.raises(InvalidParameterError, match=match) as info:
        mech.select(**kwargs)
    assert "31337" not in str(info.value)


def test_constructor_is_keyword_only_and_validated() -> None:
    with pytest.raises(InvalidParameterError, match="keyword"):
        Exponential(1.0, 1.0)  # type: ignore[misc]
    with pytest.raises(InvalidParameterError):
        Exponential(epsilon=-1.0, sensitivity=1.0)
    with pytest.raises(InvalidParameterError):
        Exponential(epsilon=1.0, sensitivity=0.0)
