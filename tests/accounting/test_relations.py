"""Neighbouring relations: a dataset declares one, every event is read under it, and the ledger records it.

Each conversion is checked against the privacy loss computed here from the event's noise: Laplace ε = Δ/b,
Gaussian μ = Δ/σ and its exact (ε, δ) curve δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (Balle & Wang 2018),
solved with scipy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from scipy import optimize, special, stats

from dp_pipeline import (
    ApproxDP,
    GaussianDP,
    InvalidParameterError,
    PrivacyAccountant,
    PureDP,
    UnsupportedCompositionError,
)
from dp_pipeline.accounting import Request, ledger_entries
from dp_pipeline.accounting.ledger import DatasetState
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.mechanisms import (
    BinaryRandomizedResponse,
    BoundedLaplace,
    Gaussian,
    KRandomizedResponse,
    Laplace,
    Staircase,
)


def gaussian_delta(mu: float, epsilon: float) -> float:
    return float(
        special.ndtr(mu / 2 - epsilon / mu) - math.exp(epsilon) * special.ndtr(-mu / 2 - epsilon / mu)
    )


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The least ε with δ(ε) ≤ δ for μ-GDP (the curve decreases in ε)."""
    return float(optimize.brentq(lambda e: gaussian_delta(mu, e) - delta, 0.0, 100.0, xtol=1e-14))


def accountant(relation: str | None, budget: Any = None, rule: str = "auto") -> PrivacyAccountant:
    acct = PrivacyAccountant("memory://")
    options = {} if relation is None else {"relation": relation}
    acct.set_budget("d", budget or ApproxDP(100.0, 1e-3), rule=rule, **options)
    return acct


def laplace_event(relation: str, epsilon: float, sensitivity: float, **parameters: float) -> PrivacyEvent:
    base = Laplace(epsilon=epsilon, sensitivity=sensitivity).event
    return base.model_copy(update={"relation": relation, "parameters": {**base.parameters, **parameters}})


def gaussian_event(mechanism: Gaussian, relation: str, **parameters: float) -> PrivacyEvent:
    base = mechanism.event
    return base.model_copy(update={"relation": relation, "parameters": {**base.parameters, **parameters}})


# ----------------------------------------------------------------------------------- add/remove → replace-one


def test_add_remove_laplace_with_its_replace_one_sensitivity_is_repriced_exactly() -> None:
    acct = accountant("replace_one")
    event = laplace_event("add_remove", 0.5, 1.0, replace_one_sensitivity=1.5)
    scale = event.parameters["scale"]
    assert isinstance(scale, float)
    cost = acct.spend("d", event).cost
    exact = 1.5 / scale  # the Laplace loss at the replace-one sensitivity
    assert isinstance(cost, ApproxDP) and cost.delta == 0.0
    assert cost.epsilon == pytest.approx(exact, rel=1e-12)
    assert acct.spent("d").epsilon >= exact


def test_add_remove_laplace_without_it_costs_group_privacy_of_two() -> None:
    acct = accountant("replace_one")
    acct.spend("d", laplace_event("add_remove", 0.5, 1.0))
    assert acct.spent("d").epsilon == 1.0  # remove one person, add another: 2ε


@pytest.mark.parametrize(("other", "grouped"), [(1.4142135623730951, False), (None, True)])
def test_add_remove_gaussian_approx_event_on_replace_one(other: float | None, grouped: bool) -> None:
    acct = accountant("replace_one")
    mechanism = Gaussian(epsilon=0.8, delta=1e-6, sensitivity=1.0)
    extra = {} if other is None else {"replace_one_sensitivity": other}
    acct.spend("d", gaussian_event(mechanism, "add_remove", **extra))
    spent = acct.spent("d")
    mu = (2.0 if grouped else math.sqrt(2.0)) / mechanism.sigma  # the true μ of the replace-one change
    exact = gaussian_epsilon(mu, 1e-6)
    assert spent.delta == 1e-6
    assert spent.epsilon >= exact
    assert spent.epsilon == pytest.approx(exact, rel=1e-6)
    assert gaussian_delta(mu, spent.epsilon) <= 1e-6 * (1 + 1e-9)


def test_add_remove_gaussian_gdp_event_on_a_gdp_budget_is_repriced_as_mu() -> None:
    acct = accountant("replace_one", GaussianDP(10.0))
    mechanism = Gaussian.from_mu(mu=0.5, sensitivity=2.0)
    acct.spend("d", gaussian_event(mechanism, "add_remove", replace_one_sensitivity=3.0))
    exact = 3.0 / mechanism.sigma
    assert acct.spent("d").mu >= exact
    assert acct.spent("d").mu == pytest.approx(exact, rel=1e-12)
    acct.spend("d", gaussian_event(mechanism, "add_remove"))  # group privacy: 2μ
    assert acct.spent("d").mu == pytest.approx(math.hypot(exact, 1.0), rel=1e-12)


def test_add_remove_guarantee_event_costs_its_group_of_two() -> None:
    acct = accountant("replace_one")
    event = PrivacyEvent(kind="guarantee", guarantee=ApproxDP(0.5, 1e-7), relation="add_remove")
    acct.spend("d", event)
    spent = acct.spent("d")
    assert spent.epsilon == 1.0
    # group privacy of (ε, δ) for two people: at least (1 + e^ε)·δ (Dwork & Roth, Thm 2.2 generalised)
    assert spent.delta >= (1.0 + math.exp(0.5)) * 1e-7


def test_conversion_happens_before_grouping() -> None:
    acct = accountant("replace_one")
    acct.spend("d", laplace_event("add_remove", 0.25, 1.0), group_size=3)
    assert acct.spent("d").epsilon == 1.5  # 3 people replaced = 6 added or removed


def test_a_grouped_replace_one_sensitivity_grows_with_the_group() -> None:
    acct = accountant("replace_one")
    event = laplace_event("add_remove", 0.5, 1.0, replace_one_sensitivity=1.5)
    acct.spend("d", event, group_size=2)
    assert acct.spent("d").epsilon == pytest.approx(2 * 0.75, rel=1e-12)


# ----------------------------------------------------------------------------------- replace-one → add/remove


ROW_LEVEL = [
    BinaryRandomizedResponse(epsilon=0.5),
    KRandomizedResponse(epsilon=0.5, categories=["a", "b", "c"]),
    BoundedLaplace(epsilon=0.5, lower=0.0, upper=1.0),
    PrivacyEvent(kind="guarantee", guarantee=PureDP(0.5), relation="replace_one"),
]


@pytest.mark.parametrize("cost", ROW_LEVEL)
def test_replace_one_events_are_refused_on_an_add_remove_dataset_and_nothing_changes(cost: Any) -> None:
    acct = accountant("add_remove")
    acct.spend("d", PureDP(0.25))
    before = (len(ledger_entries(acct.store, "d")), acct.spent("d"), acct.remaining("d"))
    for attempt in (
        lambda: acct.spend("d", cost),
        lambda: acct.reserve("d", cost),
        lambda: acct.spend_plan("d", [cost, PureDP(0.1)]),
        lambda: acct.plan_cost("d", [cost]),
        lambda: acct.quote("d", Request.plan([cost])).fits,
    ):
        with pytest.raises(UnsupportedCompositionError, match="relation='replace_one'"):
            attempt()
    assert (len(ledger_entries(acct.store, "d")), acct.spent("d"), acct.remaining("d")) == before


@pytest.mark.parametrize("cost", ROW_LEVEL)
def test_a_grouped_row_level_event_keeps_its_relation_and_is_still_refused(cost: Any) -> None:
    # the DAG check and plan check apply the group size before the accountant reads the relation
    from dp_pipeline.accounting import group_event

    event = cost if isinstance(cost, PrivacyEvent) else cost.event
    grouped = group_event(event, 3)
    assert grouped.relation == event.relation == "replace_one"
    with pytest.raises(UnsupportedCompositionError, match="relation='replace_one'"):
        accountant("add_remove").plan_cost("d", [grouped])


@pytest.mark.parametrize("relation", ["replace_one", "add_remove"])
@pytest.mark.parametrize(
    "cost",
    [
        Laplace(epsilon=1.0, sensitivity=1.0),
        Staircase(epsilon=1.0, sensitivity=1.0),
        PureDP(1.0),
        Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.0),
    ],
)
def test_events_without_a_relation_cost_what_they_say_under_either_relation(relation: str, cost: Any) -> None:
    acct = accountant(relation)
    acct.spend("d", cost)
    assert acct.spent("d").epsilon == 1.0
    (entry,) = [e for e in ledger_entries(acct.store, "d") if e.kind == "reserve"]
    assert entry.events[0].relation == relation == entry.relation  # recorded under the dataset's relation


# ----------------------------------------------------------------------------------- the dataset's relation


def test_the_relation_is_recorded_shown_and_persisted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with PrivacyAccountant(url, create=True) as acct:
        acct.set_budget("a", PureDP(1.0), relation="add_remove")
        acct.set_budget("r", PureDP(1.0))
        assert (
            acct.budget("a").relation == "add_remove" and acct.budget("r").relation == "replace_one"
        )  # the default
        for what in (acct.budget, acct.spent, acct.remaining):
            assert what("a").relation == "add_remove"
            assert "add_remove" in str(what("a"))
        assert acct.plan_cost("a", [PureDP(0.5)]).relation == "add_remove"
        assert ledger_entries(acct.store, "a")[0].relation == "add_remove"
        acct.set_budget("a", PureDP(2.0))  # raising the budget keeps the relation
    with PrivacyAccountant(url) as again:
        assert again.budget("a").relation == "add_remove" and again.budget("r").relation == "replace_one"
        again.verify()


def test_a_budget_stored_without_a_relation_reads_as_the_default() -> None:
    acct = PrivacyAccountant("memory://")
    totals = {"epsilon": "0", "delta": "0", "mu2": "0", "impure": 0, "no_mu": 0, "active": 0, "open": 0}
    old_body = {
        "budget": PureDP(1.0).to_approx_dp().to_dict(),
        "method": "basic",
        "mu_limit": None,
        "previous": None,
        "reason": None,
        "actor": "someone",
        "totals": totals,
    }
    state = DatasetState(
        {"guarantee": PureDP(1.0).to_approx_dp().to_dict(), "mu_limit": None}, "basic", totals
    )
    acct.store.atomic("old", lambda tx: tx.append("budget", old_body, state))
    assert acct.budget("old").relation == "replace_one"
    assert ledger_entries(acct.store, "old")[0].relation == "replace_one"
    acct.spend("old", BinaryRandomizedResponse(epsilon=0.5))  # a row-level release works on it
    acct.verify("old")
    assert acct.spent("old").epsilon == 0.5
    acct.set_budget("old", PureDP(1.0))  # the same budget again writes nothing
    assert len(ledger_entries(acct.store, "old")) == 3


def test_the_relation_cannot_change_once_spent_and_must_be_known() -> None:
    acct = accountant("replace_one", PureDP(1.0))
    acct.set_budget("d", PureDP(1.0), relation="add_remove")  # nothing spent yet: allowed
    assert acct.budget("d").relation == "add_remove"
    acct.spend("d", PureDP(0.1))
    records = len(ledger_entries(acct.store, "d"))
    with pytest.raises(InvalidParameterError, match="cannot change") as info:
        acct.set_budget("d", PureDP(1.0), relation="replace_one")
    assert info.value.parameter == "relation"
    for bad in ("replace", "ADD_REMOVE", 1, ""):
        with pytest.raises(InvalidParameterError, match="'relation' must be") as info:
            acct.set_budget("d", PureDP(2.0), relation=bad)  # type: ignore[arg-type]
        assert info.value.parameter == "relation"
    assert len(ledger_entries(acct.store, "d")) == records and acct.budget("d").relation == "add_remove"


# ----------------------------------------------------------------------------------- composite events


def composite(*parts: PrivacyEvent) -> PrivacyEvent:
    from dp_pipeline.events import composite_event

    return composite_event(list(parts), "replace_one")


def test_composite_events_are_validated_and_stored_like_any_event() -> None:
    part = Laplace(epsilon=0.5, sensitivity=1.0).event.under("replace_one")
    with pytest.raises(InvalidParameterError, match="at least one part"):
        PrivacyEvent(kind="composite", guarantee=PureDP(1.0))
    whole = composite(part, part)
    assert whole.guarantee == PureDP(1.0)
    with pytest.raises(InvalidParameterError, match="cannot be composite"):
        PrivacyEvent(kind="composite", guarantee=PureDP(2.0), parts=(whole,), relation="replace_one")
    with pytest.raises(InvalidParameterError, match="only a composite event has parts"):
        PrivacyEvent(kind="laplace", guarantee=PureDP(1.0), parts=(part,))
    assert PrivacyEvent.from_dict(json.loads(json.dumps(whole.to_dict()))) == whole
    acct = accountant(None)
    acct.spend("d", whole)
    (entry,) = [e for e in ledger_entries(acct.store, "d") if e.kind == "reserve"]
    assert entry.events == (whole,)
    acct.verify()


def test_a_composite_is_charged_as_the_sum_of_its_parts_under_every_rule() -> None:
    eps = [0.3, 0.5, 0.2]
    whole = composite(*(Laplace(epsilon=e, sensitivity=1.0).event.under("replace_one") for e in eps))
    basic = accountant(None)
    basic.spend("d", whole)
    assert basic.spent("d").epsilon == 1.0
    # μ of the Laplace trade-off: −2Φ⁻¹(e^{−ε/2}/2) (Dong, Roth & Su 2022), below the 2Φ⁻¹(e^ε/(1 + e^ε)) of a
    # generic ε-DP release; the parts compose as √Σμᵢ²
    mus = [-2 * stats.norm.ppf(math.exp(-e / 2) / 2) for e in eps]
    total_mu = math.sqrt(sum(m * m for m in mus))
    whole_mu = 2 * stats.norm.ppf(math.exp(1.0) / (1 + math.exp(1.0)))
    assert total_mu < whole_mu  # what the parts buy over converting the total
    gdp = accountant(None, GaussianDP(5.0))
    gdp.spend("d", whole)
    assert gdp.spent("d").mu == pytest.approx(total_mu, rel=1e-9) and gdp.spent("d").mu >= total_mu
    mixed = accountant(None, ApproxDP(5.0, 1e-6), rule="pure_or_gdp")
    mixed.spend("d", whole)
    mixed.spend("d", Gaussian.from_mu(mu=0.5, sensitivity=1.0))
    spent_mu = math.sqrt(total_mu**2 + 0.25)
    assert mixed.spent("d").epsilon == pytest.approx(gaussian_epsilon(spent_mu, 1e-6), rel=1e-6)


def test_ten_ten_feature_laplace_releases_compose_to_at_most_4_7() -> None:
    pytest.importorskip("sklearn")
    import numpy as np

    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

    from dp_pipeline.transformers import LaplaceNoise

    X = np.zeros((3, 10))
    costs = [
        LaplaceNoise(epsilon=1.0, sensitivity=1.0, accountant="unaccounted").fit(X).cost_ for _ in range(10)
    ]
    acct = accountant(None, ApproxDP(10.0, 1e-6))
    reported = acct.plan_cost("d", costs, delta=1e-6)
    assert reported.method == "pld" and reported.epsilon <= 4.7
    # dp-accounting's own composition of the 100 per-column Laplace releases (ε = 0.1 each)
    scale = costs[0].parts[0].parameters["scale"]
    assert isinstance(scale, float)

    def composed(pessimistic: bool) -> float:
        one = pld.from_laplace_mechanism(
            scale,
            sensitivity=1.0,
            pessimistic_estimate=pessimistic,
            value_discretization_interval=1e-4,
            use_connect_dots=pessimistic,
        )
        return float(one.self_compose(100).get_epsilon_for_delta(1e-6))

    upper, lower = composed(True), composed(False)
    assert lower <= reported.epsilon <= upper * (1 + 1e-3)
    assert reported.epsilon == pytest.approx(upper, rel=1e-3)
    # before: each transform was one 10-dimensional Laplace event, and the plan cost about 10
    assert acct.plan_cost("d", [PureDP(1.0)] * 10, delta=1e-6).epsilon > 9.9
