"""BudgetPolicy: the pure calculator of a dataset's budget, and the one reducer of its ledger.

A :class:`BudgetPolicy` is a dataset's budget (guarantee, composition rule, neighbouring relation and, for
a partitioned dataset, L): it prices a :class:`~dp_pipeline.accounting.Request`
(:meth:`~BudgetPolicy.price`), admits a price into running totals or refuses it
(:meth:`~BudgetPolicy.admit`), says what remains (:meth:`~BudgetPolicy.remaining`), and applies one ledger
record to the state the records before it left (:meth:`~BudgetPolicy.apply`, through :func:`apply`).

The accountant's writes and ``verify()`` decide with the same code: a write prices and admits with the
policy, and every record it appends is applied by :func:`apply` inside the same locked transaction before
it is committed (:mod:`~dp_pipeline.accounting._incremental`); ``verify()`` folds :func:`apply` over the
whole chain (:mod:`~dp_pipeline.accounting._verify`). A record :func:`apply` refuses is never committed, and
a ledger whose records it refuses does not verify. The allocation and the plan checks price and admit with
the policy too, without a ledger.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dp_pipeline.accounting import _pricing as pricing
from dp_pipeline.accounting._checks import check_budget, check_relation
from dp_pipeline.accounting._payments import Holding, Paid, Share, event_keys, route, share_of
from dp_pipeline.accounting._pricing import PlanRequest, Price, charge_verifies, recorded_request_price
from dp_pipeline.accounting._records import DatasetBudget, budget_of, partitions_of
from dp_pipeline.accounting._request import Request
from dp_pipeline.accounting.ledger._base import DatasetHead, LedgerRecord, canonical_json
from dp_pipeline.accounting.rules import Charge, Totals, user_rule
from dp_pipeline.events import DEFAULT_RELATION, PrivacyEvent, Relation
from dp_pipeline.exceptions import InvalidParameterError, LedgerError
from dp_pipeline.guarantees import Guarantee, guarantee_from_dict

__all__ = ["BudgetPolicy", "LedgerState", "Refusal", "Violation", "apply", "head_policy", "holding_request"]


@dataclass(frozen=True)
class Refusal:
    """A charge the budget does not admit, and the totals it would have left."""

    charge: Charge
    after: Totals


@dataclass(frozen=True)
class Violation:
    """A record no writer of this ledger could have appended: what is wrong with it."""

    problem: str

    def __str__(self) -> str:
        return self.problem


@dataclass(frozen=True)
class BudgetPolicy:
    """A dataset's budget as a pure calculator: price, admit, remaining, and the ledger's reducer.

    Parameters
    ----------
    budget : DatasetBudget
        The guarantee, the rule, the relation and L (see :meth:`declare` to build one from its parts).

    Notes
    -----
    **Admission.** A price is admitted into totals T when the totals after it, T' = T ⊕ charge (added to
    the partitions it names, or to the whole dataset), fit the budget under its rule for every person
    (:meth:`~dp_pipeline.accounting._records.DatasetBudget.fits`). The rule's filter is valid for charges
    chosen adaptively (each rule's docstring), and parallel composition over partitions for add/remove
    neighbours (the proof is in :class:`~dp_pipeline.accounting._records.DatasetBudget`): every admitted
    sequence of requests therefore satisfies the budget's guarantee. Admission depends only on the prices
    and totals, never on the data.

    **Reducer.** :meth:`apply` re-prices what a record asked under the budget in force and re-admits its
    charge, so a ledger verifies exactly when each record is one the policy would have accepted (see
    :func:`apply` for every check).

    References
    ----------
    Rogers, Roth, Ullman & Vadhan, "Privacy odometers and filters: pay-as-you-go composition", NeurIPS 2016.
    Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy", arXiv:2210.17520, 2022.

    Examples
    --------
    >>> from dp_pipeline import ApproxDP, PureDP
    >>> from dp_pipeline.accounting._request import Request
    >>> policy = BudgetPolicy.declare(ApproxDP(1.0, 1e-6))
    >>> price = policy.price(Request.one(PureDP(0.25)), policy.empty())
    >>> totals = policy.admit(policy.empty(), price.charge)
    >>> policy.remaining(totals)[0]
    ApproxDP(epsilon=0.75, delta=1e-06)
    """

    budget: DatasetBudget

    @classmethod
    def declare(
        cls,
        guarantee: Guarantee,
        rule: str = "auto",
        relation: Relation = DEFAULT_RELATION,
        partitions: int | None = None,
    ) -> BudgetPolicy:
        """The policy of a budget declared as ``set_budget(..., rule=, relation=, partitions=)`` would."""
        chosen = check_relation(relation) or DEFAULT_RELATION
        currency = check_budget(guarantee)
        return cls(DatasetBudget(user_rule(rule, currency).create(currency), chosen, partitions))

    @property
    def guarantee(self) -> Guarantee:
        """The budget."""
        return self.budget.guarantee

    def empty(self) -> Totals:
        """The totals of a dataset nothing was charged to."""
        return self.budget.rule.empty()

    def price(self, request: Request, totals: Totals) -> Price:
        """What ``request`` costs against ``totals`` (a plan's tight total may depend on what is spent, e.g.
        the δ left); an empty plan costs nothing."""
        budget = self.budget
        if request.is_plan and not request.events:
            return pricing.zero(budget)
        composed = budget.composed(totals)
        return pricing.price(
            budget, request.events, request.group_size, request.is_plan, request.delta, composed
        )

    def admit(
        self, totals: Totals, charge: Charge, partitions: Sequence[str] = (), *, as_written: bool = False
    ) -> Totals | Refusal:
        """The totals after ``charge`` is added to ``partitions`` (none: the whole dataset), or the
        :class:`Refusal` of it when they would not fit the budget for every person. ``as_written``: judge
        as a writer of this ledger could have
        (:meth:`~dp_pipeline.accounting._records.DatasetBudget.fitted_when_written`), for the reducer."""
        after = self.budget.rule.add(totals, charge, partitions)
        fits = self.budget.fitted_when_written if as_written else self.budget.fits
        return after if fits(after) else Refusal(charge, after)

    def quote(self, requests: Sequence[Request], totals: Totals) -> tuple[list[Price], bool]:
        """Each request's price against the totals the requests before it leave, and whether the budget
        admits them all, one after the other (the prices stop at the first refused)."""
        prices = []
        for request in requests:
            price = self.price(request, totals)
            prices.append(price)
            after = self.admit(totals, price.charge, request.partitions)
            if isinstance(after, Refusal):
                return prices, False
            totals = after
        return prices, True

    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        """What is left of the budget after ``totals`` (rounded down), and the rule's method."""
        return self.budget.rule.remaining(self.budget.composed(totals))

    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        """What ``totals`` spent (rounded up), and the rule's method."""
        return self.budget.rule.spent(self.budget.composed(totals))

    def apply(self, state: LedgerState, record: LedgerRecord) -> LedgerState:
        """The state after a record that is not a budget record (see :func:`apply`); LedgerError naming
        what is wrong with it."""
        where = f"dataset {state.dataset!r}, record seq={record.seq}"
        totals = state.totals
        assert totals is not None
        if record.kind == "reserve":
            totals, touched = _reserve(self, state, record, totals, where)
        elif record.kind in ("pay", "shrink", "commit", "release"):
            totals, touched = _naming(self, state, record, totals, where)
        else:
            raise LedgerError(f"{where}: unknown record kind {record.kind!r}")
        _check_running(self, record, totals, touched, where)
        return replace(state, totals=totals)


@dataclass(frozen=True)
class LedgerState:
    """What a dataset's records, applied in chain order, leave: the policy in force, the running totals,
    the budget record's head state, and per reservation what it holds, what was paid from it, its shares,
    the partitions it named, whether it is a spend's own charge and how it ended; the keys used.

    A state is handed on: :func:`apply` returns the next state, which shares the bookkeeping of the one it
    was given; the one given is not used again (the fold in :mod:`~dp_pipeline.accounting._verify` and the
    incremental check keep only the latest).
    """

    dataset: str
    policy: BudgetPolicy | None = None
    totals: Totals | None = None
    budget_state: tuple[dict[str, Any], str] | None = None
    held: dict[int, Holding] = field(default_factory=dict)
    paid: dict[int, Paid] = field(default_factory=dict)
    shares: dict[int, dict[str, Share]] = field(default_factory=dict)
    named: dict[int, tuple[str, ...]] = field(default_factory=dict)
    spends: set[int] = field(default_factory=set)
    ended: dict[int, str] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)

    def check_head(self, head: DatasetHead | None) -> str | None:
        """Whether ``head`` caches the budget, rule settings and totals applied so far: a problem, or None."""
        policy, totals, budget_state = self.policy, self.totals, self.budget_state
        if head is None or policy is None or totals is None or budget_state is None:
            return None
        where = f"dataset {self.dataset!r}, head row"
        try:
            if not policy.budget.rule.read_totals(head.state.totals, where).same_as(totals):
                return f"{where}: cached totals {dict(head.state.totals)} differ from the records' sum"
            cached = (dict(head.state.budget), head.state.method)
        except LedgerError as err:
            return str(err)
        except (AttributeError, KeyError, TypeError, ValueError, InvalidParameterError) as err:
            return f"{where}: unreadable ({type(err).__name__}: {err})"
        if canonical_json(cached[0]) != canonical_json(budget_state[0]) or cached[1] != budget_state[1]:
            return f"{where}: cached budget {cached} differs from the last budget record"
        return None


def apply(state: LedgerState, record: LedgerRecord) -> LedgerState | Violation:
    """The reducer of a dataset's ledger: the state after ``record`` (the next in the chain), or the
    :class:`Violation` that no writer could have appended it.

    Every reservation is re-priced under the budget in force when it was made and must be admitted by it,
    so a budget raised outside dp-pipeline for a spend and put back afterwards is found. Every release paid
    from a reservation is re-priced too, its running sum recomputed, and the payments so far must fit what
    the reservation held (an over-payment, or a forged payment that understates its cost, is found); a
    shrink must keep a sub-plan that costs no more and still covers the payments; each attempt's share is
    claimed once, and the releases paid within it fit its claim (the cap it records); a reservation that
    paid for a release cannot have been cancelled; nothing is paid from a spend's own charge, and one
    release (not a plan) that was committed is not shrunk. A record of another kind, a budget record whose
    stored rule settings its budget does not allow (an inflated μ limit), a charge below its request's
    price (a negative one included) and running totals that are not the sum of the charges are all found.
    """
    try:
        if record.kind == "budget":
            return _set_budget(state, record)
        if state.policy is None or state.totals is None:
            where = f"dataset {state.dataset!r}, record seq={record.seq}"
            raise LedgerError(f"{where}: a {record.kind} record before any budget was set")
        return state.policy.apply(state, record)
    except LedgerError as err:
        return Violation(str(err))
    except (AttributeError, KeyError, TypeError, ValueError, InvalidParameterError) as err:
        return Violation(
            f"dataset {state.dataset!r}, record seq={record.seq}: unreadable record "
            f"({type(err).__name__}: {err})"
        )


def _check_running(
    policy: BudgetPolicy, record: LedgerRecord, totals: Totals, touched: Collection[str] | None, where: str
) -> None:
    """LedgerError unless the running totals a record wrote are the records' sum."""
    stored = policy.budget.rule.read_totals(record.body.get("totals"), where)
    if not stored.same_as(totals if touched is None else totals.only(touched)):
        raise LedgerError(
            f"{where}: running totals {stored.to_json()} differ from the records' sum {totals.to_json()}"
        )


def _stored_budget(body: Mapping[str, Any], where: str) -> tuple[DatasetBudget, dict[str, Any], str]:
    """The budget a budget record sets, and the head state it implies (as the record wrote it)."""
    method = str(body.get("method"))
    guarantee = guarantee_from_dict(dict(body["budget"]))
    budget = DatasetBudget.from_state({**body, "guarantee": body["budget"]}, method, where)
    state: dict[str, Any] = {
        "guarantee": guarantee.to_dict(),
        **{name: body.get(name) for name in budget.rule.parameters()},
    }
    if "relation" in body:  # budget records written before relations existed have none
        state["relation"] = body["relation"]
    if budget.partitions is not None:
        state["partitions"] = budget.partitions
    return budget, state, method


def _set_budget(state: LedgerState, record: LedgerRecord) -> LedgerState:
    where = f"dataset {state.dataset!r}, record seq={record.seq}"
    budget, head_state, method = _stored_budget(record.body, where)
    problem = budget.rule.check_parameters()
    if problem:
        raise LedgerError(f"{where}: {problem}")
    totals = budget.rule.empty() if state.totals is None else budget.rule.carry(state.totals)
    if not budget.fitted_when_written(totals):
        raise LedgerError(f"{where}: the budget {budget.rule.describe()} is below what was already spent")
    policy = BudgetPolicy(budget)
    _check_running(policy, record, totals, None, where)
    return replace(state, policy=policy, totals=totals, budget_state=(head_state, method))


def _reserve(
    policy: BudgetPolicy, state: LedgerState, record: LedgerRecord, totals: Totals, where: str
) -> tuple[Totals, Collection[str]]:
    budget, body = policy.budget, record.body
    if record.key is None or record.key in state.keys:
        raise LedgerError(f"{where}: missing or repeated idempotency key {record.key!r}")
    state.keys[record.key] = record.seq
    charge = budget.rule.read_charge(body.get("charge"), where)
    touched = partitions_of(body, where)
    if touched and budget.partitions is None:
        raise LedgerError(f"{where}: the reservation names partitions of a dataset that is not partitioned")
    now = recorded_request_price(budget, body, budget.composed(totals))
    if not charge_verifies(budget, charge, now, PlanRequest.of(body)):
        raise LedgerError(
            f"{where}: the recorded charge {charge.to_json()} is below what its request costs "
            f"under the budget in force, {budget.rule.describe()}"
        )
    state.held[record.seq] = Holding.of(body, budget.rule, where)
    state.paid[record.seq] = Paid()
    state.named[record.seq] = touched
    if body.get("spend"):
        state.spends.add(record.seq)
    after = policy.admit(totals, charge, touched, as_written=True)
    if isinstance(after, Refusal):
        raise LedgerError(
            f"{where}: the reservation does not fit the budget in force, "
            f"{budget.rule.describe()}; it was accepted against another budget (the stored "
            "budget was changed outside dp-pipeline)"
        )
    return after, touched


def _naming(
    policy: BudgetPolicy, state: LedgerState, record: LedgerRecord, totals: Totals, where: str
) -> tuple[Totals, Collection[str]]:
    """Apply a record that names a reservation (pay, shrink, commit, release)."""
    target = _named_reservation(state, record, where)
    named = state.named[target]
    if record.kind in ("pay", "shrink"):
        # a payment stores the parts it names (unchanged), a shrink those of its reservation
        touched = partitions_of(record.body, where) if record.kind == "pay" else named
        step = _pay if record.kind == "pay" else _shrink
        problem, totals = step(policy, state, record, totals, target)
        if problem:
            raise LedgerError(f"{where}: {problem}")
        return totals, touched
    state.ended[target] = record.kind
    if record.kind == "commit":
        return totals.committed(), ()
    return policy.budget.rule.remove(totals, state.held[target].charge, named), named


def _named_reservation(state: LedgerState, record: LedgerRecord, where: str) -> int:
    """The reservation a pay, shrink, commit or release record names, if it may name it."""
    target, ended = record.reservation, state.ended
    if target is None or target not in state.held:
        problem = f"{record.kind} of seq={target}, which is not a reservation"
    elif record.kind not in ("pay", "shrink"):
        problem = (
            f"reservation seq={target} was already committed or released"
            if target in ended
            else f"reservation seq={target} was cancelled after it paid for releases"
            if record.kind == "release" and state.paid[target].charges
            else ""
        )
    elif state.keys.get(record.key or "") != target:
        problem = f"the {record.kind} names seq={target} but carries another key"
    elif ended.get(target) == "release":
        problem = f"a {record.kind} from reservation seq={target}, which was cancelled"
    elif record.kind == "pay" and target in state.spends:
        problem = f"a payment from seq={target}, a spend that holds nothing to pay from"
    elif record.kind == "shrink" and not state.held[target].plan and ended.get(target) == "commit":
        problem = f"a shrink of seq={target}, one committed release (not a plan)"
    elif (
        record.kind == "pay"
        and state.named[target]
        and not set(partitions_of(record.body, where)) <= set(state.named[target])
    ):
        problem = f"a payment reads partitions that reservation seq={target} did not name"
    else:
        problem = ""
    if problem:
        raise LedgerError(f"{where}: {problem}")
    assert target is not None
    return target


def _pay(
    policy: BudgetPolicy, state: LedgerState, record: LedgerRecord, totals: Totals, target: int
) -> tuple[str | None, Totals]:
    """Apply a ``pay`` record: the problem it shows (or None) and the totals (a payment leaves them)."""
    budget, body = policy.budget, record.body
    rule, where = budget.rule, f"record seq={record.seq}"
    charge = rule.read_charge(body.get("charge"), where)
    holding, payments = state.held[target], state.paid[target]
    shares = state.shares.setdefault(target, {})
    now = recorded_request_price(budget, body, budget.composed(totals))
    if not charge_verifies(budget, charge, now, PlanRequest.of(body)):
        return f"the recorded charge {charge.to_json()} is below what the paid release costs", totals
    name, within = share_of(body, where)
    if within:
        return _pay_within(rule, body, charge, shares, name, where, target), totals
    if name is not None and name in shares:
        return f"the share {name!r} of seq={target} is claimed twice", totals
    if (name is None and shares) or (name is not None and payments.charges and not shares):
        return f"reservation seq={target} paid both shares and releases of its own", totals
    payments = payments.plus(charge, body["events"], int(body["group_size"]))
    total = rule.read_charge(body.get("paid"), where)
    if total.to_json() != payments.total(rule).to_json():
        return f"the paid sum {total.to_json()} differs from the sum of the payments", totals
    if route(rule, holding, payments) is None:
        return (
            f"the releases paid from reservation seq={target} exceed what it holds ({holding.cost!r}): "
            "an over-payment",
            totals,
        )
    state.paid[target] = payments
    if name is not None:
        shares[name] = Share.claimed(body, rule, where)
    return None, totals


def _shrink(
    policy: BudgetPolicy, state: LedgerState, record: LedgerRecord, totals: Totals, target: int
) -> tuple[str | None, Totals]:
    """Apply a ``shrink`` record: the problem it shows (or None) and the totals after it."""
    budget, body = policy.budget, record.body
    rule, where = budget.rule, f"record seq={record.seq}"
    charge = rule.read_charge(body.get("charge"), where)
    holding, partitions = state.held[target], state.named[target]
    kept = holding.shrunk(body, rule, where)
    if event_keys(kept.events) - event_keys(holding.events):
        return f"the shrink of seq={target} keeps releases the reservation did not declare", totals
    rest = rule.remove(totals, holding.charge, partitions)
    events = [PrivacyEvent.from_dict(dict(e)) for e in kept.events]
    price = policy.price(holding_request(holding, partitions).keeping(events), rest)
    kept_plan = PlanRequest(events, holding.group_size, True)
    if not charge_verifies(budget, charge, price, kept_plan) or not rule.fits_within(
        charge, holding.charge
    ):
        return f"the shrink of seq={target} is below its sub-plan's cost or above what it held", totals
    if route(rule, kept, state.paid[target]) is None:
        return f"the payments from seq={target} do not fit what its shrink kept", totals
    state.held[target] = kept
    return None, rule.add(rest, charge, partitions)


def holding_request(held: Holding, partitions: tuple[str, ...]) -> Request:
    """The request a reservation's sub-plans are priced as: a plan with its group size, partitions and δ."""
    events = tuple(PrivacyEvent.from_dict(dict(e)) for e in held.events)
    return Request(events, held.group_size, partitions, "plan", held.delta)


def _pay_within(
    rule: Any,
    body: Mapping[str, Any],
    charge: Any,
    shares: dict[str, Share],
    name: Any,
    where: str,
    target: int,
) -> str | None:
    """Apply a payment within an attempt's share: the problem it shows (or None); updates the share."""
    share = shares.get(name)
    if share is None:
        return f"a payment within the share {name!r} of seq={target}, which was never claimed"
    if rule.read_charge(body.get("cap"), where).to_json() != share.held.charge.to_json():
        return f"the cap recorded for the share {name!r} differs from its claim's charge"
    now = share.plus(charge, body["events"], int(body["group_size"]))
    if rule.read_charge(body.get("paid"), where).to_json() != now.paid.total(rule).to_json():
        return f"the paid sum of the share {name!r} differs from the sum of its payments"
    if route(rule, now.held, now.paid) is None:
        return (
            f"the releases paid within the share {name!r} of seq={target} exceed its claim "
            f"({share.held.cost!r}): an over-payment"
        )
    shares[name] = now
    return None


def head_policy(head: DatasetHead, dataset: str) -> tuple[BudgetPolicy, Totals]:
    """The policy a dataset's head row caches and its running totals (LedgerError if unreadable)."""
    where = f"dataset {dataset!r}"
    budget = budget_of(head.state, where)
    return BudgetPolicy(budget), budget.rule.read_totals(head.state.totals, where)
