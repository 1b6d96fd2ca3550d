"""Request: what a dataset is asked to pay, as one value.

A request is the events of one release (``composition="each"``) or of a plan fixed in advance
(``composition="plan"``), the group size they are charged for, the partitions they read, the δ a plan is
read at, and the idempotency key and label recorded with them. Every path that prices, checks or charges
(:meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.spend`, ``reserve``, ``spend_plan``,
``quote``, ``plan_cost``, a shrink, a payment from a reservation, the allocation and the plan checks)
builds one and hands it to the dataset's :class:`~dp_pipeline.accounting.BudgetPolicy`; nothing
else says how a charge is composed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting._checks import (
    MAX_KEY,
    check_delta,
    check_optional_text,
    check_partitions,
    to_event,
    to_events,
)
from dp_pipeline.accounting._records import request_of
from dp_pipeline.events import PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError

__all__ = ["ComposedAs", "Request"]

ComposedAs = Literal["each", "plan"]


@dataclass(frozen=True)
class Request:
    """What a dataset is asked to pay: the events of one release, or of a plan composed as a whole.

    Parameters
    ----------
    events : tuple of PrivacyEvent
        The release's event (``composition="each"``: exactly one), or every release of the plan (a plan
        may be empty only as the sub-plan a reservation is shrunk to).
    group_size : int, default 1
        The charge is for groups of k individuals (group privacy).
    partitions : tuple of str, default ()
        The partitions of a partitioned dataset the release reads; () for the whole dataset.
    composition : {"each", "plan"}, default "each"
        ``"each"``: one release, composed with the others one by one (adaptively) under the budget's rule.
        ``"plan"``: releases fixed before any of them runs, charged at their tight total as one record.
    delta : float, optional
        A plan's δ: the δ its (ε, δ) total is read at (None: the rule's default). Only for plans.
    key, label : str, optional
        The idempotency key (None: a fresh one is drawn when the request is charged) and the label shown
        in the history.

    Notes
    -----
    A request carries no data and no state of the ledger: the same request priced against the same totals
    under the same budget has the same price (:meth:`BudgetPolicy.price
    <dp_pipeline.accounting._policy.BudgetPolicy.price>`). Its events are recorded as they were asked, each
    stating the relation it was charged under (:meth:`stated`).
    """

    events: tuple[PrivacyEvent, ...]
    group_size: int = 1
    partitions: tuple[str, ...] = ()
    composition: ComposedAs = "each"
    delta: float | None = None
    key: str | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if not all(isinstance(e, PrivacyEvent) for e in self.events):
            raise InvalidParameterError("a request's events must be PrivacyEvents", "events")
        if self.composition not in ("each", "plan"):
            raise InvalidParameterError(
                f"'composition' must be 'each' or 'plan', got {self.composition!r}", "composition"
            )
        if self.composition == "each" and (len(self.events) != 1 or self.delta is not None):
            raise InvalidParameterError(
                "a request composed 'each' is one release: exactly one event and no plan δ", "events"
            )
        check_positive_int(self.group_size, "group_size")

    @classmethod
    def one(
        cls,
        cost: Any,
        group_size: Any = 1,
        *,
        partition: Any = None,
        key: Any = None,
        label: Any = None,
    ) -> Request:
        """One release from what a caller passes (a mechanism, an event or a guarantee); InvalidParameterError
        naming the first bad argument."""
        event = to_event(cost)
        return cls((event,), *_common(group_size, partition), key=_key(key), label=_label(label))

    @classmethod
    def plan(
        cls,
        costs: Any,
        group_size: Any = 1,
        *,
        delta: Any = None,
        partition: Any = None,
        key: Any = None,
        label: Any = None,
    ) -> Request:
        """A plan from what a caller passes (a non-empty list of mechanisms, events or guarantees)."""
        events = tuple(to_events(costs))
        k, partitions = _common(group_size, partition)
        return cls(events, k, partitions, "plan", check_delta(delta), _key(key), _label(label))

    @classmethod
    def plans(cls, plans: Any, delta: Any = None) -> list[Request]:
        """Several plans given as ``(costs, group_size, partition)`` or ``(costs, group_size, partition,
        delta)`` tuples (or requests, taken as they are); ``delta`` is the δ of the tuples that give none."""
        shape = "(costs, group_size, partition) or (costs, group_size, partition, delta)"
        if isinstance(plans, (str, bytes)) or not isinstance(plans, Sequence) or not plans:
            raise InvalidParameterError(f"'plans' must be a non-empty list of {shape}", "plans")
        if not all(
            isinstance(p, Request) or (isinstance(p, (tuple, list)) and len(p) in (3, 4)) for p in plans
        ):
            raise InvalidParameterError(f"each plan must be {shape}", "plans")
        check_delta(delta)
        return [
            p
            if isinstance(p, Request)
            else cls.plan(p[0], p[1], partition=p[2], delta=p[3] if len(p) == 4 else delta)
            for p in plans
        ]

    @property
    def is_plan(self) -> bool:
        """Whether the events are a plan composed as a whole."""
        return self.composition == "plan"

    def keeping(self, events: Sequence[PrivacyEvent]) -> Request:
        """The sub-plan of this plan that keeps ``events`` (its group size, partitions and δ)."""
        return replace(self, events=tuple(events), composition="plan")

    def stated(self, relation: Relation) -> list[dict[str, Any]]:
        """The events as recorded: one that states no relation is charged under the dataset's."""
        return [(e if e.relation is not None else e.under(relation)).to_dict() for e in self.events]

    def recorded(self, relation: Relation) -> str:
        """What the request asks, as its reservation records it (canonical JSON): a key reused for another
        request is refused."""
        return request_of(self.stated(relation), self.group_size, self.is_plan, self.delta, self.partitions)

    def settles(self, commit: bool) -> bool:
        """Whether the reservation this request makes is the charge of its own release: one release (not a
        plan) committed at once, as :meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.spend` makes
        it. Nothing can be paid from such a reservation (the ledger marks it ``"spend"``); a plan, or a
        release reserved and committed later, holds a budget that releases may be paid from."""
        return commit and not self.is_plan


def _common(group_size: Any, partition: Any) -> tuple[int, tuple[str, ...]]:
    return check_positive_int(group_size, "group_size"), check_partitions(partition)


def _key(key: Any) -> str | None:
    return check_optional_text(key, "key", MAX_KEY)


def _label(label: Any) -> str | None:
    return check_optional_text(label, "label", 2000)
