"""Plans of exponential mechanisms compose as ε-bounded range (Dong, Durfee & Rogers 2020).

Every number is checked against a brute-force worst case computed here: an ε-BR pair is generalised
randomized response with some t ∈ [0, ε] (loss t with probability p_t = (e^ε − e^t)/(e^ε − 1), t − ε
otherwise), so the true δ(x) of a plan is the largest hockey-stick divergence of the product of such pairs
over all choices of the t's. Enumerating the t's on a grid gives a lower bound of the true δ(x): a reported
ε whose brute-force δ exceeds the plan's δ would under-report. The tests also check the other side: the
report is never above basic composition nor above composing the same events as pure ε, and is tight.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, stats

from dp_pipeline import PrivacyAccountant, PrivacyEvent, PureDP
from dp_pipeline._exact import sum_up
from dp_pipeline.accounting import _losses, compose_plan, group_event
from dp_pipeline.accounting._analysis import pld
from dp_pipeline.accounting._relations import to_relation
from dp_pipeline.events import composite_event
from dp_pipeline.mechanisms import Exponential

pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")


def exponential(epsilon: float) -> PrivacyEvent:
    return Exponential(epsilon=epsilon, sensitivity=1.0).event


def one_release(event: PrivacyEvent, k: int) -> PrivacyEvent:
    """One release of k parts selecting on the same data independently (several quantiles of one call)."""
    return composite_event([event] * k, event.relation)


def pure(epsilon: float) -> PrivacyEvent:
    """The same privacy claim without the mechanism: composed as pure ε."""
    return PrivacyEvent(kind="guarantee", guarantee=PureDP(epsilon))


def rr_losses(epsilon: float, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised randomized response with parameter t: its two losses and their probabilities under P."""
    p = (math.exp(epsilon) - math.exp(t)) / math.expm1(epsilon)
    return np.array([t, t - epsilon]), np.array([p, 1.0 - p])


def product_delta(epsilons: list[float], ts: tuple[float, ...], x: float) -> float:
    """The x-hockey-stick divergence of the product of generalised randomized responses, by enumeration."""
    losses, probs = np.zeros(1), np.ones(1)
    for epsilon, t in zip(epsilons, ts, strict=True):
        ell, p = rr_losses(epsilon, t)
        losses = (losses[:, None] + ell[None, :]).ravel()
        probs = (probs[:, None] * p[None, :]).ravel()
    above = losses > x
    return float(np.sum(probs[above] * -np.expm1(x - losses[above])))


def brute_delta(epsilons: list[float], x: float, points: int) -> float:
    """max over a grid of every tuple (t₁, …, t_k) ∈ [0, εᵢ]^k: a lower bound of the plan's true δ(x)."""
    grids = [np.linspace(0.0, e, points) for e in epsilons]
    return max(product_delta(epsilons, ts, x) for ts in itertools.product(*grids))


def common_t_delta(k: int, epsilon: float, x: float) -> float:
    """max over one common t (a fine grid, then a local search): a lower bound of the homogeneous plan's
    true δ(x), computed term by term with scipy's binomial distribution."""

    def delta(t: float) -> float:
        p = (math.exp(epsilon) - math.exp(t)) / math.expm1(epsilon)
        i = np.arange(k + 1)
        loss = k * t - i * epsilon
        weight = stats.binom.pmf(i, k, 1.0 - p)
        return float(np.sum(np.where(loss > x, weight * -np.expm1(np.minimum(x - loss, 0.0)), 0.0)))

    grid = np.linspace(0.0, epsilon, 2001)
    values = [delta(t) for t in grid]
    best = int(np.argmax(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    local = optimize.minimize_scalar(lambda t: -delta(t), bounds=(lo, hi), method="bounded")
    return max(values[best], -float(local.fun))


@pytest.mark.parametrize("epsilon", [0.1, 0.7, 2.0])
def test_the_profile_is_the_worst_curve_of_generalised_randomized_response(epsilon: float) -> None:
    for x in np.linspace(-1.5 * epsilon, 1.5 * epsilon, 31):
        search = optimize.minimize_scalar(
            lambda t, x=x: -product_delta([epsilon], (t,), x), bounds=(0.0, epsilon), method="bounded"
        )
        grid = max(product_delta([epsilon], (t,), x) for t in np.linspace(0.0, epsilon, 4001))
        worst = max(grid, -float(search.fun))
        assert pld._bounded_range_profile(epsilon, x) == pytest.approx(worst, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize(("k", "points"), [(1, 4001), (2, 201), (3, 41)])
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 2.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-3, 0.05])
def test_a_plan_of_one_epsilon_is_the_optimal_composition(
    k: int, points: int, epsilon: float, delta: float
) -> None:
    reported = compose_plan([one_release(exponential(epsilon), k)], delta=delta)
    g = reported.guarantee
    assert (reported.method == "bounded_range" or g.epsilon == 0.0) and g.delta == delta
    # never below the true value: no choice of the t's (not only a common one) exceeds δ at the report
    assert brute_delta([epsilon] * k, g.epsilon, points) <= delta
    # and tight: a common t already exceeds δ just below it (when the optimum is above 0)
    if g.epsilon > 0.0:
        assert common_t_delta(k, epsilon, g.epsilon * (1.0 - 1e-6)) > delta
    else:
        assert common_t_delta(k, epsilon, 0.0) <= delta
    # never above basic composition nor the pure-ε composition of the same plan
    assert g.epsilon <= k * epsilon
    assert g.epsilon <= compose_plan([pure(epsilon)] * k, delta=delta).guarantee.epsilon


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 40),
    st.floats(0.01, 3.0),
    st.sampled_from([1e-9, 1e-6, 1e-3, 0.1]),
)
def test_bounded_range_is_never_below_the_common_t_worst_case_nor_above_pure_composition(
    k: int, epsilon: float, delta: float
) -> None:
    reported = compose_plan([one_release(exponential(epsilon), k)], delta=delta).guarantee
    assert common_t_delta(k, epsilon, reported.epsilon) <= delta * (1.0 + 1e-9)
    assert reported.epsilon <= sum_up([epsilon] * k)
    assert reported.epsilon <= compose_plan([pure(epsilon)] * k, delta=delta).guarantee.epsilon


def test_different_epsilons_compose_through_the_bounded_range_pair() -> None:
    epsilons, delta = [0.3, 0.8, 0.5], 1e-4
    reported = compose_plan([exponential(e) for e in epsilons], delta=delta)
    assert reported.method == "pld"
    assert brute_delta(epsilons, reported.guarantee.epsilon, 41) <= delta
    as_pure = compose_plan([pure(e) for e in epsilons], delta=delta).guarantee.epsilon
    assert reported.guarantee.epsilon < 0.9 * as_pure


def laplace_delta(scale: float, y: float) -> float:
    """δ(y) of Laplace noise of scale b at sensitivity 1: ∫ (p(z) − e^y·p(z − 1))₊ dz by quadrature."""

    def excess(z: float) -> float:
        return max(0.0, math.exp(-abs(z) / scale) - math.exp(y - abs(z - 1.0) / scale)) / (2.0 * scale)

    return float(sum(integrate.quad(excess, a, b, limit=200)[0] for a, b in [(-60, 0), (0, 1), (1, 60)]))


def test_an_exponential_mechanism_beside_laplace_noise() -> None:
    """The plan's true δ(x) is max over t of Σ p_j·δ_Laplace(x − ℓ_j) over the two losses ℓ_j of the pair."""
    epsilon, scale, delta = 0.5, 2.0, 1e-3
    event = PrivacyEvent(
        kind="laplace", guarantee=PureDP(1.0 / scale), sensitivity=1.0, parameters={"scale": scale}
    )
    reported = compose_plan([exponential(epsilon), event], delta=delta)
    x = reported.guarantee.epsilon

    def true_delta(t: float) -> float:
        losses, probs = rr_losses(epsilon, t)
        return float(sum(p * laplace_delta(scale, x - ell) for ell, p in zip(losses, probs, strict=True)))

    worst = max(true_delta(t) for t in np.linspace(0.0, epsilon, 41))
    assert worst <= delta
    as_pure = compose_plan([pure(epsilon), event], delta=delta).guarantee.epsilon
    assert x < as_pure


def test_quantile_plans_are_priced_tighter_and_single_spends_stay_pure() -> None:
    acct = PrivacyAccountant("memory://")
    acct.set_budget("d", PureDP(10.0))
    quantiles = one_release(exponential(0.1), 10)  # what dp_quantiles charges for ten quantiles at ε = 1
    cost = acct.plan_cost("d", [quantiles], delta=1e-6)
    assert cost.method == "bounded_range" and cost.epsilon < 0.65
    separate = acct.plan_cost("d", [exponential(0.1)] * 10, delta=1e-6)  # ten releases: the PLD
    assert separate.method == "pld" and cost.epsilon < separate.epsilon < 1.0
    assert acct.plan_cost("d", [quantiles]).epsilon == pytest.approx(1.0)  # δ = 0: no gain, basic composition
    for event in [exponential(0.1)] * 2:  # adaptive spends: pure ε each (the adaptive bound is not used)
        acct.spend("d", event)
    assert acct.spent("d").epsilon == pytest.approx(0.2)


def adaptive_delta(k: int, epsilon: float, x: float, points: int) -> float:
    """A lower bound of δ(x) for k ε-BR releases each chosen after the earlier results: by dynamic
    programming, the adversary picks each release's t ∈ {0, ε/m, …, ε} (m = ``points`` − 1) from the
    privacy loss accumulated so far, which lies on the lattice of multiples of ε/m."""
    m = points - 1
    lattice = np.arange(-k * m, k * m + 1) * (epsilon / m)  # every accumulated loss after k releases
    value = np.maximum(0.0, -np.expm1(x - lattice))  # the hockey-stick term of a final loss
    ts = np.arange(points)
    p = (math.exp(epsilon) - np.exp(ts * epsilon / m)) / math.expm1(epsilon)  # P(loss t) under P
    for step in range(k, 0, -1):
        # value[j] belongs to the loss (j − k·m)·ε/m; after step − 1 releases losses span ±(step − 1)·m
        size = 2 * (step - 1) * m + 1
        start = (k - step + 1) * m  # index of loss −(step − 1)·m·ε/m
        index = start + np.arange(size)[:, None] + ts[None, :]  # loss + t
        best = np.max(p * value[index] + (1.0 - p) * value[index - m], axis=1)  # … and loss + t − ε
        value = np.zeros_like(value)
        value[start : start + size] = best
    return float(value[k * m])


def test_a_plan_of_separate_releases_holds_when_each_is_chosen_from_earlier_results() -> None:
    """Releases of a plan may choose their utility from earlier results (top-k by peeling). An adversary
    that picks each release's t from the loss so far exceeds δ at the optimal non-adaptive ε (why only
    one release's independent parts are priced by it), and stays within δ at the plan's reported ε."""
    k, epsilon, delta = 10, 0.5, 1e-6
    non_adaptive = compose_plan([one_release(exponential(epsilon), k)], delta=delta).guarantee.epsilon
    assert adaptive_delta(k, epsilon, non_adaptive, 201) > delta
    reported = compose_plan([exponential(epsilon)] * k, delta=delta)
    assert reported.method == "pld" and reported.guarantee.epsilon > non_adaptive
    assert adaptive_delta(k, epsilon, reported.guarantee.epsilon, 201) <= delta
    # the dynamic programme is no weaker than the common t it contains
    common = common_t_delta(k, epsilon, non_adaptive)
    assert adaptive_delta(k, epsilon, non_adaptive, 201) >= common * (1.0 - 1e-9)


def test_group_privacy_and_the_relation_keep_the_bounded_range() -> None:
    """A group of k sees kε-bounded range, and an add/remove event on a replace-one dataset 2ε."""
    grouped = group_event(exponential(0.2), 3)
    replaced = to_relation(exponential(0.2).under("add_remove"), "replace_one")
    for event, factor in ((grouped, 3), (replaced, 2)):
        loss = _losses._event_loss(event)
        assert isinstance(loss, _losses._BoundedRangeLoss) and loss.epsilon >= factor * 0.2
        assert compose_plan([one_release(event, 4)], delta=1e-5).method == "bounded_range"
