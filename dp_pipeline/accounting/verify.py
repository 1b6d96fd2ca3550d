"""Verify's replay: the running totals, the budgets and the reservations of a dataset, recomputed from its
records; and the check of the chains against an anchor (a checkpoint kept outside the database).

The hash chain itself is checked by :func:`~dp_pipeline.accounting.ledger.base.check_chain`; this module
checks what the records mean.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from dp_pipeline.accounting import pricing
from dp_pipeline.accounting.ledger.base import DatasetHead, LedgerRecord, RecordSigner, canonical_json
from dp_pipeline.accounting.payments import Holding, Paid, Share, event_keys, route, share_of
from dp_pipeline.accounting.pricing import PlanRequest, charge_verifies, recorded_request_price
from dp_pipeline.accounting.records import DatasetBudget, budget_of, partitions_of
from dp_pipeline.accounting.rules import Totals
from dp_pipeline.events import PrivacyEvent, flatten_events
from dp_pipeline.exceptions import InvalidParameterError, LedgerError
from dp_pipeline.guarantees import format_guarantee, guarantee_from_dict

__all__ = [
    "ANCHOR_FORMAT",
    "ROW_LEVEL_KINDS",
    "Replay",
    "check_anchor",
    "check_semantics",
    "legacy_partitions_finding",
    "read_anchor",
    "unbounded_reading",
]

ANCHOR_FORMAT = "dp-pipeline ledger anchor 1"


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


def check_semantics(dataset: str, records: Sequence[LedgerRecord], head: DatasetHead | None) -> str | None:
    """Replay the running totals, the budgets and the reservation states; the first inconsistency, or None.

    The records are fed, in chain order, to one :class:`Replay` (the reducer every write of the accountant
    also applies to the records appended since it last looked), and the head is compared with its result.
    """
    replay = Replay(dataset)
    for record in records:
        problem = replay.feed(record)
        if problem:
            return problem
    return replay.check_head(head)


class Replay:
    """The state of a dataset's records replayed so far: one reducer for verify and for every write.

    Every reservation is re-priced under the budget in force when it was made and must fit it, so a
    budget raised outside dp-pipeline for a spend and put back afterwards is found. Every release paid from
    a reservation is re-priced too, its running sum recomputed, and the payments so far must fit what the
    reservation held (an over-payment, or a forged payment that understates its cost, is found); a shrink
    must keep a sub-plan that costs no more and still covers the payments; each attempt's share is claimed
    once, and the releases paid within it fit its claim (the cap it records); a reservation that paid for a
    release cannot have been cancelled; nothing is paid from a spend's own charge, and one release (not a
    plan) that was committed is not shrunk. A record of another kind, a budget record whose stored rule
    settings its budget does not allow (an inflated μ limit), a charge below its request's price (a
    negative one included) and running totals that are not the sum of the charges are all found.

    Feed the records in chain order with :meth:`feed`; :meth:`check_head` compares a head row with the
    state replayed. After a problem the replay is spent: build a new one.

    Parameters
    ----------
    dataset : str
        The dataset whose chain is replayed (named in the problems).
    """

    def __init__(self, dataset: str) -> None:
        self.dataset = dataset
        self._totals: Totals | None = None
        self._budget: DatasetBudget | None = None
        self._budget_state: tuple[dict[str, Any], str] | None = None
        self._held: dict[int, Holding] = {}
        self._paid: dict[int, Paid] = {}
        self._shares: dict[int, dict[str, Share]] = {}
        self._named: dict[int, tuple[str, ...]] = {}
        self._spends: set[int] = set()
        self._ended: dict[int, str] = {}
        self._keys: dict[str, int] = {}

    def feed(self, record: LedgerRecord) -> str | None:
        """Replay one record (the next in the chain): a description of what is wrong with it, or None."""
        try:
            self._apply(record)
        except LedgerError as err:
            return str(err)
        except (AttributeError, KeyError, TypeError, ValueError, InvalidParameterError) as err:
            return (
                f"dataset {self.dataset!r}, record seq={record.seq}: unreadable record "
                f"({type(err).__name__}: {err})"
            )
        return None

    def check_head(self, head: DatasetHead | None) -> str | None:
        """Whether ``head`` caches the budget, rule settings and totals replayed: a problem, or None."""
        budget, totals, budget_state = self._budget, self._totals, self._budget_state
        if head is None or budget is None or totals is None or budget_state is None:
            return None
        where = f"dataset {self.dataset!r}, head row"
        try:
            if not budget.rule.read_totals(head.state.totals, where).same_as(totals):
                return f"{where}: cached totals {dict(head.state.totals)} differ from the records' sum"
            cached = (dict(head.state.budget), head.state.method)
        except LedgerError as err:
            return str(err)
        except (AttributeError, KeyError, TypeError, ValueError, InvalidParameterError) as err:
            return f"{where}: unreadable ({type(err).__name__}: {err})"
        if canonical_json(cached[0]) != canonical_json(budget_state[0]) or cached[1] != budget_state[1]:
            return f"{where}: cached budget {cached} differs from the last budget record"
        return None

    def _apply(self, record: LedgerRecord) -> None:
        """Replay one record; raise LedgerError naming what is wrong with it."""
        where = f"dataset {self.dataset!r}, record seq={record.seq}"
        touched: Collection[str] | None
        if record.kind == "budget":
            budget, totals, touched = self._set_budget(record, where), self._totals, None
            totals = budget.rule.empty() if totals is None else budget.rule.carry(totals)
            if not budget.fitted_when_written(totals):
                raise LedgerError(
                    f"{where}: the budget {budget.rule.describe()} is below what was already spent"
                )
        elif self._budget is None or self._totals is None:
            raise LedgerError(f"{where}: a {record.kind} record before any budget was set")
        elif record.kind == "reserve":
            budget, (totals, touched) = self._budget, self._reserve(record, self._budget, self._totals, where)
        elif record.kind in ("pay", "shrink", "commit", "release"):
            budget, (totals, touched) = self._budget, self._naming(record, self._budget, self._totals, where)
        else:
            raise LedgerError(f"{where}: unknown record kind {record.kind!r}")
        self._totals = totals
        stored = budget.rule.read_totals(record.body.get("totals"), where)
        if not stored.same_as(totals if touched is None else totals.only(touched)):
            raise LedgerError(
                f"{where}: running totals {stored.to_json()} differ from the records' sum {totals.to_json()}"
            )

    def _set_budget(self, record: LedgerRecord, where: str) -> DatasetBudget:
        budget, state, method = _stored_budget(record.body, where)
        self._budget, self._budget_state = budget, (state, method)
        problem = budget.rule.check_parameters()
        if problem:
            raise LedgerError(f"{where}: {problem}")
        return budget

    def _reserve(
        self, record: LedgerRecord, budget: DatasetBudget, totals: Totals, where: str
    ) -> tuple[Totals, Collection[str]]:
        body = record.body
        if record.key is None or record.key in self._keys:
            raise LedgerError(f"{where}: missing or repeated idempotency key {record.key!r}")
        self._keys[record.key] = record.seq
        charge = budget.rule.read_charge(body.get("charge"), where)
        touched = partitions_of(body, where)
        if touched and budget.partitions is None:
            raise LedgerError(
                f"{where}: the reservation names partitions of a dataset that is not partitioned"
            )
        now = recorded_request_price(budget, body, budget.composed(totals))
        if not charge_verifies(budget, body, charge, now, PlanRequest.of(body)):
            raise LedgerError(
                f"{where}: the recorded charge {charge.to_json()} is below what its request costs "
                f"under the budget in force, {budget.rule.describe()}"
            )
        self._held[record.seq] = Holding.of(body, budget.rule, where)
        self._paid[record.seq] = Paid()
        self._named[record.seq] = touched
        if body.get("spend"):
            self._spends.add(record.seq)
        totals = budget.rule.add(totals, charge, touched)
        if not budget.fitted_when_written(totals):
            raise LedgerError(
                f"{where}: the reservation does not fit the budget in force, "
                f"{budget.rule.describe()}; it was accepted against another budget (the stored "
                "budget was changed outside dp-pipeline)"
            )
        return totals, touched

    def _naming(
        self, record: LedgerRecord, budget: DatasetBudget, totals: Totals, where: str
    ) -> tuple[Totals, Collection[str]]:
        """Replay a record that names a reservation (pay, shrink, commit, release)."""
        target = self._named_reservation(record, where)
        named = self._named[target]
        if record.kind in ("pay", "shrink"):
            # a payment stores the parts it names (unchanged), a shrink those of its reservation
            touched = partitions_of(record.body, where) if record.kind == "pay" else named
            problem, totals = _replay_payment(
                record, budget, totals, self._held, self._paid, named, self._shares.setdefault(target, {})
            )
            if problem:
                raise LedgerError(f"{where}: {problem}")
            return totals, touched
        self._ended[target] = record.kind
        if record.kind == "commit":
            return totals.committed(), ()
        return budget.rule.remove(totals, self._held[target].charge, named), named

    def _named_reservation(self, record: LedgerRecord, where: str) -> int:
        """The reservation a pay, shrink, commit or release record names, if it may name it."""
        target, ended = record.reservation, self._ended
        if target is None or target not in self._held:
            problem = f"{record.kind} of seq={target}, which is not a reservation"
        elif record.kind not in ("pay", "shrink"):
            problem = (
                f"reservation seq={target} was already committed or released"
                if target in ended
                else f"reservation seq={target} was cancelled after it paid for releases"
                if record.kind == "release" and self._paid[target].charges
                else ""
            )
        elif self._keys.get(record.key or "") != target:
            problem = f"the {record.kind} names seq={target} but carries another key"
        elif ended.get(target) == "release":
            problem = f"a {record.kind} from reservation seq={target}, which was cancelled"
        elif record.kind == "pay" and target in self._spends:
            problem = f"a payment from seq={target}, a spend that holds nothing to pay from"
        elif record.kind == "shrink" and not self._held[target].plan and ended.get(target) == "commit":
            problem = f"a shrink of seq={target}, one committed release (not a plan)"
        elif (
            record.kind == "pay"
            and self._named[target]
            and not set(partitions_of(record.body, where)) <= set(self._named[target])
        ):
            problem = f"a payment reads partitions that reservation seq={target} did not name"
        else:
            problem = ""
        if problem:
            raise LedgerError(f"{where}: {problem}")
        assert target is not None
        return target


ROW_LEVEL_KINDS = frozenset({"randomized_response", "bounded_laplace", "bounded_staircase"})
"""The event kinds only row-level (local) mechanisms record: mechanisms that state ``"replace_one"``
themselves, ε-DP per row over their input domain, releasing one output per row."""


def legacy_partitions_finding(
    dataset: str, records: Sequence[LedgerRecord], head: DatasetHead | None
) -> str | None:
    """What verify reports about a dataset declared partitioned under replace-one by an earlier version
    (:attr:`~dp_pipeline.accounting.records.DatasetBudget.legacy`), or None for any other dataset.

    Its partition charges were accepted under parallel composition, which does not hold under replace-one.
    The finding re-reads the dataset without it (every partition total counts for every person: the
    whole-dataset total plus the sum of all partition totals), says whether that is within the budget, and,
    through :func:`unbounded_reading` (the reading the accountant prices the dataset by), the active
    row-level releases on a partition, whose loss under replace-one is unbounded.
    """
    if head is None:
        return None
    where = f"dataset {dataset!r}"
    budget = budget_of(head.state, where)
    if not budget.legacy:
        return None
    totals = budget.rule.read_totals(head.state.totals, where)
    spent, method = budget.rule.spent(budget.composed(totals))
    verdict = "within" if budget.fits(totals) else "ABOVE"
    text = (
        f"dataset {dataset!r} was declared partitioned (at most {budget.partitions} per person) under "
        f"replace-one, where parallel composition does not hold; its partition charges were accepted under "
        f"the parallel rule. Re-read with every partition total counting for every person, it has spent "
        f"{format_guarantee(spent)} ({method}), {verdict} its budget {format_guarantee(budget.guarantee)}"
    )
    unbounded = unbounded_reading(dataset, records)
    if unbounded:
        return f"{text}. {unbounded}"
    return (
        text + ". Releases naming a partition are refused on it; declare relation='add_remove' once it has "
        "no active spends, or release per partition on a new dataset declared with relation='add_remove'."
    )


def unbounded_reading(dataset: str, records: Sequence[LedgerRecord]) -> str | None:
    """Why no amount bounds the loss of a dataset declared partitioned under replace-one by an earlier
    version, or None when its records hold no active row-level release on a partition.

    **Rule.** Such a dataset whose records hold an active reservation (not cancelled) that named a
    partition and whose events (its last shrink's, if it was shrunk) include a row-level release
    (:data:`ROW_LEVEL_KINDS`) has an unbounded loss: it is reported as spent with no finite amount, and
    nothing more is charged to it.

    **Proof.** Under replace-one, x may be replaced by y whose rows lie in another partition. A row-level
    release on partition A outputs one value per row of A, so its output length is |A| on one neighbour and
    |A| − 1 on the other: the event "the output has |A| values" has probability 1 and 0, a ratio no ε
    bounds. Composition cannot lower it, so every later release adds to an already unbounded loss. A
    cancelled reservation released nothing (the frame functions cancel only before the data are read), and
    a shrink's events are the only ones its reservation may still pay for. Current writers refuse every
    release naming a partition of such a dataset, so records appended later never add such a release: a
    reading at the chain head stays valid until the head moves.

    Only the kinds that row-level mechanisms alone record are recognised: a row-level release recorded as
    a ``"laplace"``, ``"gaussian"`` or ``"staircase"`` event (:func:`~dp_pipeline.frames.add_noise`) is
    recorded as the aggregates are and is read by the summed rule.
    """
    seqs = _row_level_on_partitions(records)
    if not seqs:
        return None
    return (
        f"Dataset {dataset!r} holds {len(seqs)} active row-level release(s) on a partition (record seq "
        f"{', '.join(map(str, seqs))}), charged when an earlier version composed replace-one partitions in "
        "parallel: a person replaced by one in another partition changes how many rows each partition "
        "holds, which those releases show, so the dataset's loss is unbounded. Its data must be treated "
        "as spent and nothing more is charged to it; declare a new dataset for new data (set_budget(NAME, "
        "..., relation='add_remove', partitions=L) to release per partition)."
    )


def _row_level_on_partitions(records: Sequence[LedgerRecord]) -> list[int]:
    """The seqs of the active reservations that named a partition and hold a row-level event."""
    cancelled = {r.reservation for r in records if r.kind == "release"}
    held = {r.seq: r.body for r in records if r.kind == "reserve" and r.seq not in cancelled}
    named = {seq for seq, body in held.items() if partitions_of(body, f"record seq {seq}")}
    for r in records:  # a shrink replaces what its reservation holds
        if r.kind == "shrink" and r.reservation in held:
            held[r.reservation] = r.body
    return [seq for seq in sorted(named) if _row_level(held[seq])]


def _row_level(body: Mapping[str, Any]) -> bool:
    events = flatten_events([PrivacyEvent.from_dict(dict(e)) for e in body.get("events", ())])
    return any(e.kind in ROW_LEVEL_KINDS for e in events)


def _replay_payment(
    record: LedgerRecord,
    budget: DatasetBudget,
    totals: Totals,
    held: dict[int, Holding],
    paid: dict[int, Paid],
    partitions: tuple[str, ...],
    shares: dict[str, Share],
) -> tuple[str | None, Totals]:
    """Replay a ``pay`` or ``shrink`` record of a reservation: the problem it shows (or None) and the totals
    after it. Updates what the reservation holds, what was paid from it and its shares."""
    rule, body, target = budget.rule, record.body, record.reservation
    assert target is not None
    where = f"record seq={record.seq}"
    charge = rule.read_charge(body.get("charge"), where)
    holding, payments = held[target], paid[target]
    if record.kind == "pay":
        now = recorded_request_price(budget, body, budget.composed(totals))
        if not charge_verifies(budget, body, charge, now, PlanRequest.of(body)):
            return f"the recorded charge {charge.to_json()} is below what the paid release costs", totals
        name, within = share_of(body, where)
        if within:
            return _replay_within(rule, body, charge, shares, name, where, target), totals
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
        paid[target] = payments
        if name is not None:
            shares[name] = Share.claimed(body, rule, where)
        return None, totals
    kept = holding.shrunk(body, rule, where)
    if event_keys(kept.events) - event_keys(holding.events):
        return f"the shrink of seq={target} keeps releases the reservation did not declare", totals
    rest = rule.remove(totals, holding.charge, partitions)
    events = [PrivacyEvent.from_dict(dict(e)) for e in kept.events]
    price = (
        pricing.price(budget, events, holding.group_size, True, holding.delta, budget.composed(rest))
        if events
        else pricing.zero(budget)
    )
    kept_plan = PlanRequest(events, holding.group_size, True)
    if not charge_verifies(budget, body, charge, price, kept_plan) or not rule.fits_within(
        charge, holding.charge
    ):
        return f"the shrink of seq={target} is below its sub-plan's cost or above what it held", totals
    if route(rule, kept, payments) is None:
        return f"the payments from seq={target} do not fit what its shrink kept", totals
    held[target] = kept
    return None, rule.add(rest, charge, partitions)


def _replay_within(
    rule: Any,
    body: Mapping[str, Any],
    charge: Any,
    shares: dict[str, Share],
    name: Any,
    where: str,
    target: int,
) -> str | None:
    """Replay a payment within an attempt's share: the problem it shows (or None); updates the share."""
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


def read_anchor(anchor: Mapping[str, Any] | str | os.PathLike[str]) -> Mapping[str, Any]:
    """The datasets of a checkpoint from :meth:`PrivacyAccountant.anchor` (a mapping or its JSON file)."""
    if isinstance(anchor, Mapping):
        data: Any = anchor
    elif isinstance(anchor, (str, os.PathLike)):
        try:
            data = json.loads(Path(anchor).read_text(encoding="utf-8"))
        except OSError as err:
            raise InvalidParameterError(f"cannot read the anchor file: {err.strerror}", "anchor") from None
        except (ValueError, UnicodeDecodeError):
            raise InvalidParameterError("the anchor file is not JSON", "anchor") from None
    else:
        raise InvalidParameterError(
            "'anchor' must be a checkpoint from acct.anchor() or the path of its file, got "
            f"{type(anchor).__name__}",
            "anchor",
        )
    datasets = data.get("datasets") if isinstance(data, Mapping) else None
    if (
        not isinstance(data, Mapping)
        or data.get("format") != ANCHOR_FORMAT
        or not isinstance(datasets, Mapping)
        or not all(
            isinstance(point, Mapping)
            and type(point.get("seq")) is int
            and point["seq"] >= 1
            and isinstance(point.get("hash"), str)
            for point in datasets.values()
        )
    ):
        raise InvalidParameterError(
            "not a dp-pipeline ledger anchor (see PrivacyAccountant.anchor)", "anchor"
        )
    return data


def check_anchor(
    anchor: Mapping[str, Any],
    chains: Mapping[str, Sequence[LedgerRecord]],
    signer: RecordSigner | None,
    only: str | None,
) -> str | None:
    """The first way the chains fail to extend the anchor's heads, or None.

    An anchor's MAC is checked whenever it has one: an anchor with a MAC checked without a key is refused
    (skipping the MAC would let an edited anchor vouch for a rolled-back ledger), and an anchor without a
    MAC checked with a key is refused (the MAC was removed, or the anchor predates the key).
    """
    if signer is None and "mac" in anchor:
        return (
            "the anchor carries a MAC but no ledger key is configured, so the anchor cannot be trusted: give "
            "the key (key=… or DP_PIPELINE_LEDGER_KEY) to check it"
        )
    if signer is not None and "mac" not in anchor:
        return (
            "the anchor carries no MAC, but the ledger is checked with a key: an anchor written with the key "
            "has one (it was removed, or the anchor predates the key: write a new one with the key)"
        )
    if signer is not None:
        unsigned = {name: value for name, value in anchor.items() if name != "mac"}
        if not signer.valid(canonical_json(unsigned), anchor["mac"]):
            return "the anchor's MAC does not match the ledger key (the anchor was edited, or another key)"
    for name, point in anchor["datasets"].items():
        if only is not None and name != only:
            continue
        seq, digest = point["seq"], point["hash"]
        records = chains.get(name, ())
        if not records:
            return (
                f"dataset {name!r} is in the anchor (seq={seq}) but not in the ledger: it was deleted, or "
                "this is an older copy of the ledger"
            )
        if len(records) < seq:
            return (
                f"dataset {name!r}: the anchor has seq={seq} but the ledger ends at seq={len(records)}; "
                "records were removed (a rollback, or an older copy of the ledger)"
            )
        if records[seq - 1].hash != digest:
            return (
                f"dataset {name!r}: record seq={seq} differs from the anchor; the chain was rewritten or the "
                "dataset re-created"
            )
    return None
