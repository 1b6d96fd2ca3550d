"""The fast path (``fast_rng``) is not floating-point safe, and what the library does about it: the events of
such releases carry the marker ``sampler="fast"`` (which changes no price) and the process warns once.

The breach itself is reproduced against an independent model of numpy's sampler: numpy's ``Generator.laplace``
draws U = j·2⁻⁵³ (j = the top 53 bits of a 64-bit word) and returns ``−b·log(2 − U − U)`` for U ≥ ½, else
``b·log(U + U)`` (numpy/random/src/distributions/distributions.c, ``random_laplace``), with the C library's
``log`` (which :func:`math.log` calls). For an input t the fast release is the float t + X, a monotone
function of j, so whether a float y can be output for t is decided by a binary search over j.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dp_pipeline import ApproxDP, PrivacyAccountant, PureDP
from dp_pipeline.events import PrivacyEvent, sampler_of
from dp_pipeline.exceptions import FastSamplerWarning
from dp_pipeline.mechanisms import Gaussian, Laplace, fast_rng, secure_rng
from dp_pipeline.mechanisms.sampling import _sources, drawn_event

_GRID = 2**53


def _numpy_laplace(j: int, scale: float) -> float:
    """numpy's Laplace(0, scale) sample for the uniform U = j·2⁻⁵³ (as ``random_laplace`` computes it)."""
    u = j / _GRID
    if u >= 0.5:
        return 0.0 - scale * math.log(2.0 - u - u)
    return 0.0 + scale * math.log(u + u)


def _reachable(y: float, t: float, scale: float) -> bool:
    """Whether the fast Laplace release of input ``t`` can output the float ``y``: some j in [1, 2⁵³) with
    t + X(j) == y (t + X(j) is non-decreasing in j, so the least j with t + X(j) ≥ y decides)."""
    lo, hi = 1, _GRID - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if t + _numpy_laplace(mid, scale) < y:
            lo = mid + 1
        else:
            hi = mid
    return t + _numpy_laplace(lo, scale) == y


@pytest.fixture
def warned_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that has not warned of the fast path yet."""
    monkeypatch.setattr(_sources, "_fast_warned", [])


def test_the_model_of_numpys_laplace_sampler_is_exact() -> None:
    words = np.random.Generator(np.random.PCG64(11)).random(500)
    drawn = np.random.Generator(np.random.PCG64(11)).laplace(0.0, 1.0, 500)
    assert [_numpy_laplace(round(u * _GRID), 1.0) for u in words] == drawn.tolist()


@pytest.mark.filterwarnings("ignore::dp_pipeline.exceptions.FastSamplerWarning")
def test_a_fast_laplace_release_rules_its_neighbour_out() -> None:
    """Laplace(ε = 1, Δ = 1) on t = 0 and its neighbour t' = 1. The event S = "the output is a float that
    the release of t' = 1 can never produce" has probability 0 under t' (checked on t′'s own outputs) and
    about 0.8 under t = 0: the privacy loss of the fast release is unbounded, whatever ε it was charged."""
    mech = Laplace(epsilon=1.0, sensitivity=1.0)
    n = 300
    from_zero = mech.randomize(np.zeros(n), rng=fast_rng(1))
    from_one = mech.randomize(np.ones(n), rng=fast_rng(2))
    in_s_zero = sum(not _reachable(float(y), 1.0, mech.scale) for y in from_zero)
    in_s_one = sum(not _reachable(float(y), 1.0, mech.scale) for y in from_one)
    assert in_s_one == 0  # P(S | t' = 1) = 0: every output of t' is reachable from t' (S is well defined)
    # P(S | t = 0) ≈ 0.82 (±0.03 at n = 300); an ε-DP release would need it ≤ e^ε · 0 = 0
    assert in_s_zero / n > 0.6


def test_the_secure_path_outputs_the_same_floats_whatever_the_input() -> None:
    """The contrast: the secure release is a cell centre of the lattice λ(ℤ + ½) for every input."""
    mech = Laplace(epsilon=1.0, sensitivity=1.0)
    lam = mech.lattice
    for t in (0.0, 1.0):
        out = mech.randomize(np.full(200, t), rng=secure_rng(3))
        cells = out / lam - 0.5
        assert np.array_equal(cells, np.round(cells))


def test_the_marker_is_stored_only_when_set_and_changes_no_price() -> None:
    event = Laplace(epsilon=0.5, sensitivity=1.0).event
    marked = event.drawn_by("fast")
    assert "sampler" not in event.to_dict()  # as events stored before the marker
    assert marked.to_dict() == {**event.to_dict(), "sampler": "fast"}
    assert PrivacyEvent.from_dict(marked.to_dict()) == marked
    assert marked.priced() == event
    acct = PrivacyAccountant("memory://")
    acct.set_budget("plain", PureDP(1.0))
    acct.set_budget("marked", PureDP(1.0))
    acct.spend("plain", event)
    acct.spend("marked", marked)
    assert acct.spent("marked").guarantee == acct.spent("plain").guarantee
    assert acct.spent("marked").epsilon == 0.5  # one ε = 0.5 release, computed by hand
    assert [e.sampler for e in acct.history("marked")] == ["fast"]
    assert [e.sampler for e in acct.history("plain")] == [None]
    acct.verify()


def test_drawn_event_marks_exactly_the_fast_generators_releases() -> None:
    event = Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.0).event
    assert drawn_event(event, fast_rng(0)).sampler == "fast"
    assert drawn_event(event, secure_rng(0)) is event
    assert drawn_event(event, None) is event


def test_a_plan_pays_its_declared_releases_drawn_by_the_fast_path_as_declared() -> None:
    """A release paid from a plan is matched against the plan's declared releases without its marker: the
    tight total covers it exactly as it covers the unmarked release (the marker is no part of the price)."""
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", ApproxDP(20.0, 1e-5))
    declared = [Gaussian(epsilon=0.3, delta=1e-7, sensitivity=1.0).event for _ in range(10)]
    plan = acct.spend_plan("d", declared, key="run", delta=1e-6)
    # the tight total is below Σε: paid one by one under basic composition they would not all fit
    assert plan.cost.epsilon < 0.3 * 10  # type: ignore[union-attr]
    for e in declared:
        plan.spend("d", e.drawn_by("fast"), label="a declared task")
    assert [r.body["route"] for r in acct.store.records("d") if r.kind == "pay"][-1] == "plan"
    paid = [e for e in acct.history("d") if e.paid_from == "run"]
    assert [e.sampler for e in paid] == ["fast"] * 10
    assert acct.spent("d").epsilon == plan.cost.epsilon  # type: ignore[union-attr]
    acct.verify()


def test_the_process_warns_once_of_the_fast_path(warned_afresh: None) -> None:
    mech = Laplace(epsilon=1.0, sensitivity=1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mech.randomize(np.zeros(3), rng=fast_rng(0))
        mech.randomize(np.zeros(3), rng=fast_rng(1))
        Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.0).randomize(0.0, rng=fast_rng(2))
    fast = [w for w in caught if issubclass(w.category, FastSamplerWarning)]
    assert len(fast) == 1
    assert "not floating-point safe" in str(fast[0].message)
    assert fast[0].filename == __file__  # points at the release, not at the library


def test_the_secure_path_does_not_warn_of_the_fast_path(warned_afresh: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Laplace(epsilon=1.0, sensitivity=1.0).randomize(np.zeros(3), rng=secure_rng(0))
    assert not [w for w in caught if issubclass(w.category, FastSamplerWarning)]


def test_sampler_of_sees_the_parts_of_a_composite() -> None:
    from dp_pipeline.events import composite_event

    parts = [Laplace(epsilon=0.5, sensitivity=1.0).event, Laplace(epsilon=0.5, sensitivity=1.0).event]
    assert sampler_of([composite_event(parts, "replace_one")]) is None
    assert sampler_of([composite_event([parts[0].drawn_by("fast"), parts[1]], "replace_one")]) == "fast"
