"""The budget-rule contract: how one dataset's spends are charged, summed and checked against its budget.

A rule is a pure object: it holds the budget (and what it derived from it when the budget was set) and does
arithmetic on exact decimal amounts. The accountant keeps the running totals in the ledger, holds the lock,
and asks the rule. The shape follows Google dp-accounting's ``PrivacyAccountant`` (one abstract class, one
subclass per composition theorem, each with its validity argument) and Opacus's accountant registry (a
rule is looked up by the name the ledger stores; see :mod:`dp_pipeline.accounting.rules`).

Running totals. A rule names the exact sums it keeps (:attr:`BudgetRule.amounts`) and the counters it keeps
(:attr:`BudgetRule.counters`); a :class:`Charge` gives one amount per name (None: the request has no such
amount under the rule) and :meth:`BudgetRule.counts` says what it adds to each counter. The ledger stores
them, beside the number of active and open reservations, as the record's ``totals`` JSON: a new rule keeps
its own sums there (say ρ for zCDP) without any change to the ledger.

Partitions. A dataset declared partitioned (``set_budget(..., relation="add_remove", partitions=L)``) keeps,
under ``"partitions"``
in the same JSON, one :class:`Part` (the rule's sums and counters) per partition that a release named; the
top-level sums are then those of the releases that named none (they read the whole dataset). A rule never
sees the parts: the accountant hands it the totals of each person (:meth:`Totals.each_person` for L = 1),
an upper bound on them (:meth:`Totals.largest`: the whole-dataset sums plus, per amount, the L largest
partition sums), or, without parallel composition, :meth:`Totals.summed`; see
:class:`~dp_pipeline.accounting._records.DatasetBudget`. Totals without parts are written exactly as before.

References
----------
Google, dp-accounting, ``dp_accounting/privacy_accountant.py``.
Meta, Opacus, ``opacus/accountants/registry.py``.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar, Self

from dp_pipeline import _exact as exact
from dp_pipeline.events import PrivacyEvent, flatten_events
from dp_pipeline.exceptions import LedgerError
from dp_pipeline.guarantees import Guarantee

__all__ = ["BudgetRule", "Charge", "Part", "PlanCharge", "Totals", "parse_decimal"]

_ZERO = Decimal(0)


def parse_decimal(text: Any, where: str) -> Decimal:
    """A finite decimal read from the ledger, or a LedgerError naming ``where``."""
    try:
        value = Decimal(str(text))
    except ArithmeticError:
        raise LedgerError(f"{where}: {text!r} is not a decimal number") from None
    if not value.is_finite():
        raise LedgerError(f"{where}: {text!r} is not finite")
    return value


@dataclass(frozen=True)
class Charge:
    """What one reservation adds to its rule's running sums: an exact decimal per amount name, or None
    when the request has no such amount under the rule (e.g. no μ for an (ε, δ > 0) release)."""

    amounts: Mapping[str, Decimal | None]

    def __getitem__(self, name: str) -> Decimal | None:
        return self.amounts.get(name)

    def to_json(self) -> dict[str, str | None]:
        return {name: None if value is None else str(value) for name, value in self.amounts.items()}

    @classmethod
    def from_json(cls, data: Any, names: Sequence[str], where: str) -> Charge:
        """A recorded charge; a name the record lacks reads as None (no such amount)."""
        if not isinstance(data, Mapping):
            raise LedgerError(f"{where}: unreadable charge {data!r}")
        return cls(
            {name: None if data.get(name) is None else parse_decimal(data[name], where) for name in names}
        )

    @classmethod
    def total(cls, charges: Sequence[Charge], names: Sequence[str]) -> Charge:
        """The exact sum of ``charges`` per amount; an amount that one of them lacks is lacking in the sum."""
        sums: dict[str, Decimal | None] = dict.fromkeys(names, _ZERO)
        for charge in charges:
            for name in names:
                part, so_far = charge[name], sums[name]
                sums[name] = None if part is None or so_far is None else exact.add(so_far, part)
        return cls(sums)

    def covers(self, needed: Charge) -> bool:
        """Whether this recorded charge counts at least what ``needed`` counts.

        A missing amount only makes the check stricter (a charge without ε is not pure; one without μ
        blocks the μ-GDP route), so it is allowed; an amount the request does not have, or a smaller one,
        is not. Ledgers written before amounts were recorded at the float's exact binary value hold its
        shortest decimal instead, which may be below the exact value by less than half a unit in the last
        place: an amount that rounds to the same double as the price covers it.
        """
        for name in {*self.amounts, *needed.amounts}:
            got, need = self[name], needed[name]
            if need is None and got is not None:
                return False
            if need is not None and got is not None and got < need and float(got) < float(need):
                return False
        return True


@dataclass(frozen=True)
class Part:
    """The running sums and counters of one partition: the active releases that named it."""

    sums: Mapping[str, Decimal]
    counts: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        return {**{name: str(value) for name, value in self.sums.items()}, **self.counts}

    def moved(self, charge: Charge, counts: Mapping[str, int], sign: int) -> Part:
        """This part with ``charge`` added (``sign`` = 1) or taken away (−1)."""
        step = exact.add if sign > 0 else exact.subtract
        return Part(
            {name: step(value, charge[name] or _ZERO) for name, value in self.sums.items()},
            {name: value + sign * counts.get(name, 0) for name, value in self.counts.items()},
        )

    def same_as(self, other: Part) -> bool:
        return (
            self.sums.keys() == other.sums.keys()
            and all(self.sums[name] == other.sums[name] for name in self.sums)
            and dict(self.counts) == dict(other.counts)
        )


@dataclass(frozen=True)
class Totals:
    """Running totals over a dataset's active (open or committed) reservations: the rule's exact sums and
    counters, how many reservations are active and how many of them are still open, and for a partitioned
    dataset the sums of each partition (``parts``; the top-level sums are then those of the releases that
    named no partition)."""

    sums: Mapping[str, Decimal]
    counts: Mapping[str, int]
    active: int = 0
    open: int = 0
    parts: Mapping[str, Part] = field(default_factory=dict)

    def to_json(self, parts: Collection[str] | None = None) -> dict[str, Any]:
        """The JSON the ledger stores; with ``parts``, only those partitions (a record stores the ones it
        changed, the head row all of them). Without parts it is exactly what unpartitioned ledgers hold."""
        data: dict[str, Any] = {
            **{name: str(value) for name, value in self.sums.items()},
            **self.counts,
            "active": self.active,
            "open": self.open,
        }
        shown = sorted(self.parts if parts is None else set(parts) & set(self.parts))
        if shown:
            data["partitions"] = {name: self.parts[name].to_json() for name in shown}
        return data

    def plus(self, charge: Charge, counts: Mapping[str, int], partitions: Sequence[str] = ()) -> Totals:
        """These totals with one more open reservation of ``charge``, on ``partitions`` (none: the whole
        dataset)."""
        moved = self._moved(charge, counts, partitions, 1)
        return Totals(moved.sums, moved.counts, self.active + 1, self.open + 1, moved.parts)

    def minus(self, charge: Charge, counts: Mapping[str, int], partitions: Sequence[str] = ()) -> Totals:
        """These totals without an open reservation of ``charge`` on ``partitions`` (it was cancelled)."""
        moved = self._moved(charge, counts, partitions, -1)
        return Totals(moved.sums, moved.counts, self.active - 1, self.open - 1, moved.parts)

    def _moved(
        self, charge: Charge, counts: Mapping[str, int], partitions: Sequence[str], sign: int
    ) -> Totals:
        if not partitions:
            common = Part(self.sums, self.counts).moved(charge, counts, sign)
            return Totals(common.sums, common.counts, self.active, self.open, self.parts)
        empty = Part(dict.fromkeys(self.sums, _ZERO), dict.fromkeys(self.counts, 0))
        parts = dict(self.parts)
        for name in partitions:
            parts[name] = parts.get(name, empty).moved(charge, counts, sign)
            if parts[name].same_as(empty):  # every release that named it was cancelled
                del parts[name]
        return Totals(self.sums, self.counts, self.active, self.open, parts)

    def committed(self) -> Totals:
        """These totals with one open reservation committed (still active)."""
        return Totals(self.sums, self.counts, self.active, self.open - 1, self.parts)

    def only(self, partitions: Collection[str]) -> Totals:
        """These totals with only the parts of ``partitions`` (what a record that changed them stores)."""
        kept = {name: self.parts[name] for name in partitions if name in self.parts}
        return Totals(self.sums, self.counts, self.active, self.open, kept)

    def largest(self, limit: int) -> Totals:
        """The totals of the person with the most loss when nobody's data lie in more than ``limit``
        partitions: the whole-dataset sums plus, per amount and per counter, the ``limit`` largest partition
        values (possibly of different partitions: an upper bound on every choice of ``limit`` partitions).
        Without parts, these totals themselves."""
        if not self.parts:
            return self
        parts = self.parts.values()
        sums = {name: value for name, value in self.sums.items()}
        for name in sums:
            for top in heapq.nlargest(limit, (part.sums[name] for part in parts)):
                sums[name] = exact.add(sums[name], top)
        counts = {
            name: value + sum(heapq.nlargest(limit, (part.counts[name] for part in parts)))
            for name, value in self.counts.items()
        }
        return Totals(sums, counts, self.active, self.open)

    def summed(self) -> Totals:
        """The totals of a person every release may have read: the whole-dataset sums plus the sums of every
        partition (no parallel composition). Without parts, these totals themselves."""
        if not self.parts:
            return self
        whole = Part(self.sums, self.counts)
        for part in self.parts.values():
            whole = whole.moved(Charge(dict(part.sums)), part.counts, 1)
        return Totals(whole.sums, whole.counts, self.active, self.open)

    def each_person(self) -> list[Totals]:
        """The totals of every person when nobody's data lie in more than one partition: those of a person in
        each partition (:meth:`within`), and of a person in none (the whole-dataset sums alone)."""
        alone = Totals(self.sums, self.counts, self.active, self.open)
        return [self.within(name) for name in self.parts] + [alone]

    def within(self, partition: str) -> Totals:
        """The totals of a person whose data lie in ``partition`` alone: the whole-dataset sums plus that
        partition's."""
        part = self.parts.get(partition)
        if part is None:
            return Totals(self.sums, self.counts, self.active, self.open)
        return Totals(
            {name: exact.add(value, part.sums[name]) for name, value in self.sums.items()},
            {name: value + part.counts[name] for name, value in self.counts.items()},
            self.active,
            self.open,
        )

    def same_as(self, other: Totals) -> bool:
        """Equal as numbers (``0.10`` and ``0.1`` are the same amount)."""
        return (
            Part(self.sums, self.counts).same_as(Part(other.sums, other.counts))
            and (self.active, self.open) == (other.active, other.open)
            and self.parts.keys() == other.parts.keys()
            and all(self.parts[name].same_as(other.parts[name]) for name in self.parts)
        )


@dataclass(frozen=True)
class PlanCharge:
    """What a plan (releases declared before any runs) adds to the totals, the cost shown in the budget's
    currency, the method that composed it, and ``basis``: what of the totals the price was computed from
    (None when it does not depend on them; see :meth:`BudgetRule.plan_basis`)."""

    charge: Charge
    cost: Guarantee
    method: str
    basis: Any = field(default=None)


@dataclass(frozen=True)
class BudgetRule(ABC):
    """A dataset's budget and the composition rule that charges spends against it.

    Subclasses are frozen dataclasses whose constructor only stores; :meth:`create` checks a new budget
    and derives what the rule needs, :meth:`from_parameters` reads what the ledger stored. Register a new
    rule in :data:`dp_pipeline.accounting.rules.RULES`. Test it by subclassing
    :class:`dp_pipeline.accounting.testing.BudgetRuleContract`.

    Class attributes
    ----------------
    name : str
        What the ledger stores as the budget's ``method``; with the budget's type it picks the rule.
    names : tuple of str
        What ``set_budget(..., rule=...)`` accepts for this rule; the first is the one shown.
    currency : type
        The budget's guarantee type (``ApproxDP`` or ``GaussianDP``).
    title : str
        A few words for tables ("basic composition").
    amounts, counters : tuple of str
        The exact sums and counters of the running totals (see the module notes).

    Attributes
    ----------
    budget : Guarantee
        The dataset's budget.
    """

    budget: Guarantee

    name: ClassVar[str]
    names: ClassVar[tuple[str, ...]]
    currency: ClassVar[type[Guarantee]]
    title: ClassVar[str]
    amounts: ClassVar[tuple[str, ...]]
    counters: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------------------ budget and storage

    @classmethod
    def create(cls, budget: Guarantee) -> Self:
        """The rule for a new budget (InvalidParameterError if the rule cannot take it)."""
        return cls(budget)

    @classmethod
    def from_parameters(cls, budget: Guarantee, parameters: Mapping[str, Any], where: str) -> Self:
        """The rule as the ledger stored it (:meth:`parameters`); a LedgerError naming ``where`` if the
        parameters are unreadable."""
        return cls(budget)

    def parameters(self) -> dict[str, Any]:
        """What the ledger stores beside the budget's guarantee (plain JSON)."""
        return {}

    def check_parameters(self) -> str | None:
        """The way the stored parameters contradict the budget (found by verify), or None."""
        return None

    # ------------------------------------------------------------------------------ running totals

    def empty(self) -> Totals:
        """The totals of a dataset with no active reservation."""
        return Totals(dict.fromkeys(self.amounts, _ZERO), dict.fromkeys(self.counters, 0))

    def carry(self, totals: Totals) -> Totals:
        """The totals this rule starts from when it replaces another rule's budget (only while nothing is
        active): the same totals when they keep the same sums, else this rule's empty totals."""
        if set(totals.sums) == set(self.amounts) and set(totals.counts) == set(self.counters):
            return totals
        return self.empty()

    def read_totals(self, data: Any, where: str) -> Totals:
        """Totals as the ledger stored them (:meth:`Totals.to_json`), or a LedgerError naming ``where``."""
        if not isinstance(data, Mapping):
            raise LedgerError(f"{where}: unreadable running totals {data!r}")
        try:
            stored = data.get("partitions", {})
            if not isinstance(stored, Mapping):
                raise TypeError("the partitions are not a mapping")
            return Totals(
                {name: parse_decimal(data[name], where) for name in self.amounts},
                {name: int(data[name]) for name in self.counters},
                int(data["active"]),
                int(data["open"]),
                {str(name): self._read_part(part, where) for name, part in stored.items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise LedgerError(f"{where}: unreadable running totals {data!r} ({err})") from None

    def _read_part(self, data: Mapping[str, Any], where: str) -> Part:
        return Part(
            {name: parse_decimal(data[name], where) for name in self.amounts},
            {name: int(data[name]) for name in self.counters},
        )

    def read_charge(self, data: Any, where: str) -> Charge:
        """A reservation's charge as the ledger stored it."""
        return Charge.from_json(data, self.amounts, where)

    def counts(self, charge: Charge) -> dict[str, int]:
        """What one charge adds to each counter."""
        return {}

    def add(self, totals: Totals, charge: Charge, partitions: Sequence[str] = ()) -> Totals:
        """``totals`` with one more open reservation of ``charge`` (on ``partitions``, if it named any)."""
        return totals.plus(charge, self.counts(charge), partitions)

    def remove(self, totals: Totals, charge: Charge, partitions: Sequence[str] = ()) -> Totals:
        """``totals`` without the open reservation of ``charge`` (on ``partitions``)."""
        return totals.minus(charge, self.counts(charge), partitions)

    # ------------------------------------------------------------------------------ pricing

    @abstractmethod
    def charge_event(self, event: PrivacyEvent, k: int) -> tuple[Charge, Guarantee]:
        """The charge of one release for groups of ``k`` and the cost shown (in the event's own terms or the
        budget's currency). ``event`` is already read under the dataset's neighbouring relation and is not
        a ``"composite"`` event (the accountant charges a composite as the sum of its parts).

        Raises UnsupportedCompositionError when the rule cannot charge the event at all.
        """

    @abstractmethod
    def charge_cost(self, charge: Charge) -> Guarantee:
        """A summed charge as a guarantee in the budget's currency, rounded up."""

    @abstractmethod
    def method_of(self, charge: Charge) -> str:
        """How the cost of ``charge`` was composed (``"basic"``, ``"gdp"`` …), as reports name it."""

    def charge_total(self, charges: Sequence[Charge]) -> Charge:
        """The charge of several releases counted together: their exact sums."""
        return Charge.total(charges, self.amounts)

    def charge_each(self, events: Sequence[PrivacyEvent], k: int) -> Charge:
        """The exact sum of the events' charges as if each were spent alone, a composite as its parts
        (UnsupportedCompositionError if one cannot be)."""
        return self.charge_total([self.charge_event(e, k)[0] for e in flatten_events(events)])

    @abstractmethod
    def charge_plan(
        self, events: Sequence[PrivacyEvent], k: int, delta: float | None, totals: Totals
    ) -> PlanCharge:
        """A plan's charge: releases all declared before any of them runs, for groups of ``k``.

        ``events`` are read under the dataset's relation; a ``"composite"`` event is one release made of
        its parts, which select on the same data independently (:meth:`charge_each` splits it); ``delta`` is
        the δ asked for (None: the rule's default); ``totals`` are what is spent so far (for rules whose
        plan price depends on what is left, see :meth:`plan_basis`).
        """

    def plan_basis(self, totals: Totals) -> Any:
        """What of ``totals`` a plan's price may depend on (compared before a plan priced outside the lock is
        charged: a different basis prices it again). None: plan prices never depend on the totals."""
        return None

    # ------------------------------------------------------------------------------ the check and reports

    @abstractmethod
    def fits(self, totals: Totals) -> bool:
        """Whether ``totals`` (including a new charge) are within the budget: the accept/refuse decision."""

    @abstractmethod
    def spent(self, totals: Totals) -> tuple[Guarantee, str]:
        """What ``totals`` have spent in the budget's currency, rounded up, and the method that says so."""

    @abstractmethod
    def remaining(self, totals: Totals) -> tuple[Guarantee, str]:
        """What is left of the budget after ``totals``, rounded down, such that spending exactly that
        still fits, and the method."""

    @abstractmethod
    def describe(self) -> str:
        """The budget and its rule, for messages."""

    def refusal_hint(self, cost: Guarantee) -> str:
        """Advice to add when a request of ``cost`` was refused (empty: nothing specific to say)."""
        return ""

    # ------------------------------------------------------------------------------ paying from a reservation

    def fits_within(self, paid: Charge, limit: Charge) -> bool:
        """Whether releases whose charges sum to ``paid`` fit a reservation charged ``limit``.

        True iff every amount that ``limit`` counts is counted by ``paid`` too and is no larger, and no
        counter of ``paid`` (as the rule counts one charge of that size) exceeds ``limit``'s. An amount the
        limit lacks (None) is a route its reservation already closed in the dataset's totals, so the paid
        releases may have it or not.

        **Validity.** The dataset's totals count ``limit`` and were accepted by :meth:`fits`. Replacing
        ``limit`` by ``paid`` lowers or keeps every sum on the routes the totals leave open and every
        counter, so for a rule whose :meth:`fits` can only turn false when a sum or a counter grows (all
        built-in rules), the releases actually made fit whenever the totals do; and the paid releases
        compose under the rule's own, adaptively valid, composition. A rule whose check is not monotone
        in that sense, or whose counters count releases, overrides this method.
        """
        for name in self.amounts:
            cap = limit[name]
            if cap is None:
                continue
            got = paid[name]
            if got is None or got > cap:
                return False
        mine, allowed = self.counts(paid), self.counts(limit)
        return all(mine.get(name, 0) <= allowed.get(name, 0) for name in self.counters)

    def left(self, limit: Charge, paid: Charge) -> tuple[Guarantee, str]:
        """What a release chosen now could still cost after ``paid`` within a reservation charged ``limit``,
        in the budget's currency, rounded down (zero when nothing is left), and the method.

        The built-in rules implement it; a new rule that does not raises NotImplementedError, and only
        :meth:`~dp_pipeline.accounting._reservation.Reservation.remaining` needs it.
        """
        raise NotImplementedError(f"{type(self).__name__} does not report what is left of a reservation")
