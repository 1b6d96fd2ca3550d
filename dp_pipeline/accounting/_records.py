"""What the accountant writes to the ledger: typed record bodies, the dataset's budget, and the appends.

Each record kind has a body type here (:class:`BudgetBody`, :class:`ReserveBody`, :class:`CommitBody`,
:class:`CancelBody`, and :class:`PayBody` and :class:`ShrinkBody` for releases paid from a reservation and
reservations lowered to a sub-plan) whose ``to_json`` is exactly what earlier versions wrote, so ledgers old
and new read and verify alike; the head row caches the :class:`DatasetBudget` (guarantee, rule parameters,
relation), the rule's stored name and the running totals. :func:`append_commit` is the one place a
reservation is committed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from dp_pipeline.accounting._composition import PRICING
from dp_pipeline.accounting.ledger._base import (
    DatasetState,
    LedgerRecord,
    LedgerTransaction,
    RecordKind,
    canonical_json,
)
from dp_pipeline.accounting.rules import BudgetRule, Charge, Totals, stored_rule
from dp_pipeline.events import DEFAULT_RELATION, RELATIONS, Relation
from dp_pipeline.exceptions import InvalidParameterError, LedgerError
from dp_pipeline.guarantees import Guarantee, guarantee_from_dict

__all__ = [
    "BudgetBody",
    "CancelBody",
    "CommitBody",
    "DatasetBudget",
    "PayBody",
    "ReserveBody",
    "ShrinkBody",
    "append",
    "append_commit",
    "budget_of",
    "partitions_of",
    "request_of",
    "with_totals",
]


@dataclass(frozen=True)
class DatasetBudget:
    """A dataset's budget as the head row caches it: the rule (with the budget's guarantee and what the
    rule derived from it), the dataset's neighbouring relation, and for a partitioned dataset L, the most
    partitions one person's data lie in.

    **Partitions (parallel composition), add/remove only.** A dataset partitioned by a public attribute (a
    region, a cohort, the day of a per-day dataset), with each person's data in at most L partitions, keeps
    one running total per partition; a release adds its charge to every partition it names, or, naming
    none, to the whole-dataset total. Partitioned budgets require ``relation="add_remove"``
    (:meth:`~dp_pipeline.accounting._accountant.PrivacyAccountant.set_budget` refuses any other). A person x
    then has the loss of the whole-dataset total plus the totals of the partitions S_x holding their data.
    The check (:meth:`fits`) is exact for L = 1: every person's totals fit, that is the whole-dataset total
    alone and the whole-dataset total plus each single partition's (:meth:`Totals.each_person`). For
    L ≥ 2 it checks an upper bound on every person's totals, :meth:`Totals.largest` (the whole-dataset
    total plus, per amount, the L largest partition totals, possibly of different partitions). Reports
    (:meth:`composed`) show that upper bound for every L.

    Validity under adaptive spends: fix add/remove neighbours D, D' differing in one person x, whose data
    lie in a set S_x of at most L partitions. A release that reads only partitions outside S_x computes the
    same function of the same rows on D and D': its output has the same distribution on both, given
    everything released before, so it adds nothing to x's privacy loss. Every release that reads x's data
    named a partition of S_x (it was added to that partition's total) or named none (the whole-dataset
    total), and its charge bounds its loss for x added or removed. So x's loss composes releases whose
    charges sum, amount by amount, to the whole-dataset total plus the totals of the partitions of S_x. The
    accountant accepts a release only if these sums fit the rule after it, for every possible S_x (L = 1:
    checked one by one; L ≥ 2: through an amountwise upper bound, and the rule's check is monotone in
    every amount), so at every step x's own sums fit. Whether a release is accepted depends only on the
    releases before it (not on the data), so for x the accountant is the rule's own filter run on x's
    charges (zero for releases outside S_x), whose validity under adaptively chosen charges is the rule's
    (see its docstring). This holds for every x at once. L is a declaration about the data, like a
    sensitivity: the frame functions enforce it on the rows of one release (``partition_column=``); across
    releases it must hold for the data themselves.

    **Why not replace-one.** Replacing x by y may take x's rows out of the partitions S_x and put y's rows
    into other partitions S_y: a release on a partition of S_x and one on a partition of S_y both change.
    Two ε = 1 counts on days A and B then lose 2 for a person moved from A to B, not the 1 of the largest
    partition; and a row-level release on a partition (randomized response) shows how many rows it holds,
    which the move changes, so its loss is unbounded.

    **Ledgers written before.** Earlier versions accepted partitions on replace-one datasets (:attr:`legacy`).
    Such a dataset is read without parallel composition: every partition total counts for every person
    (:meth:`Totals.summed`, the whole-dataset total plus the sum of all partition totals). This bounds a
    move of one person for partition releases whose charge also bounds one person added or removed on the
    partition (the aggregates of :mod:`dp_pipeline.frames`: their replace-one sensitivity is never below
    the add/remove one), because x's removal and y's addition touch each partition at most once each and
    a partition touched by both sees one replacement. Row-level releases on a partition have no such bound:
    a dataset holding an active one is spent, with an unbounded loss; its reports say so, ``verify()``
    reports it, and every release on it is refused
    (:func:`~dp_pipeline.accounting._verify.unbounded_reading`). Releases naming a partition are refused on
    such a dataset; whole-dataset releases are checked against this reading.
    """

    rule: BudgetRule
    relation: Relation = DEFAULT_RELATION
    partitions: int | None = None

    @property
    def guarantee(self) -> Guarantee:
        return self.rule.budget

    @property
    def legacy(self) -> bool:
        """Whether the dataset was declared partitioned under replace-one (by an earlier version), so that
        its partitions are read without parallel composition."""
        return self.partitions is not None and self.relation != "add_remove"

    def state(self) -> dict[str, Any]:
        """The head row's ``budget`` JSON (``"partitions"`` only for a partitioned dataset)."""
        declared = {} if self.partitions is None else {"partitions": self.partitions}
        return {
            "guarantee": self.guarantee.to_dict(),
            **self.rule.parameters(),
            "relation": self.relation,
            **declared,
        }

    def composed(self, totals: Totals) -> Totals:
        """What reports show and plans are priced against: totals at least those of every person (see the
        class notes); ``totals`` themselves for a dataset that is not partitioned."""
        if self.partitions is None:
            return totals
        return totals.summed() if self.legacy else totals.largest(self.partitions)

    def fits(self, totals: Totals) -> bool:
        """Whether every person's totals are within the budget under the rule (see the class notes)."""
        if self.partitions == 1 and not self.legacy:
            return all(self.rule.fits(person) for person in totals.each_person())
        return self.rule.fits(self.composed(totals))

    def fitted_when_written(self, totals: Totals) -> bool:
        """Whether a writer of this ledger could have accepted ``totals``: :meth:`fits`, or for a
        :attr:`legacy` dataset the parallel rule its earliest records were accepted under (whose reading
        ``verify()`` reports instead of refusing the chain)."""
        if self.legacy:
            assert self.partitions is not None
            return self.rule.fits(totals.largest(self.partitions))
        return self.fits(totals)

    @classmethod
    def from_state(cls, budget: Mapping[str, Any], method: str, where: str) -> DatasetBudget:
        """Read a head row's (or a budget record's) budget and stored rule name; LedgerError if unreadable."""
        try:
            guarantee = guarantee_from_dict(dict(budget["guarantee"]))
        except (KeyError, TypeError, InvalidParameterError) as err:
            raise LedgerError(f"{where}: unreadable budget {budget!r} ({err})") from None
        rule = stored_rule(method, guarantee, where).from_parameters(guarantee, budget, where)
        # a budget stored before relations existed has none: it is read as the default
        relation = budget.get("relation", DEFAULT_RELATION)
        if relation not in RELATIONS:
            raise LedgerError(f"{where}: unknown neighbouring relation {relation!r}")
        partitions = budget.get("partitions")
        if partitions is not None and (type(partitions) is not int or partitions < 1):
            raise LedgerError(f"{where}: unreadable number of partitions per person {partitions!r}")
        return cls(rule, relation, partitions)

    def head_state(self, totals: Totals) -> DatasetState:
        """What the head row caches after a record that leaves the totals at ``totals``."""
        return DatasetState(self.state(), self.rule.name, totals.to_json())


@functools.lru_cache(maxsize=256)
def _parse_budget(budget_json: str, method: str, where: str) -> DatasetBudget:
    return DatasetBudget.from_state(json.loads(budget_json), method, where)


def budget_of(state: DatasetState, where: str) -> DatasetBudget:
    """The budget of a head state (parsed once per distinct budget)."""
    return _parse_budget(canonical_json(dict(state.budget)), state.method, where)


# ------------------------------------------------------------------------------------------------------
# record bodies


@dataclass(frozen=True)
class BudgetBody:
    """A budget set or changed: the budget, its rule and relation, the one it replaced, who and why."""

    kind: ClassVar[RecordKind] = "budget"
    budget: DatasetBudget
    previous: Guarantee | None
    reason: str | None
    actor: str
    totals: Totals

    def to_json(self) -> dict[str, Any]:
        state = self.budget.state()
        return {
            "budget": state.pop("guarantee"),
            "method": self.budget.rule.name,
            **state,
            "previous": None if self.previous is None else self.previous.to_dict(),
            "reason": self.reason,
            "actor": self.actor,
            "totals": self.totals.to_json(),
        }


@dataclass(frozen=True)
class ReserveBody:
    """A reservation: the request as stated (events, group size, plan, δ), what it was charged and the totals
    after it. ``spend``: the charge of one release made by ``spend`` (its own release, so that nothing can
    be paid from it; recorded only when true). The JSON also states the pricing the charge was made with
    (``"pricing"``: :data:`~dp_pipeline.accounting._composition.PRICING`; absent in earlier ledgers), which
    verify uses to choose between re-pricing exactly and the proven lower bound
    (:func:`~dp_pipeline.accounting._pricing.charge_verifies`)."""

    kind: ClassVar[RecordKind] = "reserve"
    label: str | None
    group_size: int
    plan: bool
    delta: float | None
    relation: Relation
    events: list[dict[str, Any]]
    cost: Guarantee
    composition: str
    charge: Charge
    totals: Totals
    partitions: tuple[str, ...] = ()
    spend: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            **_request(self.events, self.group_size, self.plan, self.delta, self.partitions),
            "relation": self.relation,
            "cost": self.cost.to_dict(),
            "composition": self.composition,
            "charge": self.charge.to_json(),
            "pricing": PRICING,
            "totals": self.totals.to_json(self.partitions),
            **({"spend": True} if self.spend else {}),  # absent when false: as ledgers before
        }


@dataclass(frozen=True)
class CommitBody:
    """A reservation committed: the totals after it."""

    kind: ClassVar[RecordKind] = "commit"
    totals: Totals

    def to_json(self) -> dict[str, Any]:
        return {"totals": self.totals.to_json(())}


@dataclass(frozen=True)
class CancelBody:
    """A reservation cancelled (returned to the budget): why, by whom (``by``: the attempt or an operator),
    and the totals after it. Stored as a ``"release"`` record, the name earlier versions gave it."""

    kind: ClassVar[RecordKind] = "release"
    reason: str
    actor: str
    by: str
    totals: Totals
    partitions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        totals = self.totals.to_json(self.partitions)
        return {"reason": self.reason, "actor": self.actor, "by": self.by, "totals": totals}


@dataclass(frozen=True)
class PayBody:
    """A release paid from a reservation: the release as a reservation would record it (``release``: its
    request, charge and cost, and the dataset's totals, which a payment leaves unchanged), ``paid`` (the
    exact sum of the charges of every release paid from the reservation so far, this one included) and
    ``route`` (why they fit it: ``"adaptive"``, their sum is within its charge under the rule; ``"plan"``,
    they are releases its plan declared).

    ``share``: the attempt's share of the reservation the payment belongs to (see
    :mod:`dp_pipeline.accounting._payments`), absent for a payment that belongs to none. Without ``cap`` the
    payment claims the share (it counts against the reservation, and ``paid`` sums the reservation's
    payments); with ``cap`` (the claim's charge) it is paid within the share, and ``paid`` and ``route``
    are the share's."""

    kind: ClassVar[RecordKind] = "pay"
    release: ReserveBody
    paid: Charge
    route: str
    share: str | None = None
    cap: Charge | None = None

    def to_json(self) -> dict[str, Any]:
        shared: dict[str, Any] = {} if self.share is None else {"share": self.share}  # absent: as before
        if self.cap is not None:
            shared["cap"] = self.cap.to_json()
        return {**self.release.to_json(), "paid": self.paid.to_json(), "route": self.route, **shared}


@dataclass(frozen=True)
class ShrinkBody:
    """A reservation's charge replaced by the tight total of a sub-plan: the sub-plan's events as stated (its
    group size and δ are the reservation's), its cost and charge, the pricing it was made with (as
    :class:`ReserveBody`), why, by whom, and the totals after it (with the parts of the partitions the
    reservation named, which it changed)."""

    kind: ClassVar[RecordKind] = "shrink"
    events: list[dict[str, Any]]
    cost: Guarantee
    composition: str
    charge: Charge
    reason: str
    actor: str
    totals: Totals
    partitions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "cost": self.cost.to_dict(),
            "composition": self.composition,
            "charge": self.charge.to_json(),
            "pricing": PRICING,
            "reason": self.reason,
            "actor": self.actor,
            "totals": self.totals.to_json(self.partitions),
        }


def _request(events: Any, group_size: Any, plan: Any, delta: Any, partitions: Any = ()) -> dict[str, Any]:
    named = {"partitions": list(partitions)} if partitions else {}  # absent when none: as ledgers before
    return {"events": events, "group_size": group_size, "plan": plan, "delta": delta, **named}


def request_of(events: Any, group_size: Any, plan: Any, delta: Any, partitions: Any = ()) -> str:
    """What a reservation asked for (its stated events, group size, plan, δ and partitions), as canonical
    JSON: a key reused for another request is refused."""
    return canonical_json(_request(events, group_size, plan, delta, partitions))


def partitions_of(body: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The partitions a recorded reservation named (none: the whole dataset); LedgerError if unreadable."""
    named = body.get("partitions", ())
    if not isinstance(named, list | tuple) or not all(isinstance(name, str) for name in named):
        raise LedgerError(f"{where}: unreadable partitions {named!r}")
    return tuple(named)


Body = BudgetBody | ReserveBody | CommitBody | CancelBody | PayBody | ShrinkBody


def append(
    tx: LedgerTransaction,
    body: Body,
    state: DatasetState,
    *,
    key: str | None = None,
    reservation: int | None = None,
) -> LedgerRecord:
    """Append ``body`` as a record of its kind and make ``state`` the dataset's cached state."""
    return tx.append(body.kind, body.to_json(), state, key=key, reservation=reservation)


def with_totals(state: DatasetState, totals: Totals) -> DatasetState:
    """The head state ``state`` (its budget as stored) with the running totals ``totals``."""
    return DatasetState(state.budget, state.method, totals.to_json())


def append_commit(
    tx: LedgerTransaction, state: DatasetState, totals: Totals, key: str, seq: int
) -> LedgerRecord:
    """Commit the open reservation ``seq`` (idempotency ``key``) of a dataset whose totals are ``totals``."""
    done = totals.committed()
    return append(tx, CommitBody(done), with_totals(state, done), key=key, reservation=seq)
