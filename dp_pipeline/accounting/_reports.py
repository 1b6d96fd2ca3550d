"""What the accountant reports: amounts with the method that produced them, ledger records, releases and
verification results, as plain values; and the audit views that read them from a ledger store
(:func:`ledger_entries`, :func:`open_reservations`, :func:`partition_spending`). Nothing here writes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from dp_pipeline._validation import check_positive_int
from dp_pipeline.accounting._checks import check_name
from dp_pipeline.accounting._pricing import Price
from dp_pipeline.accounting._records import DatasetBudget, budget_of, partitions_of
from dp_pipeline.accounting._request import Request
from dp_pipeline.accounting.ledger import redact_url
from dp_pipeline.accounting.ledger._base import END_KINDS, DatasetHead, LedgerRecord, LedgerStore
from dp_pipeline.accounting.rules import Totals
from dp_pipeline.events import DEFAULT_RELATION, PrivacyEvent, Relation, Sampler, sampler_of
from dp_pipeline.exceptions import InvalidParameterError, LedgerError, UnknownDatasetError
from dp_pipeline.guarantees import ApproxDP, GaussianDP, Guarantee, format_guarantee, guarantee_from_dict

__all__ = [
    "BudgetReport",
    "LedgerEntry",
    "Quote",
    "ReleaseEntry",
    "VerifyReport",
    "budget_report",
    "chain_entries",
    "ended_by",
    "history",
    "ledger_entries",
    "ledger_entry",
    "open_reservations",
    "paid_entry",
    "partition_reading",
    "partition_report",
    "partition_reports",
    "partition_spending",
    "quote_report",
    "read_all",
    "read_chain",
    "read_head",
    "release_entry",
    "unknown_dataset",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class BudgetReport:
    """A number in a dataset's budget currency, and the composition method that produced it.

    Returned by :meth:`PrivacyAccountant.spent`, :meth:`~PrivacyAccountant.remaining`,
    :meth:`~PrivacyAccountant.plan_cost` and :meth:`~PrivacyAccountant.budget`.

    Attributes
    ----------
    dataset : str
        The dataset.
    what : str
        ``"spent"``, ``"remaining"``, ``"plan cost"`` or ``"budget"``.
    guarantee : ApproxDP or GaussianDP
        The amount, in the budget's currency. Spent amounts and costs are rounded up, remaining amounts
        down.
    method : str
        ``"basic"`` (Σε, Σδ), ``"gdp"`` (√Σμᵢ², or its (ε, δ_B) reading), ``"zcdp"`` (the (ε, δ_B) reading
        of Σρᵢ) or ``"pld"`` (tight plan total).
    budget : ApproxDP or GaussianDP
        The dataset's budget.
    open_reservations : int
        Reservations not yet committed or cancelled; they are counted as spent.
    relation : str
        The dataset's neighbouring relation: ``"replace_one"`` or ``"add_remove"``.
    partitions : int or None
        For a partitioned dataset, L: the most partitions one person's data lie in (the dataset's amounts
        compose the L largest partition totals); None otherwise.
    partition : str or None
        The partition a per-partition report is about (``spent(dataset, partition=...)``,
        ``remaining(dataset, partition=...)``, :func:`partition_spending`), else None.
    unbounded : str or None
        Why no amount bounds what the dataset has spent (a dataset declared partitioned under replace-one
        by an earlier version that holds row-level releases on a partition: see
        :func:`~dp_pipeline.accounting._verify.unbounded_reading`), else None. The dataset is then spent:
        ``epsilon`` and ``mu`` of a spent report are ``inf``, a remaining report holds zero, and
        ``guarantee`` holds the budget (spent) or zero (remaining), the most a finite amount can say.
    """

    dataset: str
    what: str
    guarantee: Guarantee
    method: str
    budget: Guarantee
    open_reservations: int = 0
    relation: Relation = DEFAULT_RELATION
    partitions: int | None = None
    partition: str | None = None
    unbounded: str | None = None

    @property
    def _infinite(self) -> bool:
        return self.unbounded is not None and self.what == "spent"

    @property
    def epsilon(self) -> float:
        """ε of an (ε, δ) amount (``inf`` spent when :attr:`unbounded`); AttributeError for a μ-GDP budget
        (read ``.mu``)."""
        if isinstance(self.guarantee, GaussianDP):
            raise AttributeError(
                f"dataset {self.dataset!r} has a μ-GDP budget: the report has .mu, not .epsilon "
                "(convert with report.guarantee.to_approx_dp(delta))"
            )
        assert isinstance(self.guarantee, ApproxDP)
        return math.inf if self._infinite else self.guarantee.epsilon

    @property
    def delta(self) -> float:
        """δ of an (ε, δ) amount; AttributeError for a μ-GDP budget (read ``.mu``)."""
        if isinstance(self.guarantee, GaussianDP):
            raise AttributeError(
                f"dataset {self.dataset!r} has a μ-GDP budget: the report has .mu, not .delta"
            )
        assert isinstance(self.guarantee, ApproxDP)
        return self.guarantee.delta

    @property
    def mu(self) -> float:
        """μ of a μ-GDP amount (``inf`` spent when :attr:`unbounded`); AttributeError for an (ε, δ) budget
        (read ``.epsilon``/``.delta``)."""
        if not isinstance(self.guarantee, GaussianDP):
            raise AttributeError(
                f"dataset {self.dataset!r} has an (ε, δ) budget: the report has .epsilon and .delta, not .mu"
            )
        return math.inf if self._infinite else self.guarantee.mu

    def __str__(self) -> str:
        amount = format_guarantee(self.guarantee)
        if self.unbounded is not None:
            amount = "unbounded" if self._infinite else f"{amount} (the loss is unbounded)"
        method = {
            "basic": "basic composition",
            "gdp": "μ-GDP filter",
            "pld": "tight PLD composition",
            "bounded_range": "bounded-range composition",
            "zcdp": "zCDP filter",
        }.get(self.method, self.method)
        where = repr(self.dataset)
        if self.partition is not None:
            where += f", partition {self.partition!r}"
        budget = format_guarantee(self.budget)
        text = f"{self.what} on {where}: {amount} ({method}; budget {budget}; {self.relation})"
        if self.open_reservations:
            text += f", including {self.open_reservations} open reservation(s)"
        if self.unbounded is not None:
            text += f". {self.unbounded}"
        return text


@dataclass(frozen=True)
class LedgerEntry:
    """One ledger record as :func:`ledger_entries` shows it.

    Attributes
    ----------
    seq : int
        Position in the dataset's chain.
    time : datetime
        When it was written (UTC).
    kind : str
        ``"budget"``, ``"reserve"``, ``"commit"`` or ``"release"`` (a cancellation, as the ledger names it),
        ``"pay"`` (a release paid from a reservation) or ``"shrink"`` (a reservation lowered to a sub-plan).
    status : str
        For a reservation: ``"open"``, ``"committed"`` or ``"released"`` (cancelled); otherwise the kind.
    label, key : str or None
        The spend's label and idempotency key.
    group_size : int or None
        The group size k the spend was charged for.
    guarantee : Guarantee or None
        The cost charged (a reservation), paid (a payment) or kept (a shrink), or the budget set (a budget
        record).
    method : str or None
        How the cost was composed (plans: ``"pld"``, ``"basic"`` or ``"gdp"``), or the budget's rule.
    events : tuple of PrivacyEvent
        The events of a reservation (several for a plan), a payment, or the sub-plan a shrink kept.
    reservation : int or None
        For ``commit``/``release``: the seq of the reservation it ends; for ``pay``/``shrink``: the seq of
        the reservation paid from or shrunk.
    reason, actor : str or None
        Why and by whom (releases and budget changes).
    hash : str
        The record's hash in the chain.
    relation : str or None
        The dataset's neighbouring relation, for budget and reserve records (records written before
        relations existed: the default, ``"replace_one"``).
    partitions : tuple of str
        For a reservation or a payment on a partitioned dataset, the partitions it named (empty: the whole
        dataset, or another kind of record).
    """

    dataset: str
    seq: int
    time: datetime
    kind: str
    status: str
    label: str | None
    key: str | None
    group_size: int | None
    guarantee: Guarantee | None
    method: str | None
    events: tuple[PrivacyEvent, ...] = field(default=())
    reservation: int | None = None
    reason: str | None = None
    actor: str | None = None
    hash: str = ""
    relation: Relation | None = None
    partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReleaseEntry:
    """One release (a charged reservation) as :meth:`PrivacyAccountant.history` shows it.

    Attributes
    ----------
    dataset : str
    seq : int
        The seq of the reservation record in the dataset's chain (see :func:`ledger_entries`).
    time : datetime
        When it was charged (UTC).
    label, key : str or None
        The spend's label and idempotency key.
    group_size : int
        The group size k it was charged for.
    cost : Guarantee
        What was charged, in the budget's currency (for the group of k).
    method : str or None
        How a plan's cost was composed (``"pld"``, ``"basic"`` or ``"gdp"``).
    events : tuple of PrivacyEvent
        The mechanisms' events (several for a plan).
    status : str
        ``"open"`` (reserved, still counted), ``"committed"`` or ``"cancelled"`` (returned to the
        budget before data was read); ``"paid"`` for a release paid from a reservation.
    ended : datetime or None
        When it was committed or cancelled.
    reason, actor : str or None
        Why and by whom it was cancelled.
    paid_from : str or None
        For a release paid from a reservation: the reservation's key. Such a release charged the dataset
        nothing (the reservation's own entry did); its ``key`` is None.
    partitions : tuple of str
        On a partitioned dataset, the partitions the release named (empty: it read the whole dataset).
    sampler : {"fast"} or None
        ``"fast"`` when the library drew the release's noise from a ``fast_rng`` generator (its events carry
        the marker, see :data:`~dp_pipeline.events.Sampler`): the ε charged does not bound what its floats
        reveal. None otherwise (the secure path, or noise drawn by code the library does not see).
    relation : str or None
        The neighbouring relation the release was charged under (on a partitioned dataset, the one its
        partitions were composed under: ``"add_remove"``, or ``"replace_one"`` for a dataset declared by an
        earlier version).
    """

    dataset: str
    seq: int
    time: datetime
    label: str | None
    key: str | None
    group_size: int
    cost: Guarantee
    method: str | None
    events: tuple[PrivacyEvent, ...]
    status: str
    ended: datetime | None = None
    reason: str | None = None
    actor: str | None = None
    paid_from: str | None = None
    partitions: tuple[str, ...] = ()
    relation: Relation | None = None

    @property
    def sampler(self) -> Sampler | None:
        """The sampler marker of the release's events (see the class notes)."""
        return sampler_of(self.events)


@dataclass(frozen=True)
class VerifyReport:
    """The result of a successful :meth:`PrivacyAccountant.verify`: what was checked.

    Attributes
    ----------
    datasets : tuple of str
    records : int
        How many records were checked.
    signatures : bool
        Whether signatures were checked (a key was configured).
    signed : int
        How many of the records carry a signature, every one of them valid (0 without a key). With a key,
        fewer than ``records`` means that the records before each dataset's first signed one are unsigned
        (written before the key was introduced); 0 means the key checked nothing: the ledger was written
        without it, or all its signatures were removed, which only an anchor detects.
    anchored : bool
        Whether the chains were checked against an anchor.
    findings : tuple of str
        What the chains hold but no longer mean as written: a dataset declared partitioned under
        replace-one by an earlier version, re-read without parallel composition (see
        :meth:`PrivacyAccountant.verify`).
    """

    datasets: tuple[str, ...]
    records: int
    signatures: bool = False
    anchored: bool = False
    findings: tuple[str, ...] = ()
    signed: int = 0

    def __str__(self) -> str:
        n = len(self.datasets)
        text = f"ledger verified: {self.records} records in {n} dataset(s); chains, totals and budgets intact"
        text += self._signatures_text()
        if self.anchored:
            text += "; the anchor's heads are still in the chains"
        return "\n".join([text, *(f"finding: {finding}" for finding in self.findings)])

    def _signatures_text(self) -> str:
        if not self.signatures:
            return "; signatures not checked (no key)"
        if self.signed == 0:
            return (
                "; NO record is signed, so the key checked nothing (the ledger was written without the key, "
                "or its signatures were removed: only an anchor proves the chains were not rewritten)"
            )
        if self.signed < self.records:
            return (
                f"; {self.signed} signatures valid; the {self.records - self.signed} records before each "
                "dataset's first signed one are unsigned (written before the key)"
            )
        return f"; all {self.signed} signatures valid"


def budget_report(
    dataset: str, what: str, budget: DatasetBudget, totals: Totals, unbounded: str | None = None
) -> BudgetReport:
    """``what`` (``"spent"``, ``"remaining"`` or ``"budget"``) of a dataset under its rule (and its
    partitions: the composed totals), as a report; ``unbounded``: why no amount bounds what it spent."""
    composed = budget.composed(totals)
    if what == "budget" or (unbounded is not None and what == "spent"):
        amount, method = budget.guarantee, budget.rule.name
    elif unbounded is not None:
        amount, method = _nothing(budget.guarantee), budget.rule.name
    else:
        amount, method = budget.rule.spent(composed) if what == "spent" else budget.rule.remaining(composed)
    return BudgetReport(
        dataset,
        what,
        amount,
        method,
        budget.guarantee,
        totals.open,
        budget.relation,
        budget.partitions,
        unbounded=None if what == "budget" else unbounded,
    )


def _nothing(currency: Guarantee) -> Guarantee:
    """Zero in the currency of ``currency``."""
    return GaussianDP(0.0) if isinstance(currency, GaussianDP) else ApproxDP(0.0, 0.0)


def partition_reading(relation: Relation, limit: int | None) -> str:
    """How a partitioned dataset's partition totals are read, for the tables that show them: under
    add/remove, parallel composition over at most ``limit`` partitions per person; under replace-one (a
    dataset declared by an earlier version), every partition counting for every person."""
    if relation == "add_remove":
        return (
            f"at most {limit} per person, read under {relation}: the dataset's spent amount composes the "
            "largest"
        )
    return (
        f"declared with at most {limit} per person under {relation} by an earlier version, where parallel "
        "composition does not hold: every partition counts for every person"
    )


def partition_report(
    dataset: str, what: str, budget: DatasetBudget, totals: Totals, name: str
) -> BudgetReport:
    """``what`` (``"spent"`` or ``"remaining"``) of partition ``name`` of a partitioned dataset.

    Spent: the loss of a person whose data lie in that partition alone, the whole-dataset totals plus the
    partition's (:meth:`~dp_pipeline.accounting.rules.Totals.within`) under the rule, rounded up. Remaining:
    what one more release reading that partition may spend, rounded down: for L = 1 the rule's remaining
    amount after that person's totals, exactly what the accountant admits then (it checks every person's
    totals one by one, and the release adds to those of the people in ``name`` only); for L ≥ 2 the
    dataset's remaining amount, a lower bound on it: adding c to one partition raises each amount of the L
    largest partition totals by at most c, and the rule's check is monotone in every amount (see
    :class:`~dp_pipeline.accounting._records.DatasetBudget`), so a release of the dataset's remaining
    amount on ``name`` is admitted.
    """
    person = totals.within(name) if what == "spent" or budget.partitions == 1 else budget.composed(totals)
    amount, method = budget.rule.spent(person) if what == "spent" else budget.rule.remaining(person)
    return BudgetReport(
        dataset,
        what,
        amount,
        method,
        budget.guarantee,
        totals.open,
        budget.relation,
        budget.partitions,
        name,
    )


def partition_reports(dataset: str, budget: DatasetBudget, totals: Totals) -> dict[str, BudgetReport]:
    """What each partition of a partitioned dataset has spent, by name, sorted (:func:`partition_report`)."""
    return {name: partition_report(dataset, "spent", budget, totals, name) for name in sorted(totals.parts)}


def partition_spending(store: LedgerStore, dataset: str) -> dict[str, BudgetReport]:
    """What each partition of ``dataset`` in ``store`` (``acct.store``) has spent, by partition name
    (sorted): for each, the report of ``acct.spent(dataset, partition=name)``, the loss of a person whose
    data lie in that partition alone. The dataset's spent amount composes the L largest. Empty for a
    dataset that is not partitioned, or before any release named a partition. UnknownDatasetError when the
    dataset has no budget."""
    _, budget, totals = read_head(store, dataset)
    return partition_reports(dataset, budget, totals)


def read_head(store: LedgerStore, dataset: str) -> tuple[DatasetHead, DatasetBudget, Totals]:
    """The head row of ``dataset`` in ``store``, its budget and its running totals (UnknownDatasetError
    when the dataset has no budget; LedgerError when the head is unreadable)."""
    dataset = check_name(dataset, "dataset")
    head = store.head(dataset)
    if head is None:
        raise unknown_dataset(store, dataset)
    where = f"dataset {dataset!r}"
    budget = budget_of(head.state, where)
    return head, budget, budget.rule.read_totals(head.state.totals, where)


def ledger_entry(record: LedgerRecord, ends: Mapping[int, LedgerRecord]) -> LedgerEntry:
    """A record as :func:`ledger_entries` shows it; ``ends``
    maps a reservation's seq to the record that ended it."""
    body = record.body
    guarantee: Guarantee | None = None
    events: tuple[PrivacyEvent, ...] = ()
    method: str | None = None
    status = record.kind
    partitions: tuple[str, ...] = ()
    if record.kind in ("reserve", "pay"):
        partitions = partitions_of(body, f"record seq {record.seq}")
    if record.kind in ("reserve", "pay", "shrink"):
        guarantee = guarantee_from_dict(dict(body["cost"]))
        events = tuple(PrivacyEvent.from_dict(dict(e)) for e in body.get("events", ()))
        method = body.get("composition")
    if record.kind == "reserve":
        end = ends.get(record.seq)
        status = "open" if end is None else ("committed" if end.kind == "commit" else "released")
    elif record.kind == "budget":
        guarantee = guarantee_from_dict(dict(body["budget"]))
        method = body.get("method")
    return LedgerEntry(
        dataset=record.dataset,
        seq=record.seq,
        time=datetime.fromisoformat(record.time),
        kind=record.kind,
        status=status,
        label=body.get("label"),
        key=record.key,
        group_size=body.get("group_size"),
        guarantee=guarantee,
        method=method,
        events=events,
        reservation=record.reservation,
        reason=body.get("reason"),
        actor=body.get("actor"),
        hash=record.hash,
        relation=body.get("relation", DEFAULT_RELATION)
        if record.kind in ("budget", "reserve", "pay")
        else None,
        partitions=partitions,
    )


def read_all(dataset: str, records: Sequence[LedgerRecord], read: Callable[[LedgerRecord], _T]) -> list[_T]:
    """``read`` of every record, or one clear LedgerError naming the first record it cannot read."""
    entries: list[_T] = []
    unreadable = None
    for r in records:
        try:
            entries.append(read(r))
        except (KeyError, TypeError, ValueError) as err:  # incl. InvalidParameterError
            unreadable = f"record seq {r.seq} is unreadable ({type(err).__name__}: {err})"
            break
    if unreadable is not None:  # raised outside the handler: one clear error, no raw chain
        raise LedgerError(
            f"dataset {dataset!r}: {unreadable}; the ledger is corrupt or was altered (run verify)"
        )
    return entries


def release_entry(
    record: LedgerRecord, end: LedgerRecord | None, shrunk: LedgerRecord | None = None
) -> ReleaseEntry:
    """A reservation record (with the record that ended it and its last shrink, if any) as one line of the
    history: what it holds now."""
    entry = ledger_entry(record, {} if end is None else {record.seq: end})
    assert entry.guarantee is not None
    return ReleaseEntry(
        dataset=entry.dataset,
        seq=entry.seq,
        time=entry.time,
        label=entry.label,
        key=entry.key,
        group_size=int(entry.group_size or 1),
        cost=entry.guarantee if shrunk is None else guarantee_from_dict(dict(shrunk.body["cost"])),
        method=entry.method if shrunk is None else shrunk.body.get("composition"),
        events=entry.events,
        status="cancelled" if entry.status == "released" else entry.status,
        ended=None if end is None else datetime.fromisoformat(end.time),
        reason=None if end is None else end.body.get("reason"),
        actor=None if end is None else end.body.get("actor"),
        partitions=entry.partitions,
        relation=entry.relation,
    )


def paid_entry(record: LedgerRecord) -> ReleaseEntry:
    """A release paid from a reservation (a ``pay`` record) as one line of the history."""
    return replace(release_entry(record, None), key=None, status="paid", paid_from=record.key)


def history(
    dataset: str, records: Sequence[LedgerRecord], *, since: Any = None, limit: Any = None
) -> list[ReleaseEntry]:
    """One entry per release of a dataset's records, oldest first (see
    :meth:`PrivacyAccountant.history <dp_pipeline.accounting._accountant.PrivacyAccountant.history>`): a
    reservation as its last shrink left it and with how it ended, a payment with ``paid_from``; only those
    charged at or after ``since`` (a naive datetime is read as UTC), only the latest ``limit``."""
    if since is not None:
        if not isinstance(since, datetime):
            raise InvalidParameterError(f"'since' must be a datetime, got {type(since).__name__}", "since")
        since = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
    n = None if limit is None else check_positive_int(limit, "limit")
    ends = ended_by(records)
    shrunk = {r.reservation: r for r in records if r.kind == "shrink"}  # the last shrink holds

    def entry(r: LedgerRecord) -> ReleaseEntry:
        if r.kind == "pay":
            return paid_entry(r)
        return release_entry(r, ends.get(r.seq), shrunk.get(r.seq))

    releases = read_all(dataset, [r for r in records if r.kind in ("reserve", "pay")], entry)
    if since is not None:
        releases = [e for e in releases if e.time >= since]
    return releases if n is None else releases[-n:]


def chain_entries(dataset: str, records: Sequence[LedgerRecord]) -> list[LedgerEntry]:
    """Every record of a dataset's chain as a :class:`LedgerEntry`, in order."""
    ends = ended_by(records)
    return read_all(dataset, records, lambda r: ledger_entry(r, ends))


def ledger_entries(store: LedgerStore, dataset: str) -> list[LedgerEntry]:
    """Every record of ``dataset``'s hash chain in ``store`` (``acct.store``), in order: budget changes,
    reservations, payments, shrinks, commits and cancellations, with time, label, key, group size, cost and
    status. The releases alone are :meth:`PrivacyAccountant.history
    <dp_pipeline.accounting._accountant.PrivacyAccountant.history>`. UnknownDatasetError when the dataset has
    no budget."""
    return chain_entries(dataset, read_chain(store, dataset))


def read_chain(store: LedgerStore, dataset: str) -> list[LedgerRecord]:
    """Every record of ``dataset``'s chain in ``store``, in order (UnknownDatasetError when the dataset has
    no budget)."""
    dataset = check_name(dataset, "dataset")
    records = list(store.records(dataset))
    if not records and store.head(dataset) is None:
        raise unknown_dataset(store, dataset)
    return records


def ended_by(records: Sequence[LedgerRecord]) -> dict[int, LedgerRecord]:
    """The record that ended each reservation, by the reservation's seq."""
    return {r.reservation: r for r in records if r.reservation is not None and r.kind in END_KINDS}


def open_reservations(store: LedgerStore, dataset: str) -> list[LedgerEntry]:
    """The reservations of ``dataset`` in ``store`` (``acct.store``) that were neither committed nor
    cancelled (e.g. a process died): they stay counted until an operator cancels them
    (:meth:`PrivacyAccountant.cancel <dp_pipeline.accounting._accountant.PrivacyAccountant.cancel>`).
    UnknownDatasetError when the dataset has no budget."""
    if store.head(dataset) is None:
        raise unknown_dataset(store, dataset)
    return [ledger_entry(r, {}) for r in store.open_reservations(dataset)]


def unknown_dataset(store: LedgerStore, dataset: str) -> UnknownDatasetError:
    """The error for a dataset without a budget in ``store``: it names the ledger (password hidden) and
    says when the ledger holds no budget at all (perhaps a mistyped path)."""
    empty = not any(store.head(name) is not None for name in store.datasets())
    return UnknownDatasetError(dataset, redact_url(store.url), empty)


@dataclass(frozen=True)
class Quote:
    """What :meth:`PrivacyAccountant.quote` found: whether the requests would all be accepted, one after the
    other, and what each costs (nothing was charged).

    Attributes
    ----------
    fits : bool
        Whether every request would be accepted (``bool(quote)`` is the same).
    costs : tuple of BudgetReport
        The price of each request in the budget's currency, against what the requests before it leave; it
        stops at the first request that does not fit (which is the last), or is empty when the dataset's
        loss is unbounded (see :meth:`PrivacyAccountant.spent`).
    """

    fits: bool
    costs: tuple[BudgetReport, ...]

    def __bool__(self) -> bool:
        return self.fits


def quote_report(
    dataset: str, budget: DatasetBudget, totals: Totals, request: Request, price: Price
) -> BudgetReport:
    """What a request costs, as :meth:`PrivacyAccountant.quote` reports it (against ``totals``)."""
    what = "plan cost" if request.is_plan else "spend cost"
    return BudgetReport(
        dataset,
        what,
        price.cost,
        price.method,
        budget.guarantee,
        totals.open,
        budget.relation,
        budget.partitions,
    )
