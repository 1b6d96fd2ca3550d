"""The accountant's writes as functions of one locked transaction: what each decides and appends.

Each function runs inside ``store.atomic`` (through the accountant's incremental check), decides with the
dataset's :class:`~dp_pipeline.accounting.BudgetPolicy` from the head it reads under the lock, and
appends its records; every record appended is then applied by the ledger's reducer
(:func:`~dp_pipeline.accounting._policy.apply`) before the transaction commits. A refusal raises before
anything is appended, so it writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dp_pipeline.accounting import _pricing as pricing
from dp_pipeline.accounting._checks import check_parallel, check_partitioned
from dp_pipeline.accounting._payments import Holding, Paid, event_keys, read_reservation, read_shares, route
from dp_pipeline.accounting._policy import BudgetPolicy, Refusal, holding_request
from dp_pipeline.accounting._records import (
    BudgetBody,
    CancelBody,
    DatasetBudget,
    PayBody,
    ReserveBody,
    ShrinkBody,
    append,
    append_commit,
    budget_of,
    partitions_of,
    request_of,
    with_totals,
)
from dp_pipeline.accounting._reports import budget_report, partition_reports
from dp_pipeline.accounting._request import Request
from dp_pipeline.accounting.ledger import (
    DatasetHead,
    LedgerRecord,
    LedgerTransaction,
    ReservationRecords,
)
from dp_pipeline.accounting.rules import BudgetRule, Totals
from dp_pipeline.events import DEFAULT_RELATION, PrivacyEvent, Relation
from dp_pipeline.exceptions import (
    BudgetExceededError,
    InvalidParameterError,
    KeyAlreadyUsedError,
    LedgerError,
    UnknownDatasetError,
    UnsupportedCompositionError,
)
from dp_pipeline.guarantees import ApproxDP, Guarantee

__all__ = ["Dataset", "Reading"]

Reading = Callable[[DatasetHead, DatasetBudget], "str | None"]
"""Why a dataset's loss is unbounded at a head (a dataset declared partitioned under replace-one by an
earlier version), or None: see :func:`~dp_pipeline.accounting._verify.unbounded_reading`."""


@dataclass(frozen=True)
class Dataset:
    """One dataset's writes inside a transaction: its name and how its unbounded reading is found."""

    name: str
    unbounded: Reading

    @property
    def where(self) -> str:
        return f"dataset {self.name!r}"

    def head(self, tx: LedgerTransaction) -> tuple[DatasetHead, BudgetPolicy, Totals]:
        """The head read under the lock, the policy it caches and its totals."""
        head = tx.head
        if head is None:
            raise UnknownDatasetError(self.name)  # named in full by the accountant
        budget = budget_of(head.state, self.where)
        return head, BudgetPolicy(budget), budget.rule.read_totals(head.state.totals, self.where)

    def set_budget(
        self,
        tx: LedgerTransaction,
        rule: BudgetRule,
        relation: Relation | None,
        partitions: int | None,
        reason: str | None,
        actor: str,
    ) -> None:
        """Set or change the budget to ``rule`` (with its guarantee), ``relation`` and ``partitions`` (None:
        those of the budget it replaces, or the defaults); nothing is written when it is unchanged."""
        head = tx.head
        previous = None if head is None else budget_of(head.state, self.where)
        if previous is None:
            budget = DatasetBudget(rule, relation or DEFAULT_RELATION, partitions)
        else:
            budget = DatasetBudget(rule, relation or previous.relation, partitions or previous.partitions)
        if previous == budget:
            return
        check_parallel(self.name, previous, budget)
        if head is None or previous is None:
            totals = budget.rule.empty()
        else:
            read = previous.rule.read_totals(head.state.totals, self.where)
            totals = changed_totals(self.name, previous, budget, read)
        body = BudgetBody(budget, None if previous is None else previous.guarantee, reason, actor, totals)
        append(tx, body, budget.head_state(totals))

    def reserve(
        self, tx: LedgerTransaction, request: Request, key: str, commit: bool, priced: pricing.Price | None
    ) -> ReservationRecords:
        """Check and reserve ``request`` under ``key`` (and commit it at once with ``commit``).

        ``priced``: a price computed outside the lock, used when the budget and what of the totals a plan's
        price depended on are unchanged."""
        head, policy, totals = self.head(tx)
        budget, relation = policy.budget, policy.budget.relation
        found = None if request.key is None else tx.reservation(key=key)
        if found is not None:  # a key pays for one release: every later call is refused
            check_same_request(self.name, key, found, request.recorded(relation))
            raise KeyAlreadyUsedError(self.name, key, found.status)
        check_partitioned(self.name, budget, request.partitions)
        refuse_unbounded(self.unbounded(head, budget))
        price = priced
        basis = budget.rule.plan_basis(budget.composed(totals))
        if price is None or price.budget != budget or (price.basis is not None and price.basis != basis):
            price = policy.price(request, totals)
        after = policy.admit(totals, price.charge, request.partitions)
        if isinstance(after, Refusal):
            raise self.exceeded(policy, totals, request, price)
        body = ReserveBody(
            request.label,
            request.group_size,
            request.is_plan,
            request.delta,
            relation,
            request.stated(relation),
            price.cost,
            price.method,
            price.charge,
            after,
            request.partitions,
            spend=request.settles(commit),
        )
        record = append(tx, body, with_totals(head.state, after), key=key)
        end = append_commit(tx, head.state, after, key, record.seq) if commit else None
        return ReservationRecords(record, end)

    def exceeded(
        self, policy: BudgetPolicy, totals: Totals, request: Request, price: pricing.Price
    ) -> BudgetExceededError:
        """The refusal of ``request`` at ``price`` against ``totals``."""
        budget, k = policy.budget, request.group_size
        spent = budget_report(self.name, "spent", budget, totals)
        remaining = budget_report(self.name, "remaining", budget, totals)
        single = None
        if k > 1:
            single = policy.price(
                Request(request.events, 1, composition=request.composition, delta=request.delta), totals
            ).cost
        return BudgetExceededError(
            self.name,
            price.cost,
            spent.guarantee,
            remaining.guarantee,
            budget.guarantee,
            detail=on_partitions(self.name, budget, totals, request.partitions)
            + pricing.refusal_detail(budget, price),
            group_size=k,
            single=single,
        )

    def commit(self, tx: LedgerTransaction, key: str) -> str:
        """Commit the reservation ``key`` (nothing for a committed one)."""
        head = tx.head
        found = tx.reservation(key=key)
        if head is None or found is None:
            raise LedgerError(f"no reservation with key {key!r} on {self.where}")
        if found.status == "released":
            raise LedgerError(
                f"the reservation with key {key!r} on {self.where} was cancelled (released) and "
                "cannot be committed; if data was read, spend again with a new key"
            )
        if found.status == "open":
            totals = budget_of(head.state, self.where).rule.read_totals(head.state.totals, self.where)
            append_commit(tx, head.state, totals, key, found.reserve.seq)
        return "committed"

    def cancel(self, tx: LedgerTransaction, key: str, reason: str, actor: str, by: str) -> str:
        """Cancel the open reservation ``key``: its charge goes back to the budget."""
        head, found = self.find(tx, key)
        if found.status == "committed":
            raise LedgerError(
                f"the reservation with key {key!r} on {self.where} is committed (its attempt may "
                "have read data) and cannot be cancelled"
            )
        if found.status == "open":
            rule = budget_of(head.state, self.where).rule
            where = f"{self.where}, record seq={found.reserve.seq}"
            held, paid = read_reservation(found, rule, where)
            if paid.charges:
                raise LedgerError(
                    f"the reservation with key {key!r} on {self.where} paid for "
                    f"{len(paid.charges)} release(s) and cannot be cancelled (their data was read); "
                    "commit it"
                )
            partitions = partitions_of(found.reserve.body, where)
            read = rule.read_totals(head.state.totals, self.where)
            totals = rule.remove(read, held.charge, partitions)
            body = CancelBody(reason, actor, by, totals, partitions)
            append(tx, body, with_totals(head.state, totals), key=key, reservation=found.reserve.seq)
        return "released"

    def find(self, tx: LedgerTransaction, key: str) -> tuple[DatasetHead, ReservationRecords]:
        """The head and the reservation ``key``; LedgerError if there is none."""
        head = tx.head
        if head is None:
            raise UnknownDatasetError(self.name)  # named in full by the accountant
        found = tx.reservation(key=key)
        if found is None:
            raise LedgerError(f"no reservation with key {key!r} on {self.where}")
        return head, found

    def holding(
        self, tx: LedgerTransaction, key: str
    ) -> tuple[DatasetHead, ReservationRecords, BudgetPolicy, Totals, Holding, Paid]:
        """The head, the reservation ``key`` (not cancelled), the policy, the totals, what it holds and what
        was paid from it."""
        head, found = self.find(tx, key)
        if found.status == "released":
            raise LedgerError(
                f"the reservation with key {key!r} on {self.where} was cancelled: it holds nothing to pay "
                "from or shrink"
            )
        _, policy, totals = self.head(tx)
        held, paid = read_reservation(found, policy.budget.rule, self.where)
        return head, found, policy, totals, held, paid

    def shrink(
        self, tx: LedgerTransaction, key: str, events: list[PrivacyEvent], reason: str, actor: str
    ) -> ReservationRecords:
        """Lower the reservation ``key`` to the sub-plan ``events`` of what it declared."""
        head, found, policy, totals, held, paid = self.holding(tx, key)
        if not held.plan and found.status == "committed":
            raise LedgerError(
                f"the reservation with key {key!r} on {self.where} is one release, not a plan, "
                "and is committed (its attempt may have read data): it cannot be shrunk. A shrink hands "
                "back the share of a plan's (spend_plan) releases that never started"
            )
        budget, rule = policy.budget, policy.budget.rule
        partitions = partitions_of(found.reserve.body, self.where)
        sub = holding_request(held, partitions).keeping(events)
        stated = sub.stated(budget.relation)
        if event_keys(stated) - event_keys(held.events):
            raise InvalidParameterError(
                f"the releases to keep are not a sub-plan of the reservation {key!r} on {self.where}: "
                "keep only releases it declared, each at most as often",
                "costs",
            )
        if event_keys(stated) == event_keys(held.events):
            return found
        rest = rule.remove(totals, held.charge, partitions)
        price = policy.price(sub, rest)
        if not rule.fits_within(price.charge, held.charge):
            return found  # not cheaper: keep what it holds
        kept = Holding(
            price.charge, price.cost, price.method, tuple(stated), held.plan, held.group_size, held.delta
        )
        if route(rule, kept, paid) is None:
            raise exceeded_holding(self.name, key, budget, held, paid, None, kept)
        after = rule.add(rest, price.charge, partitions)
        body = ShrinkBody(stated, price.cost, price.method, price.charge, reason, actor, after, partitions)
        append(tx, body, with_totals(head.state, after), key=key, reservation=found.reserve.seq)
        return tx.reservation(key=key) or found

    def pay(
        self, tx: LedgerTransaction, key: str, request: Request, claim: str | None, within: str | None
    ) -> LedgerRecord:
        """Pay the release ``request`` from the reservation ``key``: as the claim of the share ``claim``,
        within the share ``within``, or from the reservation alone (see
        :mod:`~dp_pipeline.accounting._payments`)."""
        head, found, policy, totals, held, paid = self.holding(tx, key)
        budget, rule = policy.budget, policy.budget.rule
        if found.reserve.body.get("spend"):
            raise LedgerError(
                f"the reservation with key {key!r} on {self.where} is the charge of the release "
                "that spend() made: it holds nothing to pay from. Pay from a budget reserved for the "
                "work: acct.reserve(...) or acct.spend_plan(...)"
            )
        check_partitioned(self.name, budget, request.partitions)
        refuse_unbounded(self.unbounded(head, budget))
        check_covered(self.name, key, partitions_of(found.reserve.body, self.where), request.partitions)
        request, price = payment_price(policy, request, held, totals)
        shares = read_shares(found, rule, self.where)
        if claim is not None and claim in shares:
            raise KeyAlreadyUsedError(self.name, claim, "committed")
        own = any(r.kind == "pay" and r.body.get("share") is None for r in found.after)
        if (claim is None and within is None and shares) or (claim is not None and own):
            raise LedgerError(
                f"the reservation {key!r} on {self.where} pays either its attempts' shares or "
                "releases of its own, not both: pay within the attempt's share"
            )
        if within is None:
            limit, before = held, paid
        elif within in shares:
            limit, before = shares[within].held, shares[within].paid
        else:
            raise LedgerError(
                f"no share {within!r} was claimed from the reservation {key!r} on {self.where}: "
                "an attempt pays within its share once it claimed it"
            )
        stated = request.stated(budget.relation)
        now = before.plus(price.charge, stated, request.group_size)
        way = route(rule, limit, now)
        if way is None:
            raise exceeded_holding(self.name, key, budget, limit, before, price.cost, limit)
        release = ReserveBody(
            request.label,
            request.group_size,
            request.is_plan,
            request.delta,
            budget.relation,
            stated,
            price.cost,
            price.method,
            price.charge,
            totals,
            request.partitions,
        )
        cap = None if within is None else limit.charge
        body = PayBody(release, now.total(rule), way, claim or within, cap)
        return append(tx, body, with_totals(head.state, totals), key=key, reservation=found.reserve.seq)


def payment_price(
    policy: BudgetPolicy, request: Request, held: Holding, totals: Totals
) -> tuple[Request, pricing.Price]:
    """The request a release paid from a reservation is recorded as, and its price: priced on its own, or,
    when the rule prices it only inside a plan (a μ-GDP release under basic composition has no single
    (ε, δ)), as a plan of one release at the δ the reservation's plan was read at, so that it can be paid
    as one of the releases the plan declared."""
    try:
        return request, policy.price(request, totals)
    except UnsupportedCompositionError as alone:
        delta = plan_payment_delta(held)
        if delta is None:
            raise
        as_plan = Request(
            request.events, request.group_size, request.partitions, "plan", delta, request.key, request.label
        )
        try:
            return as_plan, policy.price(as_plan, totals)
        except UnsupportedCompositionError:
            raise alone from None


def plan_payment_delta(held: Holding) -> float | None:
    """The δ at which a release paid from a plan reservation is priced when its rule cannot price it on its
    own: the δ the plan was read at (asked for, or that of its (ε, δ) cost); None for a reservation that
    is not a plan, or whose cost has no δ."""
    if not held.plan:
        return None
    if held.delta is not None:
        return held.delta
    return held.cost.delta if isinstance(held.cost, ApproxDP) else None


def paid_cost(budget: DatasetBudget, held: Holding, paid: Paid) -> Guarantee:
    """What the releases paid from a reservation cost: their sum under the rule, or, when only the plan
    route holds them, their tight total as a sub-plan."""
    rule = budget.rule
    total = paid.total(rule)
    if rule.fits_within(total, held.charge) or not paid.events:
        return rule.charge_cost(total)
    events = tuple(PrivacyEvent.from_dict(dict(e)) for e in paid.events)
    sub = Request(events, held.group_size, (), "plan", held.delta)
    return BudgetPolicy(budget).price(sub, rule.empty()).cost


def exceeded_holding(
    dataset: str,
    key: str,
    budget: DatasetBudget,
    held: Holding,
    paid: Paid,
    requested: Guarantee | None,
    limit: Holding,
) -> BudgetExceededError:
    """The refusal of a payment (or of a shrink to ``limit``) from the reservation ``key``."""
    rule = budget.rule
    spent = paid_cost(budget, held, paid)
    try:
        left: object = rule.left(limit.charge, paid.total(rule))[0]
    except NotImplementedError:
        left = "(not reported by this rule)"
    shown = spent if requested is None else requested
    detail = (
        f"Rule: {rule.describe()}; the releases paid from a reservation must fit what it holds"
        + (" (a plan's releases fit its tight total)" if held.plan else "")
        + "."
    )
    if requested is None:
        detail = (
            f"The releases already paid from it ({spent}) do not fit the sub-plan's total "
            f"({limit.cost}). Nothing was changed. " + detail
        )
    return BudgetExceededError(dataset, shown, spent, left, limit.cost, detail=detail, reservation=key)


def changed_totals(dataset: str, previous: DatasetBudget, new: DatasetBudget, totals: Totals) -> Totals:
    """The totals a changed budget starts from, or InvalidParameterError (nothing changed) when the change
    is not allowed: a relation or rule changed while spends are active, or a budget below what is spent."""
    if previous.relation != new.relation and totals.active:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {totals.active} active spend(s) charged under the relation"
            f" {previous.relation!r}; it cannot change to {new.relation!r} (the spends were"
            " priced for the other relation). Nothing was changed.",
            "relation",
        )
    if type(previous.rule) is not type(new.rule) and totals.active:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {totals.active} active spend(s) under "
            f"{previous.rule.describe()}; its currency or composition rule cannot change to "
            f"{new.rule.describe()} (switching rules after results are known is not a valid "
            "composition). Nothing was changed.",
            "budget",
        )
    if totals.active and previous.partitions is not None and (new.partitions or 0) < previous.partitions:
        raise InvalidParameterError(
            f"dataset {dataset!r} has {totals.active} active spend(s) composed over at most "
            f"{previous.partitions} partition(s) per person; that cannot fall to {new.partitions} (it would "
            "count what was spent for fewer partitions than were declared). Nothing was changed.",
            "partitions",
        )
    carried = new.rule.carry(totals)
    if not new.fits(carried):
        spent = budget_report(dataset, "spent", previous, totals)
        raise InvalidParameterError(
            f"the new budget {new.guarantee!r} of dataset {dataset!r} is below what is already "
            f"spent ({spent.guarantee!r}, {spent.method}). Nothing was changed.",
            "budget",
        )
    return carried


def on_partitions(dataset: str, budget: DatasetBudget, totals: Totals, partitions: tuple[str, ...]) -> str:
    """What a refusal says first about the partitions a request named (nothing for none)."""
    if not partitions:
        return ""
    reports = partition_reports(dataset, budget, totals)
    spent = ", ".join(
        f"{name!r} (spent {reports[name].guarantee})" if name in reports else f"{name!r} (new: nothing spent)"
        for name in partitions
    )
    return (
        f"The request reads partition(s) {spent}; the dataset's spent amount composes its whole-dataset "
        f"releases and its {budget.partitions} largest partition total(s). "
    )


def check_covered(dataset: str, key: str, reserved: tuple[str, ...], named: tuple[str, ...]) -> None:
    """InvalidParameterError unless a payment that names ``named`` reads only what a reservation on the
    partitions ``reserved`` counted: any data for a reservation of the whole dataset, else some of its
    partitions (a payment naming none would read the whole dataset)."""
    if reserved and not named:
        raise InvalidParameterError(
            f"the reservation {key!r} on dataset {dataset!r} was charged to the partitions {list(reserved)}; "
            f"a release that names no partition reads every partition of {dataset!r}, which it did not "
            f"count: name the partition the release reads (partition=..., or the name "
            f"'{dataset}/<partition>')",
            "partition",
        )
    if reserved and not set(named) <= set(reserved):
        raise InvalidParameterError(
            f"the reservation {key!r} on dataset {dataset!r} was charged to the partitions {list(reserved)}; "
            "a release paid from it must name the partitions it reads, among those",
            "partition",
        )


def refuse_unbounded(reading: str | None) -> None:
    """InvalidParameterError when the dataset's loss is unbounded (``reading`` says why)."""
    if reading is not None:
        raise InvalidParameterError(f"{reading} Nothing was charged.", "dataset")


def check_same_request(dataset: str, key: str, found: ReservationRecords, request: str) -> None:
    """InvalidParameterError when the key already reserved another request (a retry must ask the same)."""
    body = found.reserve.body
    recorded = (body.get("events"), body.get("group_size"), body.get("plan"), body.get("delta"))
    if request_of(*recorded, body.get("partitions", ())) != request:
        raise InvalidParameterError(
            f"the key {key!r} already reserved a different cost on dataset {dataset!r} "
            f"({body.get('cost')}, group size {body.get('group_size')}); use a new key for a different "
            "release",
            "key",
        )
