"""A request's price under a dataset's budget: its events read under the dataset's relation, then charged
by the budget's rule (one release, a composite release part by part, or a plan composed as a whole)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dp_pipeline import _exact as exact
from dp_pipeline.accounting._composition import PRICING, group_event, plan_epsilon_floor
from dp_pipeline.accounting._records import DatasetBudget
from dp_pipeline.accounting._relations import to_relation
from dp_pipeline.accounting.ledger._base import canonical_json
from dp_pipeline.accounting.rules import Charge, Totals
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import UnsupportedCompositionError
from dp_pipeline.guarantees import Guarantee

__all__ = [
    "PRICING",
    "Price",
    "charge_verifies",
    "price",
    "price_one",
    "recorded_request_price",
    "refusal_detail",
    "zero",
]


@dataclass(frozen=True)
class Price:
    """A request's charge, the cost shown, the method that composed it, the budget it was priced under and
    what of the totals a plan's price depended on (see :meth:`~dp_pipeline.accounting.rules.BudgetRule.
    plan_basis`)."""

    charge: Charge
    cost: Guarantee
    method: str
    budget: DatasetBudget
    basis: Any = None


def _event_charge(budget: DatasetBudget, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
    """One event's charge under the budget's rule and the cost shown, read under the dataset's relation
    first. A ``"composite"`` event is charged as the sum of its parts' charges: Σε and Σδ, and Σμᵢ² (tighter
    than the μ of its total guarantee)."""
    rule = budget.rule
    event = to_relation(event, budget.relation)
    if event.kind == "composite":
        total = rule.charge_total([_event_charge(budget, part, k)[0] for part in event.parts])
        return total, rule.charge_cost(total)
    return rule.charge_event(event, k)


def price(
    budget: DatasetBudget,
    events: Sequence[PrivacyEvent],
    k: int,
    plan: bool,
    plan_delta: float | None,
    totals: Totals,
) -> Price:
    """The price of a request: one event, or a plan composed as a whole.

    A plan's events are read under the dataset's relation; the rule sees each composite's parts, and
    which parts make one release.
    """
    if not plan:
        charge, cost = _event_charge(budget, events[0], k)
        return Price(charge, cost, budget.rule.method_of(charge), budget)
    planned = budget.rule.charge_plan(
        [to_relation(e, budget.relation) for e in events], k, plan_delta, totals
    )
    return Price(planned.charge, planned.cost, planned.method, budget, planned.basis)


def zero(budget: DatasetBudget) -> Price:
    """The price of no release at all (an empty sub-plan): every amount 0."""
    charge = budget.rule.charge_total([])
    return Price(charge, budget.rule.charge_cost(charge), budget.rule.method_of(charge), budget)


@functools.lru_cache(maxsize=512)
def price_one(budget: DatasetBudget, event_json: str, k: int) -> Price:
    """The price of one event (not a plan), which depends only on the budget, the event and k.

    Keyed by the event's canonical JSON, so that repeated spends of the same release (the common case:
    one mechanism spent many times) skip re-validating and re-grouping it. Errors are not cached.
    """
    event = PrivacyEvent.from_dict(json.loads(event_json))
    return price(budget, [event], k, False, None, budget.rule.empty())


def recorded_request_price(budget: DatasetBudget, body: Mapping[str, Any], totals: Totals) -> Price:
    """What a recorded reservation's request (its events, group size, plan and δ) costs under ``budget``,
    priced as :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.spend` and ``spend_plan`` price."""
    k = int(body["group_size"])
    if not body.get("plan"):
        return price_one(budget, canonical_json(dict(body["events"][0])), k)
    events = [PrivacyEvent.from_dict(dict(e)) for e in body["events"]]
    return price(budget, events, k, True, body.get("delta"), totals)


def refusal_detail(budget: DatasetBudget, refused: Price) -> str:
    """What a refusal adds to its message: the rule, how the request was composed, and the rule's advice."""
    detail = f"Rule: {budget.rule.describe()}; the request was composed by {refused.method!r}."
    hint = budget.rule.refusal_hint(refused.cost)
    return f"{detail} {hint}" if hint else detail


def charge_verifies(budget: DatasetBudget, charge: Charge, now: Price, plan: PlanRequest) -> bool:
    """Whether a recorded charge is one an honest writer could have recorded for its request.

    ``charge`` is the record's charge, ``now`` the request's price under this version's pricing and
    ``plan`` the request (its events, group size and whether it is a plan).

    A plan's tight (PLD) charge may differ from ``now`` by its discretisation and floating-point rounding,
    either way: when another version wrote it (another :data:`PRICING`, or none: written before records
    stated it, by dp-accounting's PLD), and also when this version wrote it with other numpy or scipy
    builds (their FFTs round differently, so the same code gives a price a few ulps apart on another
    machine). So a record is accepted iff it covers ``now``, or it charges a plan (ε, δ) with
    ε ≥ :func:`~dp_pipeline.accounting._analysis.pld.plan_epsilon_floor` at that δ. The stated pricing is
    kept in the record for the reader; it does not change the check.

    **Proof that this check errs only on the safe side.** (i) It never rejects an honest charge: an honest
    writer, of any version, charges a plan a valid (ε, δ) guarantee of its exact composition, so
    ε ≥ ε*(δ) ≥ ε_floor(δ). (ii) It never accepts an (ε, δ) that is not a guarantee of the plan beyond the
    floor's stated gap: a forged ε below ε_floor(δ) is found, and ε_floor(δ) ≤ ε*(δ) is within about n·h of
    ε*(δ) (1e-5 to 1e-4 relative in the tests). A single release's price is closed-form and does not drift,
    so it is always checked exactly; a plan's μ-GDP or exact-sum charges are too (they cover ``now``).
    """
    if charge.covers(now.charge):
        return True
    if not plan.plan:
        return False
    epsilon, delta = charge["epsilon"], charge["delta"]
    if epsilon is None or delta is None:
        return False
    events = [group_event(to_relation(e, budget.relation), plan.group_size) for e in plan.events]
    try:
        floor = plan_epsilon_floor(events, delta=min(exact.float_up(delta), 1.0 - 2.0**-53))
    except UnsupportedCompositionError:
        return False
    return epsilon >= exact.to_decimal(floor)


@dataclass(frozen=True)
class PlanRequest:
    """A recorded request as verify re-prices it: its events, group size and whether it is a plan."""

    events: Sequence[PrivacyEvent]
    group_size: int
    plan: bool

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> PlanRequest:
        events = [PrivacyEvent.from_dict(dict(e)) for e in body["events"]]
        return cls(events, int(body["group_size"]), bool(body.get("plan")))
