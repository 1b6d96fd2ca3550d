"""Releases paid from a reservation: what a reservation holds now, what was paid from it, and whether the
payments fit it.

A reservation holds the charge it was made with, or the charge of the sub-plan it was last shrunk to
(:class:`Holding`). Releases paid from it (:class:`Paid`) fit it by one of two routes:

* ``"adaptive"``: the exact sum of their charges, each priced as a spend of its own, is within the held
  charge (:meth:`~dp_pipeline.accounting.rules.BudgetRule.fits_within`). Valid for releases chosen one
  after the other, under the rule's own adaptive composition.
* ``"plan"``: the reservation is a plan, and the paid releases (their parts, for groups of the plan's k)
  are some of the releases it declared. The plan's tight total covers every sub-multiset of its releases
  (dropping outputs is post-processing), whichever of them run and in whatever order. A plan priced by
  the bounded-range composition of one release's independent parts (method ``"bounded_range"``) is paid
  by whole declared releases only: its parts paid one by one could each be chosen from the others'
  results, which that price does not cover.

**Shares.** A reservation made for several attempts (an Airflow run's plan) is split into shares, one per
attempt, so that no attempt pays with another's: an attempt *claims* its share, a payment from the
reservation of its declared cost recorded with ``share`` (the attempt's key), which counts against the
reservation like any payment; the releases its code then pays are paid *within* the share, recorded with
``share`` and ``cap`` (the claim's charge), and counted against the share only (the claim already counts
them against the reservation). Releases paid within a share fit it by the same two routes, the claim
standing for the reservation and its declared release for a plan of one release (:meth:`Share.claimed`).

Why this is sound: each release paid within a share is covered by the share's charge (by the routes
above), each claim by the reservation's charge, so the releases of all attempts are covered by the
reservation's charge, and no attempt is covered by more than its own claim. A claim is made once per share
key, so two attempts cannot use one share.

Used by the accountant when it pays or shrinks, by the reservation's reports and by verify's replay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dp_pipeline.accounting._composition import flatten_events
from dp_pipeline.accounting.ledger._base import ReservationRecords, canonical_json
from dp_pipeline.accounting.rules import BudgetRule, Charge
from dp_pipeline.events import PrivacyEvent
from dp_pipeline.exceptions import LedgerError
from dp_pipeline.guarantees import Guarantee, guarantee_from_dict

__all__ = [
    "Holding",
    "Paid",
    "Share",
    "event_keys",
    "part_keys",
    "read_reservation",
    "read_shares",
    "route",
    "share_of",
]


def event_keys(events: Sequence[Mapping[str, Any]]) -> Counter[str]:
    """The multiset of events (as recorded, without the sampler marker, which is no part of a price) by
    their canonical JSON."""
    return Counter(canonical_json(PrivacyEvent.from_dict(dict(e)).priced().to_dict()) for e in events)


def part_keys(events: Sequence[Mapping[str, Any]]) -> Counter[str]:
    """The multiset of the events' parts (a composite event's parts, any other event itself), without the
    sampler marker."""
    parts = flatten_events([PrivacyEvent.from_dict(dict(e)).priced() for e in events])
    return Counter(canonical_json(part.to_dict()) for part in parts)


@dataclass(frozen=True)
class Holding:
    """What a reservation holds now: its charge (the limit of what is paid from it), the cost shown and its
    method, and the releases it declared (the sub-plan it was last shrunk to), their group size, whether
    they are a plan, and the δ the plan was asked at."""

    charge: Charge
    cost: Guarantee
    method: str
    events: tuple[Mapping[str, Any], ...]
    plan: bool
    group_size: int
    delta: float | None

    @classmethod
    def of(cls, body: Mapping[str, Any], rule: BudgetRule, where: str) -> Holding:
        """What a ``reserve`` record's body holds."""
        return cls(
            rule.read_charge(body.get("charge"), where),
            guarantee_from_dict(dict(body["cost"])),
            str(body.get("composition")),
            tuple(body["events"]),
            bool(body.get("plan")),
            int(body.get("group_size", 1)),
            body.get("delta"),
        )

    def shrunk(self, body: Mapping[str, Any], rule: BudgetRule, where: str) -> Holding:
        """What the reservation holds after a ``shrink`` record with ``body`` (its sub-plan keeps the
        reservation's group size and δ)."""
        kept = {"plan": self.plan, "group_size": self.group_size, "delta": self.delta}
        return Holding.of({**body, **kept}, rule, where)


@dataclass(frozen=True)
class Paid:
    """The releases paid from a reservation so far: their charges, their events and their group sizes."""

    charges: tuple[Charge, ...] = ()
    events: tuple[Mapping[str, Any], ...] = ()
    group_sizes: frozenset[int] = field(default_factory=frozenset)

    def plus(self, charge: Charge, events: Sequence[Mapping[str, Any]], k: int) -> Paid:
        """These payments and one more."""
        return Paid((*self.charges, charge), (*self.events, *events), self.group_sizes | {k})

    def total(self, rule: BudgetRule) -> Charge:
        """The exact sum of the paid charges (zero when nothing was paid)."""
        return rule.charge_total(self.charges)


@dataclass(frozen=True)
class Share:
    """One attempt's share of a reservation: what its claim holds (the cap of the releases paid within it)
    and what was paid within it."""

    held: Holding
    paid: Paid = field(default_factory=Paid)

    @classmethod
    def claimed(cls, body: Mapping[str, Any], rule: BudgetRule, where: str) -> Share:
        """The share a claim (a ``pay`` record's body) opens: its charge caps the share, and its declared
        release is a plan of one release, whose parts may be paid one by one."""
        return cls(Holding.of({**body, "plan": True}, rule, where))

    def plus(self, charge: Charge, events: Sequence[Mapping[str, Any]], k: int) -> Share:
        """This share with one more release paid within it."""
        return Share(self.held, self.paid.plus(charge, events, k))


def share_of(body: Mapping[str, Any], where: str) -> tuple[str | None, bool]:
    """The share a ``pay`` record belongs to (None: none) and whether it is paid within the share (it
    records the share's ``cap``) rather than claiming it; LedgerError if unreadable."""
    share = body.get("share")
    if share is not None and not isinstance(share, str):
        raise LedgerError(f"{where}: unreadable share {share!r}")
    within = "cap" in body
    if within and share is None:
        raise LedgerError(f"{where}: a payment within a share that names no share")
    return share, within


def route(rule: BudgetRule, held: Holding, paid: Paid) -> str | None:
    """``"adaptive"`` or ``"plan"``: how the paid releases fit what the reservation holds; None if they do
    not (see the module notes)."""
    if rule.fits_within(paid.total(rule), held.charge):
        return "adaptive"
    same_groups = paid.group_sizes <= {held.group_size}
    keys = event_keys if held.method == "bounded_range" else part_keys
    if held.plan and same_groups and not keys(paid.events) - keys(held.events):
        return "plan"
    return None


def read_reservation(found: ReservationRecords, rule: BudgetRule, where: str) -> tuple[Holding, Paid]:
    """What a reservation holds and what was paid from it, read from its records."""
    held = Holding.of(found.reserve.body, rule, where)
    paid = Paid()
    for record in found.after:
        here = f"{where}, record seq={record.seq}"
        if record.kind == "shrink":
            held = held.shrunk(record.body, rule, here)
        elif record.kind == "pay" and not share_of(record.body, here)[1]:
            body = record.body
            paid = paid.plus(
                rule.read_charge(body.get("charge"), here), body["events"], int(body["group_size"])
            )
        elif record.kind != "pay":
            raise LedgerError(f"{here}: a {record.kind!r} record cannot name a reservation without ending it")
    return held, paid


def read_shares(found: ReservationRecords, rule: BudgetRule, where: str) -> dict[str, Share]:
    """The shares claimed from a reservation, by share key, with what was paid within each."""
    shares: dict[str, Share] = {}
    for record in found.after:
        if record.kind != "pay":
            continue
        here = f"{where}, record seq={record.seq}"
        body = record.body
        name, within = share_of(body, here)
        if name is None:
            continue
        if not within:
            shares[name] = Share.claimed(body, rule, here)
        elif name in shares:
            charge = rule.read_charge(body.get("charge"), here)
            shares[name] = shares[name].plus(charge, body["events"], int(body["group_size"]))
    return shares
