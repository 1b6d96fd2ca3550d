"""The empirical auditor over every mechanism: within the claim for real ones, beyond it for broken ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dp_pipeline import ApproxDP, InvalidParameterError, PureDP
from dp_pipeline.guarantees import Guarantee
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    BoundedStaircase,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
)
from dp_pipeline.testing import AuditReport, audit

CATEGORIES = ("a", "b", "c")

# (name, the mechanism, neighbours, the same mechanism with about half the noise)
CASES: list[tuple[str, Any, tuple[Any, Any], Any]] = [
    ("laplace", Laplace(epsilon=1.0, sensitivity=1.0), (0.0, 1.0), Laplace(epsilon=2.0, sensitivity=1.0)),
    (
        "gaussian",
        Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0),
        (0.0, 1.0),
        Gaussian(epsilon=4.0, delta=1e-5, sensitivity=1.0),
    ),
    (
        "gaussian_mu",
        Gaussian.from_mu(mu=1.0, sensitivity=1.0),
        (0.0, 1.0),
        Gaussian.from_mu(mu=2.0, sensitivity=1.0),
    ),
    ("binary_rr", BinaryRandomizedResponse(epsilon=1.0), (0, 1), BinaryRandomizedResponse(epsilon=2.0)),
    (
        "k_rr",
        KRandomizedResponse(epsilon=1.0, categories=CATEGORIES),
        ("a", "b"),
        KRandomizedResponse(epsilon=2.0, categories=CATEGORIES),
    ),
    (
        "staircase",
        Staircase(epsilon=1.0, sensitivity=1.0),
        (0.0, 1.0),
        Staircase(epsilon=2.0, sensitivity=1.0),
    ),
    (
        "bounded_laplace",
        BoundedLaplace(epsilon=1.0, lower=0.0, upper=10.0),
        (0.0, 10.0),
        BoundedLaplace(epsilon=2.0, lower=0.0, upper=10.0),
    ),
    (
        "bounded_staircase",
        BoundedStaircase(epsilon=1.0, lower=10.0, upper=20.0, gamma=0.3),
        (10.0, 20.0),
        BoundedStaircase(epsilon=2.0, lower=10.0, upper=20.0, gamma=0.3),
    ),
]


class Claiming:
    """A mechanism that releases like ``inner`` but claims ``claim``: a deliberately broken mechanism."""

    def __init__(self, inner: Any, claim: Guarantee) -> None:
        self.inner, self.guarantee = inner, claim

    def randomize(self, values: Any, rng: Any = None) -> Any:
        return self.inner.randomize(values, rng=rng)


@pytest.mark.parametrize(("name", "mechanism", "pair", "broken"), CASES, ids=[c[0] for c in CASES])
def test_audit_stays_within_the_claim(name: str, mechanism: Any, pair: tuple[Any, Any], broken: Any) -> None:
    report = audit(mechanism, pair, samples=200_000, seed=1)
    assert isinstance(report, AuditReport)
    assert report.consistent, str(report)
    assert report.epsilon_lower_bound <= report.claimed_epsilon
    # the audit has found a real privacy loss, not nothing (it is not a test that cannot fail)
    assert report.epsilon_lower_bound > 0.3 * report.claimed_epsilon, str(report)


@pytest.mark.parametrize(("name", "mechanism", "pair", "broken"), CASES, ids=[c[0] for c in CASES])
def test_audit_catches_a_mechanism_with_half_the_noise(
    name: str, mechanism: Any, pair: tuple[Any, Any], broken: Any
) -> None:
    liar = Claiming(broken, mechanism.guarantee)
    report = audit(liar, pair, samples=200_000, seed=2)
    assert not report.consistent, str(report)
    assert report.epsilon_lower_bound > report.claimed_epsilon


def test_audit_is_deterministic_and_reports_its_claim() -> None:
    m = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    a, b = audit(m, (0.0, 1.0), samples=20_000, seed=4), audit(m, (0.0, 1.0), samples=20_000, seed=4)
    assert a == b
    assert (a.claimed_epsilon, a.claimed_delta) == (1.0, 1e-5)
    assert "claim ε = 1, δ = 1e-05" in str(a)
    mu = audit(Gaussian.from_mu(mu=1.0, sensitivity=1.0), [(0.0, 1.0), (1.0, 2.0)], samples=2_000, delta=1e-3)
    expected = Gaussian.from_mu(mu=1.0, sensitivity=1.0).gdp.to_approx_dp(1e-3)
    assert (mu.claimed_epsilon, mu.claimed_delta) == (expected.epsilon, expected.delta)


def test_audit_error_probability_is_at_most_alpha() -> None:
    # many small audits of an exactly ε-DP mechanism: the share of bounds above ε estimates the error
    # probability, which must not exceed α = 0.2 (binomial slack for 60 audits included)
    m = BinaryRandomizedResponse(epsilon=1.0)
    over = sum(not audit(m, (0, 1), samples=400, alpha=0.2, seed=s).consistent for s in range(60))
    assert over <= 20


def test_audit_rejects_bad_arguments() -> None:
    m = Laplace(epsilon=1.0, sensitivity=1.0)
    with pytest.raises(InvalidParameterError, match="alpha"):
        audit(m, (0.0, 1.0), alpha=1.5)
    with pytest.raises(InvalidParameterError, match="samples"):
        audit(m, (0.0, 1.0), samples=5)
    with pytest.raises(InvalidParameterError, match="neighbours"):
        audit(m, [(0.0, 1.0, 2.0)])


def test_claims_are_read_from_the_guarantee() -> None:
    liar = Claiming(Laplace(epsilon=1.0, sensitivity=1.0), ApproxDP(1.0, 0.0))
    assert audit(liar, (0.0, 1.0), samples=1000).claimed_delta == 0.0
    assert (
        audit(
            Claiming(Laplace(epsilon=1.0, sensitivity=1.0), PureDP(3.0)), (0.0, 1.0), samples=1000
        ).claimed_epsilon
        == 3.0
    )
    assert np.isfinite(
        audit(Laplace(epsilon=1.0, sensitivity=1.0), (0.0, 1.0), samples=1000).epsilon_lower_bound
    )
